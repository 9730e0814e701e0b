// A database migrated by a newer Outpost (the downgrade after an upgrade): `outpost run` and the CLI
// refuse it with exit code 5 and one line saying what to do (no stack trace), and leave it untouched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CLI, ROOT, provision, removeDir, tempDataDir } from '../helpers/daemon.js';
import { MIGRATIONS } from '../../src/store/migrations.js';

test('a database a newer schema wrote: exit 5, one line naming both versions and the way out, the file untouched', () => {
  const parent = tempDataDir();
  const dataDir = join(parent, 'data');
  try {
    provision(dataDir);
    const dbPath = join(dataDir, 'outpost.db');
    const newer = MIGRATIONS.length + 1;
    const db = new Database(dbPath);
    db.pragma(`user_version = ${newer}`);
    db.close();
    const before = createHash('sha256').update(readFileSync(dbPath)).digest('hex');
    const env: NodeJS.ProcessEnv = { ...process.env, OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0' };
    delete env.OUTPOST_CONFIG;
    for (const args of [['run'], ['device', 'list']]) {
      const r = spawnSync(process.execPath, [CLI, ...args, '--data', dataDir], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 5, `${args.join(' ')}: ${r.stderr}`);
      const lines = r.stderr.trim().split('\n');
      assert.equal(lines.length, 1, `one line, no stack trace: ${r.stderr}`);
      assert.match(lines[0]!, new RegExp(`database schema version ${newer} is newer than this Outpost supports \\(${MIGRATIONS.length}\\); upgrade Outpost, or restore the backup`));
      assert.ok(!r.stdout.includes('"msg":"ready"'));
    }
    assert.equal(createHash('sha256').update(readFileSync(dbPath)).digest('hex'), before, 'the refused database is untouched');
  } finally {
    removeDir(parent);
  }
});
