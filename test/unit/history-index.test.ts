// The history index by asset and the raw uplinks' index by device are filled in rounds
// (docs/architecture.md, "History index"): a row is written outside the index, under its owner's
// slice, and a later write puts the waiting rows of a slice in at once. Whatever part a row is in,
// every reader must see it, deletions must reach it, and an upgraded database keeps every row it had.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { MIGRATIONS, migrate } from '../../src/store/migrations.js';
import { Store } from '../../src/store/store.js';
import { decodeHistoryCursor, type StoredState } from '../../src/store/states.js';
import { sliceOf } from '../../src/store/index-rounds.js';
import { newId } from '../../src/core/ids.js';
import { inspect } from '../helpers/sqlite.js';
import type { ServiceError } from '../../src/core/errors.js';

const tempDir = () => mkdtempSync(join(tmpdir(), 'outpost-history-index-'));
/** The schema version before the indexes filled in rounds (the two migrations after it rebuild states and raw_uplinks; the third makes the indexes tables of their own). */
const BEFORE_ROUNDS = 11;

/** A database file at `path` with the schema an older release left (its migrations up to `version`), foreign keys on. */
function databaseAtSchema(path: string, version: number): BetterSqlite3.Database {
  const db = new BetterSqlite3(path);
  db.pragma('foreign_keys = ON');
  for (const step of MIGRATIONS.slice(0, version)) step(db);
  db.pragma(`user_version = ${version}`);
  return db;
}

