import type pg from 'pg';
import type { CentralDatabase } from './postgres.js';
import { create, monthOf } from './pg-partitions.js';

/** A step: SQL, or work that needs the data first (the months a table holds), on the step's transaction. */
type Migration = string | ((client: pg.PoolClient) => Promise<void>);

/**
 * The central's PostgreSQL schema (docs/scale-out.md), migrated forward by the first node that
 * starts or by `outpost migrate`. Every node takes the same advisory lock first, so two nodes
 * starting at once do not both apply a step; the steps run in one transaction each.
 */
const MIGRATIONS: ReadonlyArray<Migration> = [
  `
  -- States: history and latest state come from here. A state already held (asset, at, value) is
  -- refused by the unique index (a gateway re-sending after a lost PUBACK, on any node). The value
  -- is indexed by its md5 so long JSON values stay within a btree entry.
  CREATE TABLE states (
    id BIGSERIAL PRIMARY KEY,
    asset_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    value TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    uplink_seq BIGINT,
    codec TEXT,
    node TEXT NOT NULL
  );
  CREATE UNIQUE INDEX states_once ON states (asset_id, at, md5(value));
  -- A year of history: an asset's page is an index range scan on (asset_id, at); pruning by age
  -- walks the BRIN index on received order.
  CREATE INDEX states_at_brin ON states USING brin (at);

  -- Devices, assets, tokens, gateways, LoRaWAN settings, managed-device revisions: one row per
  -- catalog row of a node, as JSON, with a sequence every node follows (see catalog-replica.ts).
  -- A null row is a deletion.
  CREATE SEQUENCE catalog_seq;
  CREATE TABLE catalog_rows (
    tbl TEXT NOT NULL,
    pk TEXT NOT NULL,
    row JSONB,
    seq BIGINT NOT NULL,
    node TEXT NOT NULL,
    PRIMARY KEY (tbl, pk)
  );
  CREATE INDEX catalog_rows_seq ON catalog_rows (seq);

  -- Commands waiting for an offline gateway, taken once by whichever node the gateway reaches.
  CREATE TABLE gateway_commands (
    id BIGSERIAL PRIMARY KEY,
    gateway_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    expires_at BIGINT NOT NULL
  );
  CREATE INDEX gateway_commands_gateway ON gateway_commands (gateway_id, id);

  -- Which node holds a gateway's session now.
  CREATE TABLE gateway_presence (
    gateway_id TEXT PRIMARY KEY,
    node TEXT,
    connected BOOLEAN NOT NULL,
    last_seen BIGINT NOT NULL
  );
  `,
  `
  -- Each node says it is alive every second: a gateway counts as connected while the node holding
  -- its session does (a node killed with -9 leaves its rows, which then stop counting).
  CREATE TABLE node_heartbeats (
    node TEXT PRIMARY KEY,
    at BIGINT NOT NULL
  );
  `,
  partitionStatesByMonth,
  `
  -- The device of each asset's latest state: deleting a device deletes its assets' history and
  -- latest states, as on SQLite, although PostgreSQL does not hold the catalog's assets.
  ALTER TABLE latest_states ADD COLUMN device_id TEXT;
  CREATE INDEX latest_states_device ON latest_states (device_id);
  `,
];

/**
 * Step 3: every node reads history and latest states from PostgreSQL (docs/scale-out.md), so
 * `states` becomes partitioned by month of `at` and `latest_states` holds each asset's latest.
 * The rows already held move over with their ids (cursors handed out stay valid). A partitioned
 * table's unique index must contain the partition key and cannot be on an expression, so the
 * once-only rule (asset, at, value) now indexes a stored md5 of the value (16 bytes as a uuid).
 */
