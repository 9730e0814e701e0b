import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import { Store } from '../../src/store/store.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { checkDatabaseFile, receiveTimesOutside } from '../../src/store/database-files.js';
import { inspect } from '../helpers/sqlite.js';

function withStore(work: (store: Store, dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-database-'));
  const store = Store.open(dir);
  try {
    work(store, dir);
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const sensor = (store: Store, deviceId: string, name: string) =>
  store.assets.create({ deviceId, name, is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0);

test('writes to several aggregates in one store transaction commit or roll back together', () => {
  withStore((store) => {
    const { device } = store.devices.create({ name: 'd' }, 0);
    const asset = sensor(store, device.id, 't');
    assert.throws(() =>
      store.transaction(() => {
        const seq = store.uplinks.record({ deviceId: device.id, at: 1, payload: Uint8Array.of(1), port: null, source: 'test', decoded: true, error: null });
        store.states.write([{ assetId: asset.id, at: 1, valueJson: '1', receivedAt: 1, uplinkSeq: seq }]);
        store.commands.record({ deviceId: device.id, assetId: asset.id, valueJson: '1', metaJson: null, at: 1, source: 'test' });
        throw new Error('abandoned');
      }),
    /abandoned/);
    assert.equal(store.uplinks.list(device.id, 10).data.length, 0);
    assert.equal(store.states.count(asset.id), 0);
    assert.equal(store.states.latest(asset.id), undefined);

    store.transaction(() => {
      const seq = store.uplinks.record({ deviceId: device.id, at: 2, payload: Uint8Array.of(2), port: null, source: 'test', decoded: true, error: null });
      store.states.write([{ assetId: asset.id, at: 2, valueJson: '2', receivedAt: 2, uplinkSeq: seq }]);
    });
    assert.equal(store.uplinks.list(device.id, 10).data.length, 1);
    assert.deepEqual(store.states.latest(asset.id), { at: 2, valueJson: '2' });
  });
});

test('a nested transaction is a savepoint: its failure undoes only its own writes', () => {
  withStore((store) => {
    const { device } = store.devices.create({ name: 'd' }, 0);
    const asset = sensor(store, device.id, 't');
    store.transaction(() => {
      store.states.write([{ assetId: asset.id, at: 1, valueJson: '1', receivedAt: 1 }]);
      assert.throws(() =>
        store.transaction(() => {
          // A device with its first token is itself one transaction: here a savepoint inside ours.
          store.devices.create({ name: 'inner' }, 0);
          store.states.write([{ assetId: asset.id, at: 2, valueJson: '2', receivedAt: 2 }]);
          throw new Error('inner fails');
        }),
      /inner fails/);
    });
    assert.equal(store.states.count(asset.id), 1);
    assert.deepEqual(store.states.latest(asset.id), { at: 1, valueJson: '1' });
    assert.deepEqual(store.devices.list().map((d) => d.name), ['d']);
    assert.equal(store.tokens.list().length, 1, 'the inner device token went with the savepoint');
  });
});

test('the data version moves when another connection commits, not for writes through the store itself', () => {
  withStore((store) => {
    const before = store.dataVersion();
    store.devices.create({ name: 'own' }, 0);
    assert.equal(store.dataVersion(), before);
    const other = new BetterSqlite3(store.path);
    other.prepare("UPDATE devices SET title = 'from the CLI'").run();
    other.close();
    assert.notEqual(store.dataVersion(), before);
    assert.equal(store.devices.list()[0]!.title, 'from the CLI');
  });
});

test('schema version, liveness probe, size and checkpoint answer for the open file; the probe throws once closed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-database-'));
  const store = Store.open(dir);
  try {
    assert.equal(store.schemaVersion(), MIGRATIONS.length);
    store.ping();
    const { device } = store.devices.create({ name: 'd' }, 0);
    const asset = sensor(store, device.id, 't');
    store.states.write(Array.from({ length: 200 }, (_, i) => ({ assetId: asset.id, at: i, valueJson: JSON.stringify('x'.repeat(100)), receivedAt: i })));
    assert.ok(store.sizeBytes() >= statSync(store.path).size);
    store.checkpoint();
    assert.equal(statSync(`${store.path}-wal`).size, 0, 'the checkpoint emptied the write-ahead log');
    assert.equal(checkDatabaseFile(store.path), undefined);
    store.close();
    assert.throws(() => store.ping());
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('receiveTimesOutside counts the newest states received outside the window, read-only', () => {
  withStore((store) => {
    const { device } = store.devices.create({ name: 'd' }, 0);
    const asset = sensor(store, device.id, 't');
    store.states.write([
      { assetId: asset.id, at: 1, valueJson: '1', receivedAt: 5 },
      { assetId: asset.id, at: 2, valueJson: '2', receivedAt: 1_000 },
      { assetId: asset.id, at: 3, valueJson: '3', receivedAt: 1_500 },
      { assetId: asset.id, at: 4, valueJson: '4', receivedAt: 9_000 },
    ]);
    assert.deepEqual(receiveTimesOutside(store.path, 100, 2_000), { checked: 4, early: 1, late: 1 });
    assert.deepEqual(receiveTimesOutside(store.path, 100, 2_000, 2), { checked: 2, early: 0, late: 1 }, 'only the newest two by seq');
    const peek = inspect(store.path);
    assert.equal(peek.prepare('SELECT count(*) FROM states').pluck().get(), 4);
    peek.close();
  });
});

// The layering rule of docs/architecture.md ("Store"), checked on the source itself.
const root = fileURLToPath(new URL('../..', import.meta.url));
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

test('only src/store opens SQLite, and src/core depends on nothing in src/store', () => {
  const offenders: string[] = [];
  for (const file of sources(join(root, 'src'))) {
    const path = relative(root, file);
    const text = readFileSync(file, 'utf8');
    if (!path.startsWith('src/store/') && /from 'better-sqlite3'/.test(text)) offenders.push(`${path} imports better-sqlite3`);
    if (path.startsWith('src/core/') && /from '\.\.\/store\//.test(text)) offenders.push(`${path} imports from src/store`);
  }
  assert.deepEqual(offenders, []);
});
