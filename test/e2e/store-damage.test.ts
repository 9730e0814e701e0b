// A database file damaged in the middle (a bad SD card sector, a torn write): the daemon finds it at
// start and refuses to run on it (exit 4, what to do); started without the check, it answers 503
// STORAGE_UNAVAILABLE where a read hits the damage, and /healthz says failing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, statSync, writeSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { CLI, ROOT, api, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { Store } from '../../src/store/store.js';

const STATES = 30_000;

/** A data dir with one device, an asset `log` holding STATES states, and its tokens. */
function populatedDataDir() {
  const parent = tempDataDir();
  const dataDir = join(parent, 'data');
  const { device, app } = provision(dataDir, [{ name: 'log', is: 'sensor', profile: { type: 'string' } }]);
  const store = Store.open(dataDir);
  const asset = store.assets.byName(device.id, 'log')!;
  const base = Date.UTC(2026, 0, 1);
  for (let i = 0; i < STATES; i += 1000) {
    store.states.write(
      Array.from({ length: 1000 }, (_, j) => ({ assetId: asset.id, at: base + (i + j) * 1000, valueJson: JSON.stringify(`${i + j}:${'x'.repeat(80)}`), receivedAt: base })),
    );
  }
  store.close(); // the last connection checkpoints the WAL into the database file
  return { parent, dataDir, device, app };
}

/** Overwrites whole pages in the middle of the file (not the header, not the schema) with random bytes. */
function damageMiddle(dbPath: string): void {
  const pageSize = 4096;
  const pages = Math.floor(statSync(dbPath).size / pageSize);
  assert.ok(pages > 200, `database large enough to damage its middle (${pages} pages)`);
  const fd = openSync(dbPath, 'r+');
  try {
    for (let p = Math.floor(pages * 0.4); p < Math.floor(pages * 0.6); p += 7) writeSync(fd, randomBytes(pageSize), 0, pageSize, p * pageSize);
  } finally {
    closeSync(fd);
  }
}

test('a database damaged mid-file: the daemon refuses to start with exit 4 and says to restore a backup', () => {
  const { parent, dataDir } = populatedDataDir();
  try {
    damageMiddle(join(dataDir, 'outpost.db'));
    const env: NodeJS.ProcessEnv = { ...process.env, OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0' };
    delete env.OUTPOST_CONFIG;
    const r = spawnSync(process.execPath, [CLI, 'run', '--data', dataDir], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 4, r.stderr);
    assert.ok(r.stderr.includes(`the database file ${join(dataDir, 'outpost.db')} is damaged`), r.stderr);
    assert.match(r.stderr, /restore the newest backup/);
    assert.ok(!r.stdout.includes('"msg":"ready"'));
  } finally {
    removeDir(parent);
  }
});

test('started without the check on a damaged database: reads that hit the damage are 503, /healthz is failing, one error line says what to do', async () => {
  const { parent, dataDir, device, app } = populatedDataDir();
  damageMiddle(join(dataDir, 'outpost.db'));
  const configFile = join(parent, 'config.json');
  writeFileSync(configFile, JSON.stringify({ version: 1, store: { checkOnStart: false } }));
  const d = await startDaemon({ dataDir, args: ['--config', configFile] });
  try {
    const before = await api(d.url, 'GET', '/healthz');
    assert.equal(before.body.status, 'ok', 'nothing is known to be wrong before a read hits the damage');
    // Walk the whole history: some page of it is damaged.
    const statuses = new Map<number, number>();
    let refusal: Awaited<ReturnType<typeof api>> | undefined;
    let cursor = '';
    for (let page = 0; page < STATES / 1000 + 1; page++) {
      const r = await api(d.url, 'GET', `/device/${device.id}/asset/log/states?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, { token: app.token });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status !== 200) {
        refusal = r;
        break;
      }
      if (!r.body.next) break;
      cursor = r.body.next;
    }
    assert.ok(refusal, `a read hit the damage (${JSON.stringify([...statuses])})`);
    assert.equal(refusal.status, 503);
    assert.equal(refusal.body.code, 'STORAGE_UNAVAILABLE');
    assert.match(refusal.body.error, /damaged \(SQLITE_CORRUPT/);
    assert.ok(!statuses.has(500));

    const health = await api(d.url, 'GET', '/healthz');
    assert.equal(health.status, 503);
    assert.equal(health.body.status, 'failing');
    assert.match(health.body.reason, /store: database file damaged .*restore the newest backup/);

    // Another damaged read is refused the same way, and the error is logged once, not per request.
    await api(d.url, 'GET', `/device/${device.id}/asset/log/states?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, { token: app.token });
    const damageLines = () => d.logs.filter((l) => l.includes('"level":50') && l.includes('restore the newest backup'));
    // The log is written asynchronously (pino): wait for the line, then make sure no second one follows.
    for (let i = 0; i < 100 && damageLines().length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 500));
    const errors = damageLines();
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.ok(!d.logs.some((l) => l.includes('request failed')), 'no request ended as an internal error');

    // Undamaged parts still work: the latest state and the device.
    assert.equal((await api(d.url, 'GET', `/device/${device.id}/asset/log/state`, { token: app.token })).status, 200);
  } finally {
    assert.equal(await d.stop(), 0);
    removeDir(parent);
  }
});
