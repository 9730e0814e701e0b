// `npm start` runs this first (prestart): builds only when dist/ is older than what it is built
// from. `npm ci` already builds once (prepare), so `npm ci && npm start` builds once, not twice,
// while `npm start` after editing a source file still runs the new code.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
// Written last by `npm run build` (scripts/precompile-config-schema.mjs, after tsc).
const stamp = join(root, 'dist', 'core', 'config-schema.precompiled.cjs');
const inputs = ['src', 'scripts', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];

function newestMtime(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = 0;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

const built = existsSync(stamp) && existsSync(join(root, 'dist', 'cli', 'main.js')) ? statSync(stamp).mtimeMs : 0;
const sources = Math.max(...inputs.map((p) => newestMtime(join(root, p))));
if (built > 0 && built >= sources) {
  console.error('outpost: dist/ is up to date with src/; not rebuilding (npm run build forces a build)');
} else {
  const r = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
