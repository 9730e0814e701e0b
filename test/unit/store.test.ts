import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { MIGRATIONS, migrate, schemaVersion } from '../../src/store/migrations.js';
import { inspect } from '../helpers/sqlite.js';
import { Store } from '../../src/store/store.js';
import { AGED_STATES } from '../../src/store/states.js';
import { hashToken } from '../../src/core/ids.js';

const tempDir = () => mkdtempSync(join(tmpdir(), 'outpost-store-'));

test('a new database migrates to the latest version, and migrating again changes nothing', () => {
  const db = new BetterSqlite3(join(tempDir(), 'a.db'));
  assert.equal(schemaVersion(db), 0);
  assert.deepEqual(migrate(db), { from: 0, to: MIGRATIONS.length });
  assert.equal(schemaVersion(db), MIGRATIONS.length);
  assert.deepEqual(migrate(db), { from: MIGRATIONS.length, to: MIGRATIONS.length });
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all();
  for (const t of ['devices', 'assets', 'tokens', 'states', 'latest_states', 'commands', 'raw_uplinks']) assert.ok(tables.includes(t), t);
  db.close();
});

test('a database from a newer Outpost is refused, not downgraded', () => {
  const db = new BetterSqlite3(join(tempDir(), 'b.db'));
  db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
  assert.throws(() => migrate(db), /newer than this Outpost supports/);
  db.close();
});

test('the store opens in WAL mode and keeps only token hashes', () => {
  const dir = tempDir();
  const store = Store.open(dir);
  const peek = inspect(store.path);
  assert.equal(peek.pragma('journal_mode', { simple: true }), 'wal');
  const { device, token } = store.devices.create({ name: 'd' }, 1000);
  const rows = peek.prepare('SELECT hash FROM tokens').pluck().all() as string[];
  assert.deepEqual(rows, [hashToken(token)]);
  assert.ok(!JSON.stringify(peek.prepare('SELECT * FROM tokens').all()).includes(token.split(':')[1]!));
  peek.close();
  assert.equal(store.tokens.findByHash(hashToken(token))?.deviceId, device.id);
  store.close();
});

