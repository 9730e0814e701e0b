// History in PostgreSQL (docs/scale-out.md, "History in PostgreSQL"), on a real server: the step
// that partitions an existing `states` table by month keeps its rows, ids and once-only rule;
// pages walk across a month boundary with the same answers as SQLite's StateStore; a month with no
// partition gets one when a state needs it; retention drops whole old months and prunes the one
// that straddles the limit, limits.historyPerAsset keeps the newest N as on SQLite; a deleted
// device or asset takes its states with it.
import { test } from 'node:test';
import pg_ from 'pg';
import assert from 'node:assert/strict';
import { startPostgres } from '../helpers/postgres.js';
import { removeDir, tempDataDir } from '../helpers/daemon.js';
import { CentralDatabase } from '../../src/scale-out/postgres.js';
import { migratePostgres, POSTGRES_SCHEMA_VERSION } from '../../src/scale-out/schema.js';
import { PostgresStateDeletions, PostgresStates } from '../../src/scale-out/pg-states.js';
import { PostgresStateReads } from '../../src/scale-out/pg-state-reads.js';
import { StatePartitions, monthOf } from '../../src/scale-out/pg-partitions.js';
import { pruneByCount, pruneHistory } from '../../src/scale-out/pg-retention.js';
import { createLogger } from '../../src/ops/logger.js';
import { Store } from '../../src/store/store.js';
import { decodeHistoryCursor, type HistoryQuery, type StoredState } from '../../src/store/states.js';

const DAY = 86_400_000;
const NOV_1 = Date.UTC(2026, 10, 1);