async function partitionStatesByMonth(client: pg.PoolClient): Promise<void> {
  await client.query(`
    ALTER TABLE states RENAME TO states_unpartitioned;
    ALTER INDEX states_once RENAME TO states_unpartitioned_once;
    ALTER INDEX states_at_brin RENAME TO states_unpartitioned_at_brin;
    -- The ids go on from where they were: the sequence changes owner before its table goes.
    ALTER SEQUENCE states_id_seq OWNED BY NONE;
    CREATE TABLE states (
      id BIGINT NOT NULL DEFAULT nextval('states_id_seq'),
      asset_id TEXT NOT NULL,
      at BIGINT NOT NULL,
      value TEXT NOT NULL,
      value_md5 UUID NOT NULL,
      received_at BIGINT NOT NULL,
      uplink_seq BIGINT,
      codec TEXT,
      node TEXT NOT NULL
    ) PARTITION BY RANGE (at);
    ALTER SEQUENCE states_id_seq OWNED BY states.id;
    -- An asset's page is a range scan of this index within the months it covers; it also refuses
    -- a state already held, on whichever node it arrived.
    CREATE UNIQUE INDEX states_once ON states (asset_id, at, value_md5);
    -- Pruning rows older than limits.historyDays in the month that straddles the limit.
    CREATE INDEX states_at_brin ON states USING brin (at);
    -- Kept with each batch (the greatest at, ties: the last received; received_at: the newest
    -- received of the asset, for outpost status). Survives the history's retention, as on SQLite.
    CREATE TABLE latest_states (
      asset_id TEXT PRIMARY KEY,
      id BIGINT NOT NULL,
      at BIGINT NOT NULL,
      value TEXT NOT NULL,
      received_at BIGINT NOT NULL
    );
  `);
  // One `at` of each month the table holds; its partition is named and bounded by monthOf.
  const months = await client.query<{ at: string }>(
    `SELECT min(at) AS at FROM states_unpartitioned GROUP BY date_trunc('month', to_timestamp(at / 1000.0) AT TIME ZONE 'UTC')`,
  );
  const seen = new Set<number>();
  for (const row of months.rows) {
    const month = monthOf(Number(row.at));
    if (seen.has(month.start)) continue;
    seen.add(month.start);
    await create(client, month);
  }
  await client.query(`
    INSERT INTO states (id, asset_id, at, value, value_md5, received_at, uplink_seq, codec, node)
    SELECT id, asset_id, at, value, md5(value)::uuid, received_at, uplink_seq, codec, node FROM states_unpartitioned;
    INSERT INTO latest_states (asset_id, id, at, value, received_at)
    SELECT DISTINCT ON (asset_id) asset_id, id, at, value, max(received_at) OVER (PARTITION BY asset_id)
    FROM states_unpartitioned ORDER BY asset_id, at DESC, id DESC;
    DROP TABLE states_unpartitioned;
  `);
}

/** A fixed key for pg_advisory_lock: "outpost migrate". */
const MIGRATION_LOCK = 0x6f757470;

export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Applies the steps the database has not seen (up to `options.to`, for the tests of a step: the
 * table as an older version left it); returns the versions before and after.
 */
export async function migratePostgres(db: CentralDatabase, options: { to?: number } = {}): Promise<{ from: number; to: number }> {
  const target = Math.min(options.to ?? MIGRATIONS.length, MIGRATIONS.length);
  const client = await db.pool.connect();
  // See CentralDatabase.transaction: a lost connection must fail the migration, not the process.
  const onError = () => {};
  client.on('error', onError);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query('CREATE TABLE IF NOT EXISTS outpost_schema (version INTEGER NOT NULL)');
      const from = await schemaVersion(client);
      if (from > MIGRATIONS.length) throw new Error(`the PostgreSQL schema is at version ${from}, newer than this program's ${MIGRATIONS.length}: upgrade this node`);
      for (let v = from; v < target; v++) {
        await client.query('BEGIN');
        try {
          const step = MIGRATIONS[v]!;
          if (typeof step === 'string') await client.query(step);
          else await step(client);
          await client.query('DELETE FROM outpost_schema');
          await client.query('INSERT INTO outpost_schema (version) VALUES ($1)', [v + 1]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        }
      }
      return { from, to: Math.max(from, target) };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    client.off('error', onError);
    client.release(true);
  }
}

async function schemaVersion(client: pg.PoolClient): Promise<number> {
  const r = await client.query<{ version: number }>('SELECT version FROM outpost_schema');
  return r.rows[0]?.version ?? 0;
}