test('latest state is the greatest at, ties to the last received; history is newest first with a cursor', () => {
  const store = Store.open(tempDir());
  const { device } = store.devices.create({ name: 'd' }, 0);
  const asset = store.assets.create({ deviceId: device.id, name: 't', is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0);
  store.states.write([
    { assetId: asset.id, at: 2000, valueJson: '2', receivedAt: 1 },
    { assetId: asset.id, at: 1000, valueJson: '1', receivedAt: 2 },
    { assetId: asset.id, at: 2000, valueJson: '3', receivedAt: 3 },
  ]);
  assert.deepEqual(store.states.latest(asset.id), { at: 2000, valueJson: '3' });
  const first = store.states.history(asset.id, { limit: 2 });
  assert.deepEqual(first.data.map((s) => s.valueJson), ['3', '2']);
  assert.ok(first.next);
  const cursor = Buffer.from(first.next!, 'base64url').toString().split(':').map(Number);
  const second = store.states.history(asset.id, { limit: 2, cursor: { at: cursor[0]!, seq: cursor[1]! } });
  assert.deepEqual(second.data.map((s) => s.valueJson), ['1']);
  assert.equal(second.next, null);
  store.close();
});

test("a device's latest states are read in one query, without another device's", () => {
  const store = Store.open(tempDir());
  const asset = (deviceId: string, name: string) => store.assets.create({ deviceId, name, is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0);
  const one = store.devices.create({ name: 'one' }, 0).device;
  const other = store.devices.create({ name: 'other' }, 0).device;
  const [a, b, quiet, elsewhere] = [asset(one.id, 'a'), asset(one.id, 'b'), asset(one.id, 'quiet'), asset(other.id, 'a')];
  store.states.write([
    { assetId: a.id, at: 1000, valueJson: '1', receivedAt: 1 },
    { assetId: b.id, at: 2000, valueJson: '2', receivedAt: 1 },
    { assetId: elsewhere.id, at: 3000, valueJson: '3', receivedAt: 1 },
  ]);
  const latest = store.states.latestOfDevice(one.id);
  assert.deepEqual([...latest.entries()].sort(), [[a.id, { at: 1000, valueJson: '1' }], [b.id, { at: 2000, valueJson: '2' }]].sort());
  assert.equal(latest.has(quiet.id), false, 'an asset with no state yet has no entry');
  store.close();
});

test('retention keeps the newest N states per asset and drops states past the age limit', () => {
  const store = Store.open(tempDir());
  const { device } = store.devices.create({ name: 'd' }, 0);
  const a = store.assets.create({ deviceId: device.id, name: 'a', is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0);
  const b = store.assets.create({ deviceId: device.id, name: 'b', is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0);
  store.states.write(Array.from({ length: 50 }, (_, i) => ({ assetId: a.id, at: 10_000 + i, valueJson: String(i), receivedAt: 0 })));
  store.states.write([
    { assetId: b.id, at: 10, valueJson: '1', receivedAt: 0 },
    { assetId: b.id, at: 20_000, valueJson: '2', receivedAt: 0 },
  ]);
  const removed = store.states.prune(5_000, [a.id], 20);
  assert.equal(removed, 31, '30 over the count limit on a, 1 over the age limit on b');
  assert.equal(store.states.count(a.id), 20);
  assert.deepEqual(store.states.history(a.id, { limit: 1 }).data[0]!.valueJson, '49');
  assert.equal(store.states.count(b.id), 1);
  store.close();
});

test('retention by age reaches states still waiting for the index and every asset, in chunks', () => {
  const store = Store.open(tempDir());
  const { device } = store.devices.create({ name: 'd' }, 0);
  const assets = ['a', 'b', 'c'].map((name) => store.assets.create({ deviceId: device.id, name, is: 'sensor', profile: { type: 'integer' }, title: null, description: null }, 0));
  // 6 000 old states of one asset: more than one chunk of the age pruning.
  store.states.write(Array.from({ length: 6_000 }, (_, i) => ({ assetId: assets[0]!.id, at: i, valueJson: String(i), receivedAt: 0 })));
  store.states.indexWaiting();
  // Written after the last round: still waiting for the index when the pruning starts.
  store.states.write([
    { assetId: assets[1]!.id, at: 100, valueJson: '1', receivedAt: 0 },
    { assetId: assets[1]!.id, at: 9_000, valueJson: '2', receivedAt: 0 },
    { assetId: assets[2]!.id, at: 9_001, valueJson: '3', receivedAt: 0 },
  ]);
  assert.equal(store.states.prune(8_000, [], 1_000_000), 6_001);
  assert.deepEqual(
    assets.map((a) => store.states.count(a.id)),
    [0, 1, 1],
  );
  assert.equal(store.states.history(assets[1]!.id, { limit: 5 }).data[0]!.valueJson, '2');
  assert.equal(store.states.latest(assets[0]!.id)?.valueJson, '5999', 'the latest state stays when its history is pruned');
  store.close();
});

test('retention by age reads each asset\'s range of the index, never the whole index', () => {
  const dir = tempDir();
  Store.open(dir).close();
  const db = new BetterSqlite3(join(dir, 'outpost.db'), { readonly: true });
  const plan = (db.prepare(`EXPLAIN QUERY PLAN ${AGED_STATES} LIMIT 5000`).all(0) as Array<{ detail: string }>).map((r) => r.detail);
  db.close();
  assert.ok(plan.some((d) => /SEARCH b USING PRIMARY KEY \(asset_id=\? AND at<\?\)/.test(d)), plan.join('; '));
  assert.ok(!plan.some((d) => /SCAN b\b/.test(d)), plan.join('; '));
});

test('raw uplinks past the age limit go in the order received, also after the clock was set back', () => {
  const store = Store.open(tempDir());
  const { device } = store.devices.create({ name: 'd' }, 0);
  // Received in this order; the clock was set back between 10 and 3.
  for (const at of [1, 2, 10, 3, 11]) store.uplinks.record({ deviceId: device.id, at, payload: new Uint8Array([at]), port: 1, source: 'mqtt', decoded: true, error: null });
  assert.equal(store.uplinks.prune(100, 5), 2, 'the two received before the first young one');
  assert.deepEqual(store.uplinks.list(device.id, 10).data.map((u) => u.at), [11, 3, 10]);
  assert.equal(store.uplinks.prune(100, 12), 3, 'everything, once all are old');
  assert.equal(store.uplinks.list(device.id, 10).data.length, 0);
  store.close();
});

test('raw uplinks are kept newest first, paged, and bounded per device', () => {
  const store = Store.open(tempDir());
  const { device } = store.devices.create({ name: 'd' }, 0);
  for (let i = 0; i < 7; i++) {
    store.uplinks.record({ deviceId: device.id, at: i, payload: new Uint8Array([i, 0xab]), port: i % 2 ? 2 : null, source: 'mqtt', decoded: i !== 3, error: i === 3 ? 'bad' : null });
  }
  const first = store.uplinks.list(device.id, 3);
  assert.deepEqual(first.data.map((u) => u.at), [6, 5, 4]);
  assert.deepEqual([...first.data[0]!.payload], [6, 0xab]);
  const second = store.uplinks.list(device.id, 3, Number(first.next));
  assert.deepEqual(second.data.map((u) => u.at), [3, 2, 1]);
  assert.equal(second.data[0]!.decoded, false);
  assert.equal(store.uplinks.prune(4), 3);
  assert.deepEqual(store.uplinks.list(device.id, 10).data.map((u) => u.at), [6, 5, 4, 3]);
  store.close();
});