function storeWithAssets(names: string[]) {
  const store = Store.open(tempDir());
  const { device } = store.devices.create({ name: 'd' }, 0);
  const assets = names.map((name) => store.assets.create({ deviceId: device.id, name, is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0));
  return { store, device, assets };
}

const state = (assetId: string, at: number, value: number): StoredState => ({ assetId, at, valueJson: String(value), receivedAt: at });

/** How many rows wait outside the index, read through a second connection as any other process would. */
function waiting(store: Store, table: 'states' | 'raw_uplinks' = 'states'): number {
  const peek = inspect(store.path);
  try {
    return peek.prepare(`SELECT count(*) FROM ${table} t JOIN rounds_watermarks w ON w.tbl = '${table}' AND w.slice = t.slice WHERE t.seq > w.seq`).pluck().get() as number;
  } finally {
    peek.close();
  }
}

/** Every page of an asset's history, following `next`, newest first. */
function wholeHistory(store: Store, assetId: string, limit: number): string[] {
  const values: string[] = [];
  let cursor: { at: number; seq: number } | undefined;
  for (;;) {
    const page = store.states.history(assetId, { limit, cursor });
    values.push(...page.data.map((s) => s.valueJson));
    if (!page.next) return values;
    cursor = decodeHistoryCursor(page.next);
  }
}

test('states waiting for the index and states in it read as one history, in order, across pages', () => {
  const { store, assets } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  // The first write after opening runs a round (nothing waits yet), so both of its states wait after it.
  store.states.write([state(id, 1000, 1), state(id, 3000, 3)]);
  store.states.indexWaiting();
  // These wait outside the index, one of them older than what the index holds.
  store.states.write([state(id, 2000, 2), state(id, 4000, 4), state(id, 500, 0)]);
  assert.equal(waiting(store), 3);
  assert.deepEqual(wholeHistory(store, id, 2), ['4', '3', '2', '1', '0']);
  assert.deepEqual(wholeHistory(store, id, 100), ['4', '3', '2', '1', '0']);
  assert.deepEqual(store.states.history(id, { limit: 10, from: 1500, to: 3500 }).data.map((s) => s.valueJson), ['3', '2']);
  assert.equal(store.states.count(id), 5);
  assert.equal(store.states.count(), 5);
  assert.deepEqual(store.states.latest(id), { at: 4000, valueJson: '4' });
  // Another process (the CLI opens its own store on the daemon's data dir) reads the same history.
  const other = Store.open(dirname(store.path));
  assert.deepEqual(wholeHistory(other, id, 2), ['4', '3', '2', '1', '0']);
  assert.equal(other.states.count(id), 5);
  other.close();
  assert.equal(waiting(store), 3, 'reading indexes nothing');
  // A round moves them into the index; nothing a reader sees changes.
  store.states.indexWaiting();
  assert.equal(waiting(store), 0);
  assert.deepEqual(wholeHistory(store, id, 2), ['4', '3', '2', '1', '0']);
  assert.equal(store.states.count(id), 5);
  store.close();
});

test('a write indexes what waited once its slice had its turn (every ~500 ms)', async () => {
  const { store, assets } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  store.states.write([state(id, 1, 1)]);
  store.states.write([state(id, 2, 2), state(id, 3, 3)]);
  // The asset's slice may have had its turn between the two writes (one chance in 64).
  assert.ok(waiting(store) >= 2, 'within the round, states wait');
  await new Promise((resolve) => setTimeout(resolve, 600));
  store.states.write([state(id, 4, 4)]);
  assert.equal(waiting(store), 1, 'every slice had its turn before this write: only its own state waits');
  assert.deepEqual(wholeHistory(store, id, 10), ['4', '3', '2', '1']);
  store.close();
});

test('a state re-sent by a gateway is recognised even while the one held waits for the index', () => {
  const { store, assets } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  store.states.write([state(id, 1, 1)]);
  store.states.write([state(id, 2, 2)]);
  assert.ok(waiting(store) > 0);
  const resent: StoredState[] = [{ ...state(id, 2, 2), dedupe: true }, { ...state(id, 3, 3), dedupe: true }];
  store.states.write(resent);
  assert.equal(resent[0]!.duplicate, true);
  assert.equal(resent[1]!.duplicate, undefined);
  assert.deepEqual(wholeHistory(store, id, 10), ['3', '2', '1']);
  store.close();
});

test('retention by count keeps the newest states of an asset whichever part they are in', () => {
  const { store, assets } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  store.states.write([state(id, 1, 1), state(id, 2, 2)]);
  store.states.indexWaiting();
  store.states.write([state(id, 3, 3), state(id, 4, 4), state(id, 5, 5)]);
  assert.ok(waiting(store) > 0);
  assert.equal(store.states.prune(0, [id], 2), 3);
  assert.deepEqual(wholeHistory(store, id, 10), ['5', '4']);
  store.close();
});

test('deleting an asset or its device deletes its states in both parts, and only its own', () => {
  const { store, device, assets } = storeWithAssets(['a', 'b']);
  const [a, b] = assets.map((x) => x.id) as [string, string];
  const other = store.devices.create({ name: 'other' }, 0).device;
  const c = store.assets.create({ deviceId: other.id, name: 'c', is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0).id;
  store.states.write([state(a, 1, 1), state(b, 1, 1), state(c, 1, 1)]);
  store.states.indexWaiting();
  store.states.write([state(a, 2, 2), state(b, 2, 2), state(c, 2, 2)]);
  assert.equal(waiting(store), 3);
  assert.ok(store.assets.delete(a));
  assert.equal(store.states.count(a), 0);
  assert.equal(store.states.count(b), 2);
  store.devices.delete(device.id);
  assert.equal(store.states.count(b), 0);
  assert.equal(store.states.count(), 2, 'the other device keeps both of its states');
  assert.deepEqual(wholeHistory(store, c, 10), ['2', '1']);
  store.close();
});

test('raw uplinks waiting for the index by device and those in it list as one, are pruned and deleted with their device', async () => {
  const { store, device } = storeWithAssets([]);
  const other = store.devices.create({ name: 'other' }, 0).device;
  const keep = (deviceId: string, at: number) =>
    store.uplinks.record({ deviceId, at, payload: Buffer.from([at]), port: 1, source: 'test', decoded: true, error: null });
  keep(device.id, 1);
  keep(device.id, 2);
  keep(other.id, 1);
  await new Promise((resolve) => setTimeout(resolve, 600));
  keep(device.id, 3); // every slice had its turn: the three before go into the index
  assert.equal(waiting(store, 'raw_uplinks'), 1);
  keep(device.id, 4);
  assert.ok(waiting(store, 'raw_uplinks') >= 1);
  const pages: number[] = [];
  let before: number | undefined;
  for (;;) {
    const page = store.uplinks.list(device.id, 3, before);
    pages.push(...page.data.map((u) => u.at));
    if (!page.next) break;
    before = Number(page.next);
  }
  assert.deepEqual(pages, [4, 3, 2, 1]);
  assert.equal(store.uplinks.prune(3), 1);
  assert.deepEqual(store.uplinks.list(device.id, 10).data.map((u) => u.at), [4, 3, 2]);
  keep(device.id, 5);
  assert.equal(waiting(store, 'raw_uplinks'), 1);
  store.devices.delete(device.id);
  assert.deepEqual(store.uplinks.list(device.id, 10).data, []);
  assert.deepEqual(store.uplinks.list(other.id, 10).data.map((u) => u.at), [1]);
  assert.throws(() => keep(device.id, 6), (err: ServiceError) => err.code === 'DEVICE_NOT_FOUND', 'a raw uplink of a deleted device is refused');
  assert.equal(store.uplinks.list(device.id, 10).data.length, 0);
  store.close();
});

test('the slice of an owner is the same in every process and version (readers look there)', () => {
  assert.equal(sliceOf('0Abc'), 1);
  assert.equal(sliceOf('3x'), 1);
  assert.equal(sliceOf('4x'), 2);
  assert.equal(sliceOf('Zx'), 10);
  assert.equal(sliceOf('a'), 10);
  assert.equal(sliceOf('z9'), 16);
  assert.ok(sliceOf('') >= 1 && sliceOf('') <= 16, 'any id has a slice');
  assert.ok(sliceOf('é-device') >= 1 && sliceOf('é-device') <= 16);
  const ids = Array.from({ length: 5000 }, () => newId());
  const seen = new Set(ids.map(sliceOf));
  assert.equal(seen.size, 16, 'ids spread over every slice');
  // A slice is one run of the index's order: sorted ids never come back to a slice they left.
  const order = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(sliceOf);
  for (let i = 1; i < order.length; i++) assert.ok(order[i]! >= order[i - 1]!, 'slices follow the sort order of ids');
});

test('a state of an asset that does not exist is refused, as the foreign key did', () => {
  const { store } = storeWithAssets([]);
  assert.throws(() => store.states.write([state('no-such-asset', 1, 1)]), /FOREIGN KEY constraint failed/);
  assert.equal(store.states.count(), 0);
  store.close();
});

test('a database from before the change keeps every state and raw uplink, and deletions still reach them', () => {
  const dir = tempDir();
  const path = join(dir, 'old.db');
  // The schema as the release before these migrations left it.
  const old = databaseAtSchema(path, BEFORE_ROUNDS);
  old.prepare("INSERT INTO devices (id, name, created_on, updated_on) VALUES ('d', 'd', 0, 0), ('e', 'e', 0, 0)").run();
  for (const a of ['x', 'y']) old.prepare("INSERT INTO assets (id, device_id, name, kind, profile, created_on, updated_on) VALUES (?, 'd', ?, 'sensor', '{}', 0, 0)").run(a, a);
  const insert = old.prepare('INSERT INTO states (asset_id, at, value, received_at, uplink_seq, codec) VALUES (?, ?, ?, ?, ?, ?)');
  for (let i = 0; i < 50; i++) insert.run(i % 2 ? 'x' : 'y', i, String(i), i, i % 5 === 0 ? i : null, i % 5 === 0 ? 'v1' : null);
  const raw = old.prepare('INSERT INTO raw_uplinks (device_id, at, payload, port, source, decoded, error, codec, declared_format) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
  for (let i = 0; i < 20; i++) raw.run(i % 2 ? 'd' : 'e', i, Buffer.from([i]), i % 3 ? 1 : null, 'gwmp:x', i % 4 ? 1 : 0, i % 4 ? null : 'bad', 'v1', i % 7 ? null : 'cbor');
  const statesBefore = old.prepare('SELECT seq, asset_id, at, value, received_at, uplink_seq, codec FROM states ORDER BY seq').all();
  const rawBefore = old.prepare('SELECT seq, device_id, at, payload, port, source, decoded, error, codec, declared_format FROM raw_uplinks ORDER BY seq').all();
  old.close();

  const db = new BetterSqlite3(path);
  db.pragma('foreign_keys = ON');
  assert.deepEqual(migrate(db), { from: BEFORE_ROUNDS, to: MIGRATIONS.length });
  assert.deepEqual(db.prepare('SELECT seq, asset_id, at, value, received_at, uplink_seq, codec FROM states ORDER BY seq').all(), statesBefore);
  assert.deepEqual(db.prepare('SELECT seq, device_id, at, payload, port, source, decoded, error, codec, declared_format FROM raw_uplinks ORDER BY seq').all(), rawBefore);
  assert.equal(db.prepare('SELECT count(*) FROM states_by_asset').pluck().get(), 50, 'every state it had is in the index');
  assert.equal(db.prepare('SELECT count(*) FROM raw_uplinks_by_device').pluck().get(), 20, 'every raw uplink it had is in the index');
  assert.equal(db.prepare("SELECT count(*) FROM rounds_watermarks WHERE tbl = 'states' AND seq = 50").pluck().get(), 16, 'every slice starts above every state it had');
  assert.deepEqual(db.pragma('foreign_key_check'), []);
  db.prepare("DELETE FROM assets WHERE id = 'x'").run();
  assert.deepEqual(db.prepare('SELECT DISTINCT asset_id FROM states').pluck().all(), ['y']);
  db.prepare("DELETE FROM devices WHERE id = 'd'").run();
  assert.equal(db.prepare('SELECT count(*) FROM states').pluck().get(), 0, "the device's assets went, and their states with them");
  assert.deepEqual(db.prepare('SELECT DISTINCT device_id FROM raw_uplinks').pluck().all(), ['e']);
  db.close();
});

test('rows still waiting under the flag of the release before (schema 13) are in the index after the upgrade', () => {
  const dir = tempDir();
  const path = join(dir, 'outpost.db');
  const FLAGGED = 13;
  const old = databaseAtSchema(path, FLAGGED);
  old.prepare("INSERT INTO devices (id, name, created_on, updated_on) VALUES ('d', 'd', 0, 0)").run();
  old.prepare("INSERT INTO assets (id, device_id, name, kind, profile, created_on, updated_on) VALUES ('x', 'd', 'x', 'sensor', '{}', 0, 0)").run();
  // Half of them indexed, half waiting (that release's daemon stopped between two rounds).
  const insert = old.prepare('INSERT INTO states (asset_id, at, value, received_at, unindexed) VALUES (?, ?, ?, ?, ?)');
  for (let i = 0; i < 10; i++) insert.run('x', i, String(i), i, i < 5 ? null : sliceOf('x'));
  const raw = old.prepare("INSERT INTO raw_uplinks (device_id, at, payload, source, decoded, unindexed) VALUES ('d', ?, ?, 'test', 1, ?)");
  for (let i = 0; i < 6; i++) raw.run(i, Buffer.from([i]), i < 3 ? null : sliceOf('d'));
  old.close();

  const store = Store.open(dir);
  try {
    assert.deepEqual(wholeHistory(store, 'x', 3), ['9', '8', '7', '6', '5', '4', '3', '2', '1', '0']);
    assert.equal(store.states.count('x'), 10);
    assert.deepEqual(store.uplinks.list('d', 10).data.map((u) => u.at), [5, 4, 3, 2, 1, 0]);
  } finally {
    store.close();
  }
});

test('rows listed in memory are still read, and indexed, after the process stops without a round (a crash)', () => {
  const { store, assets, device } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  store.states.write([state(id, 1, 1)]);
  store.states.write([state(id, 2, 2), state(id, 3, 3)]);
  store.uplinks.record({ deviceId: device.id, at: 1, payload: Buffer.from([1]), port: 1, source: 'test', decoded: true, error: null });
  assert.ok(waiting(store) >= 2);
  const dir = dirname(store.path);
  // No close: what the daemon's lists held is gone, as after kill -9.
  const next = Store.open(dir);
  assert.deepEqual(wholeHistory(next, id, 2), ['3', '2', '1'], 'readers find them above the watermarks');
  assert.equal(next.states.count(id), 3);
  assert.deepEqual(next.uplinks.list(device.id, 10).data.map((u) => u.at), [1]);
  // The first write of the new run indexes what the run before left.
  next.states.write([state(id, 4, 4)]);
  assert.equal(waiting(next), 1, 'only the new state waits');
  next.states.indexWaiting();
  assert.equal(waiting(next), 0);
  assert.deepEqual(wholeHistory(next, id, 10), ['4', '3', '2', '1']);
  assert.equal(next.states.count(id), 4);
  next.close();
  store.close();
});

test('a round rolled back with its transaction leaves its rows waiting, to be indexed by the next one', () => {
  const { store, assets } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  store.states.write([state(id, 1, 1), state(id, 2, 2)]);
  assert.equal(waiting(store), 2);
  assert.throws(() =>
    store.transaction(() => {
      store.states.indexWaiting(); // takes the lists
      store.states.write([state(id, 3, 3)]);
      throw new Error('the commit fails');
    }),
  );
  assert.equal(waiting(store), 2, 'the round went back with the transaction');
  assert.deepEqual(wholeHistory(store, id, 10), ['2', '1']);
  store.states.indexWaiting();
  assert.equal(waiting(store), 0, 'the lists came back: the next round indexed them');
  assert.deepEqual(wholeHistory(store, id, 10), ['2', '1']);
  assert.equal(store.states.count(id), 2, 'each once');
  store.close();
});

test('a seq SQLite hands out again after the newest rows were deleted is indexed at once, and read once', () => {
  const { store, assets } = storeWithAssets(['t']);
  const id = assets[0]!.id;
  const other = store.devices.create({ name: 'other' }, 0).device;
  const gone = store.assets.create({ deviceId: other.id, name: 'g', is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0).id;
  store.states.write([state(id, 1, 1), state(gone, 1, 10), state(gone, 2, 20)]);
  store.states.indexWaiting(); // every watermark at the largest seq (3)
  store.devices.delete(other.id); // the two newest states go: the next seq is 2 again
  store.states.write([state(id, 2, 2)]);
  assert.equal(waiting(store), 0, 'below the watermark: not waiting, in the index');
  assert.deepEqual(wholeHistory(store, id, 10), ['2', '1']);
  assert.equal(store.states.count(id), 2);
  const reopened = Store.open(dirname(store.path));
  assert.deepEqual(wholeHistory(reopened, id, 10), ['2', '1']);
  reopened.close();
  store.close();
});

test('rows waiting in the lists of schema 15 are in the index after the upgrade', () => {
  const dir = tempDir();
  const LISTS = 15;
  const old = databaseAtSchema(join(dir, 'outpost.db'), LISTS);
  old.prepare("INSERT INTO devices (id, name, created_on, updated_on) VALUES ('d', 'd', 0, 0)").run();
  old.prepare("INSERT INTO assets (id, device_id, name, kind, profile, created_on, updated_on) VALUES ('x', 'd', 'x', 'sensor', '{}', 0, 0)").run();
  for (let i = 0; i < 6; i++) {
    const seq = old.prepare('INSERT INTO states (asset_id, at, value, received_at, slice) VALUES (?, ?, ?, ?, ?)').run('x', i, String(i), i, i < 3 ? null : sliceOf('x')).lastInsertRowid;
    if (i < 3) old.prepare('INSERT INTO states_by_asset VALUES (?, ?, ?)').run('x', i, seq);
    else old.prepare('INSERT INTO states_waiting VALUES (?, ?)').run(sliceOf('x'), seq);
  }
  old.close();
  const store = Store.open(dir);
  try {
    assert.equal(waiting(store), 0);
    assert.deepEqual(wholeHistory(store, 'x', 4), ['5', '4', '3', '2', '1', '0']);
    assert.equal(store.states.count('x'), 6);
    assert.ok(store.assets.delete('x'));
    assert.equal(store.states.count(), 0, "the asset's states went, whichever part they were in");
  } finally {
    store.close();
  }
});

test('a batch larger than one INSERT group: every state is read back, under its own seq, and the latest is the newest', () => {
  const { store, assets } = storeWithAssets(['a', 'b', 'c']);
  const ids = assets.map((x) => x.id);
  // 40 states: two groups of 16 in one statement each, then 8 one by one; each asset's times out of order.
  const batch = Array.from({ length: 40 }, (_, i) => state(ids[i % 3]!, 1000 + ((i * 7) % 40), i));
  store.states.write(batch);
  const expected = (id: string) =>
    batch
      .filter((s) => s.assetId === id)
      .sort((x, y) => y.at - x.at)
      .map((s) => s.valueJson);
  for (const id of ids) {
    assert.deepEqual(wholeHistory(store, id, 5), expected(id), 'waiting');
    assert.deepEqual(store.states.latest(id)?.valueJson, expected(id)[0]);
  }
  assert.equal(waiting(store), 40);
  store.states.indexWaiting();
  assert.equal(waiting(store), 0);
  for (const id of ids) assert.deepEqual(wholeHistory(store, id, 5), expected(id), 'indexed');
  // Each value under the seq its row has: the index joins rows by seq.
  const peek = inspect(store.path);
  const mismatched = peek.prepare('SELECT count(*) FROM states_by_asset b JOIN states s ON s.seq = b.seq WHERE s.asset_id != b.asset_id OR s.at != b.at').pluck().get();
  peek.close();
  assert.equal(mismatched, 0);
  store.close();
});
