// Runs every test/**/*.test.ts with node:test under tsx.
// Node 20's `--test <dir>` silently finds no .ts files, so the files are named here.
// Usage: node test/run.mjs [substring filter...]
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const filters = process.argv.slice(2);

function collect(dir) {
  const found = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...collect(path));
    else if (name.endsWith('.test.ts')) found.push(relative(root, path));
  }
  return found;
}

// The end-to-end tests use real foreign peers from Debian; say so plainly rather than fail obscurely.
// Debian puts the mosquitto broker in /usr/sbin, often not on a user's PATH.
const missing = ['mosquitto_pub', 'mosquitto_sub', 'stdbuf', 'chromium', 'systemd-analyze', 'systemd-notify', 'socat', 'perl', 'mosquitto', 'openssl', 'redis-server'].filter(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool} || test -x /usr/sbin/${tool}`], { stdio: 'ignore' }).status !== 0,
);
// Debian keeps PostgreSQL's server programs off PATH, under its major version.
if (spawnSync('sh', ['-c', 'ls /usr/lib/postgresql/*/bin/initdb'], { stdio: 'ignore' }).status !== 0) missing.push('postgresql');
if (missing.length > 0) {
  console.error(`missing test tools: ${missing.join(', ')}\ninstall them with: apt-get install -y mosquitto mosquitto-clients coreutils chromium systemd socat perl openssl redis-server postgresql`);
  process.exit(1);
}

const files = collect(join(root, 'test')).filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// The machine's extra CA bundle adds ~120 ms to every node start; tests start many processes.
const env = { ...process.env };
delete env.NODE_EXTRA_CA_CERTS;
const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  cwd: root,
  stdio: 'inherit',
  env,
});
process.exit(result.status ?? 1);
