import type pg from 'pg';
import type { CentralDatabase } from './postgres.js';

/**
 * The central's PostgreSQL schema (docs/scale-out.md), migrated forward by the first node that
 * starts or by `outpost migrate`. Every node takes the same advisory lock first, so two nodes
 * starting at once do not both apply a step; the steps run in one transaction each.
 */
const MIGRATIONS: ReadonlyArray<string> = [
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
];

/** A fixed key for pg_advisory_lock: "outpost migrate". */
const MIGRATION_LOCK = 0x6f757470;

export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

/** Applies the steps the database has not seen; returns the versions before and after. */
export async function migratePostgres(db: CentralDatabase): Promise<{ from: number; to: number }> {
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
      for (let v = from; v < MIGRATIONS.length; v++) {
        await client.query('BEGIN');
        try {
          await client.query(MIGRATIONS[v]!);
          await client.query('DELETE FROM outpost_schema');
          await client.query('INSERT INTO outpost_schema (version) VALUES ($1)', [v + 1]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        }
      }
      return { from, to: MIGRATIONS.length };
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
