// `outpost backup` while the daemon ingests, `outpost restore` into another data dir, and what
// restore refuses (a running daemon, a file that is not a good Outpost database).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CLI, ROOT, api, cli, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { DataDirLock } from '../../src/store/data-dir.js';
import { backupDatabase } from '../../src/ops/backup.js';

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const env = { ...process.env };
    delete env.NODE_EXTRA_CA_CERTS;
    const proc = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    proc.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

test('a backup taken while the daemon ingests restores to a consistent database', async () => {
  const work = tempDataDir();
  const dataDir = join(work, 'data');
  const restoredDir = join(work, 'restored');
  const backupFile = join(work, 'outpost-backup.db');
  // A database of some size first (≈ 15 MB of history), so the backup takes many steps and reports progress.
  const setup = await startDaemon({ dataDir });
  const { device, app } = provision(dataDir, [{ name: 'counter', is: 'sensor', profile: { type: 'integer' } }]);
  await setup.stop();
  {
    const db = new BetterSqlite3(join(dataDir, 'outpost.db'));
    const asset = db.prepare('SELECT id FROM assets WHERE device_id = ?').pluck().get(device.id) as string;
    const insert = db.prepare('INSERT INTO states (asset_id, at, value, received_at) VALUES (?, ?, ?, ?)');
    const t0 = Date.now() - 86_400_000;
    db.transaction(() => {
      for (let i = 0; i < 150_000; i++) insert.run(asset, t0 + i, JSON.stringify(-i), t0 + i);
    })();
    db.close();
  }

  const daemon = await startDaemon({ dataDir });
  const acknowledged: number[] = [];
  let ingesting = true;
  const ingest = (async () => {
    for (let value = 1; ingesting; value++) {
      const r = await api(daemon.url, 'PUT', `/device/${device.id}/asset/counter/state`, { token: device.token, json: { value } });
      if (r.status === 200) acknowledged.push(value);
    }
  })();
  try {
    while (acknowledged.length < 50) await new Promise((r) => setTimeout(r, 20));
    const ackedBeforeBackup = acknowledged.length;
    const backup = await runCli(['backup', backupFile, '--data', dataDir]);
    const ackedDuringBackup = acknowledged.length - ackedBeforeBackup;
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, /backup written to .*outpost-backup\.db \(\d+ bytes, \d+ pages, checked\)/);
    assert.match(backup.stderr, /backup: \d+% of \d+ pages/, 'a progress line for a large database');
    assert.ok(ackedDuringBackup > 0, 'the daemon kept acknowledging states during the backup');
    while (acknowledged.length < ackedBeforeBackup + ackedDuringBackup + 20) await new Promise((r) => setTimeout(r, 20));
    ingesting = false;
    await ingest;

    // The backup on its own: intact, keys consistent, every state acknowledged before it began is there,
    // and the latest state is one of its own history rows (both written in one transaction).
    const copy = new BetterSqlite3(backupFile, { readonly: true });
    assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
    assert.deepEqual(copy.pragma('foreign_key_check'), []);
    const values = new Set((copy.prepare('SELECT value FROM states WHERE CAST(value AS INTEGER) > 0').pluck().all() as string[]).map(Number));
    for (const v of acknowledged.slice(0, ackedBeforeBackup)) assert.ok(values.has(v), `state ${v} acknowledged before the backup is in it`);
    const latest = copy.prepare('SELECT l.value, s.value AS history FROM latest_states l JOIN states s ON s.seq = l.seq').get() as { value: string; history: string };
    assert.equal(latest.value, latest.history);
    assert.equal(Number(latest.value), Math.max(...values), 'the latest state is the newest one in the copy');
    copy.close();

    // Restore refuses while a daemon runs on the data dir, and leaves it alone.
    const refused = cli(['restore', backupFile, '--data', dataDir]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /a daemon runs on .*stop it first.*DAEMON_RUNNING/);
    assert.equal((await api(daemon.url, 'GET', `/device/${device.id}`, { token: app.token })).status, 200);

    // Into a new data dir, then the daemon serves it.
    const restored = cli(['restore', backupFile, '--data', restoredDir]);
    assert.equal(restored.code, 0, restored.stderr);
    const second = await startDaemon({ dataDir: restoredDir });
    try {
      const got = await api(second.url, 'GET', `/device/${device.id}/asset/counter/state`, { token: app.token });
      assert.equal(got.status, 200);
      assert.equal(got.body.state?.value ?? got.body.value, Number(latest.value));
    } finally {
      assert.equal(await second.stop(), 0);
    }
  } finally {
    ingesting = false;
    await ingest;
    await daemon.stop();
    removeDir(work);
  }
});