test('states in PostgreSQL, partitioned by month', { timeout: 120_000 }, async (t) => {
  const pg = await startPostgres();
  t.after(() => pg.dispose());

  /**
   * `work` on a new database of the test's server, migrated (`name` for psql), with a SQLite store
   * beside it when the subtest compares with SQLite; everything is closed after it.
   */
  async function onFreshDatabase(work: (db: CentralDatabase, o: { name: string; sqlite: Store }) => Promise<void>): Promise<void> {
    const url = await pg.createDatabase();
    const db = new CentralDatabase(url);
    const dir = tempDataDir();
    const sqlite = Store.open(dir, {});
    try {
      await migratePostgres(db);
      await work(db, { name: url.split('/').pop()!, sqlite });
    } finally {
      sqlite.close();
      removeDir(dir);
      await db.close();
    }
  }

  await t.test('monthOf names and bounds UTC months, also years 0 to 99 and the ends of the Date range', () => {
    assert.deepEqual(monthOf(NOV_1 - 1), { start: Date.UTC(2026, 9, 1), end: NOV_1, name: 'states_2026_10' });
    assert.equal(monthOf(NOV_1).name, 'states_2026_11');
    const y50 = new Date(0);
    y50.setUTCFullYear(50, 5, 15);
    assert.equal(monthOf(y50.getTime()).name, 'states_0050_06');
    assert.ok(monthOf(y50.getTime()).start < Date.UTC(1900, 0, 1));
    assert.ok(monthOf(-8.64e15).name.startsWith('states_bc'));
    assert.equal(monthOf(8.64e15).end, 8.64e15 + 1);
  });

  await t.test('the step converts a states table that holds rows: rows, ids, latest states and the once-only rule kept', async () => {
    const url = await pg.createDatabase();
    const name = url.split('/').pop()!;
    const db = new CentralDatabase(url);
    try {
      await migratePostgres(db, { to: 2 });
      // Rows as version 2 stored them: three months, two assets, ties on `at`.
      const rows = [
        ['a1', Date.UTC(2026, 8, 30, 23, 59), '1'],
        ['a1', NOV_1 - 1, '2'],
        ['a1', NOV_1 - 1, '3'],
        ['a1', NOV_1, '4'],
        ['a2', NOV_1 + 5 * DAY, '{"x":1}'],
        ['a2', NOV_1 + DAY, '{"x":0}'],
      ] as const;
      for (const [asset, at, value] of rows) pg.psql(`INSERT INTO states (asset_id, at, value, received_at, node) VALUES ('${asset}', ${at}, '${value}', ${at}, 'old')`, name);
      const before = pg.psql('SELECT id, asset_id, at, value FROM states ORDER BY id', name);
      const migrated = await migratePostgres(db);
      assert.deepEqual(migrated, { from: 2, to: POSTGRES_SCHEMA_VERSION });
      assert.equal(pg.psql('SELECT id, asset_id, at, value FROM states ORDER BY id', name), before, 'every row kept with its id');
      assert.equal(pg.psql("SELECT relkind FROM pg_class WHERE relname = 'states'", name), 'p', 'partitioned');
      const months = (await new StatePartitions(db).list()).map((m) => m.name);
      assert.deepEqual(months, ['states_2026_09', 'states_2026_10', 'states_2026_11']);
      assert.equal(pg.psql("SELECT count(*) FROM states_2026_10", name), '2');
      assert.equal(pg.psql("SELECT count(*) FROM states WHERE value_md5 = md5(value)::uuid", name), String(rows.length));
      const reads = new PostgresStateReads(db);
      // The latest is the greatest `at`, not the last inserted.
      assert.deepEqual(await reads.latest('a1'), { at: NOV_1, valueJson: '4' });
      assert.deepEqual(await reads.latest('a2'), { at: NOV_1 + 5 * DAY, valueJson: '{"x":1}' });
      // Once only, across the conversion: a state held before is a duplicate now.
      const writer = new PostgresStates(db, 'n1');
      const again: StoredState[] = [
        { assetId: 'a1', at: NOV_1 - 1, valueJson: '3', receivedAt: Date.now() },
        { assetId: 'a1', at: NOV_1 - 1, valueJson: '5', receivedAt: Date.now() },
      ];
      await writer.write(again);
      assert.deepEqual(again.map((s) => s.duplicate === true), [true, false]);
      assert.ok(Number(pg.psql("SELECT id FROM states WHERE value = '5'", name)) > rows.length, 'ids go on after the old ones');
    } finally {
      await db.close();
    }
  });

  await t.test('history pages across a month boundary: the same pages, cursors and latest state as SQLite', async () => {
    await onFreshDatabase(async (db, { sqlite }) => {
      const writer = new PostgresStates(db, 'n1');
      const reads = new PostgresStateReads(db);
      // One state per batch (as HTTP PUTs arrive), so ids follow arrival order on both engines.
      // The SQLite states need their asset (a foreign key); PostgreSQL gets the same id.
      const a1 = seedAsset(sqlite);
      const ats = [NOV_1 - 2 * DAY, NOV_1 - 1, NOV_1 - 1, NOV_1, NOV_1, NOV_1 + 1, NOV_1 + DAY, NOV_1 - 1];
      for (const [i, at] of ats.entries()) {
        const s = (): StoredState[] => [{ assetId: a1, at, valueJson: JSON.stringify({ i }), receivedAt: 1000 + i, codec: i % 2 ? 'v1' : undefined }];
        await writer.write(s());
        sqlite.states.write(s());
      }
      const walk = async (read: (q: HistoryQuery) => Promise<{ data: unknown[]; next: string | null }>, query: Omit<HistoryQuery, 'cursor'>) => {
        const pages: Array<{ data: unknown[]; next: string | null }> = [];
        let cursor: string | null = null;
        do {
          const page = await read({ ...query, cursor: cursor === null ? undefined : decodeHistoryCursor(cursor) });
          pages.push(page);
          cursor = page.next;
        } while (cursor !== null && pages.length < 20);
        return pages;
      };
      for (const query of [
        { limit: 3 },
        { limit: 2, from: NOV_1 - 1, to: NOV_1 },
        { limit: 100, from: NOV_1 + 1 },
        { limit: 100, budget: { maxBytes: 20, sizeOf: (s: { valueJson: string }) => Buffer.byteLength(s.valueJson) + 3 } },
      ]) {
        const fromPg = await walk((q) => reads.history(a1, q), query);
        const fromSqlite = await walk(async (q) => sqlite.states.history(a1, q), query);
        assert.deepEqual(fromPg, fromSqlite, `query ${JSON.stringify(query)}`);
      }
      const all = (await walk((q) => reads.history(a1, q), { limit: 3 })).flatMap((p) => p.data) as Array<{ at: number; valueJson: string }>;
      assert.equal(all.length, ats.length, 'every state once');
      // Newest first; ties on `at` newest received first, whichever month they are in.
      assert.deepEqual(
        all.map((s) => JSON.parse(s.valueJson).i),
        [6, 5, 4, 3, 7, 2, 1, 0],
      );
      assert.deepEqual(await reads.latest(a1), sqlite.states.latest(a1));
      assert.deepEqual(await reads.latestOf([a1, 'nope']), sqlite.states.latestOf([a1, 'nope']));
    });
  });

  await t.test('a month is added while a writer holds its transaction open (no wait on readers and writers), with the once-only index', async () => {
    const url = await pg.createDatabase();
    const db = new CentralDatabase(url);
    const held = new pg_.Client({ connectionString: url });
    try {
      await migratePostgres(db);
      const partitions = new StatePartitions(db);
      await partitions.ensureFor([NOV_1]);
      await held.connect();
      await held.query('BEGIN');
      await held.query("INSERT INTO states (asset_id, at, value, value_md5, received_at, node) VALUES ('a', $1, '1', md5('1')::uuid, 0, 'held')", [NOV_1]);
      await held.query('SELECT count(*) FROM states');
      const t0 = Date.now();
      await partitions.ensureFor([Date.UTC(2027, 2, 3)]);
      assert.ok(Date.now() - t0 < 3000, `created in ${Date.now() - t0} ms while a transaction held states`);
      await held.query('COMMIT');
      const writer = new PostgresStates(db, 'n1', { partitions });
      const twice: StoredState[] = [
        { assetId: 'a', at: Date.UTC(2027, 2, 3), valueJson: '7', receivedAt: 1 },
        { assetId: 'a', at: Date.UTC(2027, 2, 3), valueJson: '7', receivedAt: 2 },
      ];
      await writer.write(twice);
      assert.deepEqual(twice.map((s) => s.duplicate === true), [false, true]);
    } finally {
      await held.end().catch(() => {});
      await db.close();
    }
  });

  await t.test('limits.historyPerAsset: an asset keeps its newest N states, the same ones as on SQLite', async () => {
    await onFreshDatabase(async (db, { sqlite }) => {
      const a1 = seedAsset(sqlite);
      const writer = new PostgresStates(db, 'n1');
      // Ties on `at` at the edge, across a month boundary.
      const ats = [NOV_1 - 3, NOV_1 - 2, NOV_1 - 1, NOV_1 - 1, NOV_1 - 1, NOV_1, NOV_1 + 1, NOV_1 - 5];
      for (const [i, at] of ats.entries()) {
        const s = (): StoredState[] => [{ assetId: a1, at, valueJson: String(i), receivedAt: i }];
        await writer.write(s());
        sqlite.states.write(s());
      }
      assert.equal(await pruneByCount(db, [a1, 'no-such-asset'], 4), 4);
      assert.equal(sqlite.states.prune(-8.64e15, [a1], 4), 4);
      const reads = new PostgresStateReads(db);
      assert.deepEqual(await reads.history(a1, { limit: 100 }), sqlite.states.history(a1, { limit: 100 }));
      assert.deepEqual((await reads.history(a1, { limit: 100 })).data.map((s) => s.valueJson), ['6', '5', '4', '3']);
    });
  });

  await t.test("a deleted device's or asset's history and latest states are deleted, month by month; others stay", async () => {
    await onFreshDatabase(async (db, { name }) => {
      const devices: Record<string, string> = { t1: 'dev-a', t2: 'dev-a', u1: 'dev-b' };
      const writer = new PostgresStates(db, 'n1', { deviceOf: (assetId) => devices[assetId] });
      const batch: StoredState[] = [];
      for (const asset of Object.keys(devices)) for (const at of [NOV_1 - DAY, NOV_1, NOV_1 + DAY]) batch.push({ assetId: asset, at, valueJson: `"${asset}@${at}"`, receivedAt: at });
      await writer.write(batch);
      const deletions = new PostgresStateDeletions(db, writer.partitions);
      assert.equal(await deletions.device('dev-a'), 6);
      assert.equal(pg.psql('SELECT string_agg(DISTINCT asset_id, \',\') FROM states', name), 'u1');
      assert.equal(pg.psql('SELECT string_agg(asset_id, \',\') FROM latest_states', name), 'u1');
      assert.equal(await deletions.asset('u1'), 3);
      assert.equal(pg.psql('SELECT (SELECT count(*) FROM states) + (SELECT count(*) FROM latest_states)', name), '0');
    });
  });

  await t.test('a state for a month without a partition gets one; retention drops whole old months and prunes the straddling one', async () => {
    await onFreshDatabase(async (db, { name }) => {
      const partitions = new StatePartitions(db);
      const writer = new PostgresStates(db, 'n1', { partitions });
      const now = Date.UTC(2026, 10, 20);
      const at = (ms: number, v: string): StoredState => ({ assetId: 'a', at: ms, valueJson: v, receivedAt: ms });
      // 2001 and 2099: months no node created ahead.
      await writer.write([at(Date.UTC(2001, 0, 5), '"y2001"'), at(Date.UTC(2099, 11, 31), '"y2099"'), at(Date.UTC(2026, 8, 10), '"sep"'), at(Date.UTC(2026, 9, 3), '"oct3"'), at(Date.UTC(2026, 9, 25), '"oct25"'), at(now, '"now"')]);
      assert.deepEqual(
        (await partitions.list()).map((m) => m.name),
        ['states_2001_01', 'states_2026_09', 'states_2026_10', 'states_2026_11', 'states_2099_12'],
      );
      // 30 days before Nov 20 is Oct 21: 2001 and September go whole, October keeps the 25th only.
      const pruned = await pruneHistory(db, partitions, 30, now, createLogger('silent'));
      assert.deepEqual(pruned, { dropped: ['states_2001_01', 'states_2026_09'], removed: 1 });
      assert.equal(pg.psql('SELECT string_agg(value, \',\' ORDER BY at) FROM states', name), '"oct25","now","y2099"');
      // Created ahead: the next month.
      assert.ok((await partitions.list()).some((m) => m.name === 'states_2026_12'));
      // The latest state stays, as on SQLite.
      assert.deepEqual(await new PostgresStateReads(db).latest('a'), { at: Date.UTC(2099, 11, 31), valueJson: '"y2099"' });
      // A writer whose cache still lists a dropped month recreates it (another node's retention ran).
      const stale = new PostgresStates(db, 'n2', { partitions });
      await partitions.ensureFor([Date.UTC(2026, 8, 1)]); // cached as present
      pg.psql('DROP TABLE states_2026_12', name);
      await partitions.ensureFor([Date.UTC(2026, 11, 1)]); // cache says it is there
      await stale.write([at(Date.UTC(2026, 11, 2), '"dec"')]);
      assert.equal(pg.psql('SELECT count(*) FROM states_2026_12', name), '1');
    });
  });
});

/** A device and its asset in a SQLite store (its states reference the asset); the asset's id. */
function seedAsset(store: Store): string {
  const { device } = store.devices.create({ name: 'd' }, 0);
  return store.assets.create({ deviceId: device.id, name: 'a', title: null, description: null, is: 'sensor', profile: { type: 'object' } as never }, 0).id;
}
