// `npm ci && npm start` builds once: `prepare` builds at install, and `prestart` builds only when
// dist/ is older than its sources (scripts/build-if-stale.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/daemon.js';

test('npm start does not build again when dist/ is fresh', () => {
  const scripts = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts as Record<string, string>;
  assert.match(scripts.prepare!, /npm run build/, 'npm ci builds');
  const prestart = () => spawnSync('npm', ['run', '--silent', 'prestart'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, npm_config_loglevel: 'error' } });
  // The first call may build (dist/ older than a source another process just changed); the second must not.
  const first = prestart();
  assert.equal(first.status, 0, first.stderr);
  const second = prestart();
  assert.equal(second.status, 0, second.stderr);
  assert.doesNotMatch(second.stdout + second.stderr, /tsc -p/, 'no second build');
  assert.match(second.stderr, /dist\/ is up to date/);
});