test('restore checks the file first and keeps the database it replaces; backup never overwrites', async () => {
  const work = tempDataDir();
  const dataDir = join(work, 'data');
  try {
    provision(dataDir);
    const good = join(work, 'good.db');
    assert.equal(cli(['backup', good, '--data', dataDir]).code, 0);
    const again = cli(['backup', good, '--data', dataDir]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists.*TARGET_EXISTS/);

    const garbage = join(work, 'garbage.db');
    writeFileSync(garbage, Buffer.alloc(8192, 0x42));
    const notDb = cli(['restore', garbage, '--data', dataDir]);
    assert.equal(notDb.code, 1);
    assert.match(notDb.stderr, /garbage\.db .*NOT_A_BACKUP/);

    const foreign = join(work, 'foreign.db');
    const f = new BetterSqlite3(foreign);
    f.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)');
    f.close();
    assert.match(cli(['restore', foreign, '--data', dataDir]).stderr, /not an Outpost one/);

    // A daemon that holds the data dir's lock but has no control socket (yet) is found by the lock.
    const lock = DataDirLock.acquire(dataDir);
    try {
      const locked = cli(['restore', good, '--data', dataDir]);
      assert.equal(locked.code, 1);
      assert.match(locked.stderr, new RegExp(`a daemon runs on .*\\(pid ${process.pid}\\).*DAEMON_RUNNING`));
    } finally {
      lock.release();
    }

    const ok = cli(['restore', good, '--data', dataDir]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /the previous database is kept as .*outpost\.db\.before-restore-/);
    const kept = readdirSync(dataDir).filter((n) => n.startsWith('outpost.db.before-restore-') && !n.endsWith('-wal') && !n.endsWith('-shm'));
    assert.equal(kept.length, 1);
    assert.ok(existsSync(join(dataDir, 'outpost.db')));
    assert.equal(cli(['device', 'list', '--json', '--data', dataDir]).code, 0, 'the restored database opens');
  } finally {
    removeDir(work);
  }
});

test('a backup is owner-only from its first byte, and no -wal/-shm/-journal is left beside it', async () => {
  const work = tempDataDir();
  const dataDir = join(work, 'data');
  const backupFile = join(work, 'private.db');
  const previousUmask = process.umask(0o022);
  try {
    provision(dataDir);
    // Enough pages for several backup steps, so the copy is looked at while it is being written.
    const db = new BetterSqlite3(join(dataDir, 'outpost.db'));
    db.exec("CREATE TABLE filler (x BLOB); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO filler SELECT randomblob(4000) FROM n;");
    db.close();
    const seen = new Map<string, number>();
    const look = () => {
      for (const name of readdirSync(work)) if (name.startsWith('private.db')) seen.set(name, statSync(join(work, name)).mode & 0o777);
    };
    const result = await backupDatabase(dataDir, backupFile, (p) => {
      if (p.remainingPages > 0) look();
    });
    assert.ok(result.pages > 2048, `${result.pages} pages, copied in several steps`);
    assert.ok(seen.has('private.db.partial'), `the copy was seen while written: ${[...seen.keys()].join(', ')}`);
    for (const [name, mode] of seen) assert.equal(mode, 0o600, `${name} was ${mode.toString(8)} while the backup ran`);
    assert.equal(statSync(backupFile).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(work).filter((n) => n.startsWith('private.db')), ['private.db'], 'only the backup itself is left');
    // Opened read-only afterwards (a person with sqlite3, restore's own check), it leaves nothing beside it either.
    const copy = new BetterSqlite3(backupFile, { readonly: true });
    assert.equal(copy.pragma('quick_check', { simple: true }), 'ok');
    copy.close();
    assert.deepEqual(readdirSync(work).filter((n) => n.startsWith('private.db')), ['private.db']);
    // And it restores.
    const restored = cli(['restore', backupFile, '--data', join(work, 'restored')]);
    assert.equal(restored.code, 0, restored.stderr);
  } finally {
    process.umask(previousUmask);
    removeDir(work);
  }
});

test('restore refuses a FIFO (or any file that is not a regular one) at once, and checks for a daemon before saying it replaces anything', async () => {
  const work = tempDataDir();
  const dataDir = join(work, 'data');
  try {
    provision(dataDir);
    const fifo = join(work, 'backup.fifo');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const run = (file: string) => {
      const env = { ...process.env };
      delete env.NODE_EXTRA_CA_CERTS;
      // Before the fix this blocked forever opening the FIFO: the timeout turns that into a failure.
      return spawnSync(process.execPath, [CLI, 'restore', file, '--data', dataDir], { cwd: ROOT, env, encoding: 'utf8', timeout: 15_000 });
    };
    const started = Date.now();
    const piped = run(fifo);
    assert.equal(piped.error, undefined, 'restore returned (it did not hang on the FIFO)');
    assert.equal(piped.status, 1);
    assert.match(piped.stderr, /backup\.fifo is a FIFO \(named pipe\), not a regular file.*NOT_A_BACKUP/);
    assert.ok(Date.now() - started < 10_000);
    const dir = run(work);
    assert.equal(dir.status, 1);
    assert.match(dir.stderr, /is a directory.*NOT_A_BACKUP/);
    assert.doesNotMatch(piped.stderr + dir.stderr, /replacing the database/, 'nothing is announced for a file that is refused');

    // With a daemon on the data dir, the refusal comes first and alone.
    const good = join(work, 'good.db');
    assert.equal(cli(['backup', good, '--data', dataDir]).code, 0);
    const daemon = await startDaemon({ dataDir });
    try {
      const refused = run(good);
      assert.equal(refused.status, 1);
      assert.match(refused.stderr, /a daemon runs on .*DAEMON_RUNNING/);
      assert.doesNotMatch(refused.stderr, /replacing the database/);
    } finally {
      await daemon.stop();
    }
    // Stopped: now it says what it replaces, and does it.
    const ok = run(good);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stderr, /replacing the database of .* with .*good\.db/);
  } finally {
    removeDir(work);
  }
});
