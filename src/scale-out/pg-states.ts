import { createHash } from 'node:crypto';
import type { StoredState } from '../store/states.js';
import type { CentralDatabase } from './postgres.js';
import { StatePartitions } from './pg-partitions.js';

const md5 = (text: string) => createHash('md5').update(text).digest('hex');

/** SQLSTATEs after which the same batch is simply tried again: a deadlock between two nodes' batches, no partition for a row. */
const DEADLOCK = '40P01';
const NO_PARTITION = '23514';
const ATTEMPTS = 3;

/**
 * States into PostgreSQL, one transaction per group-commit batch (docs/scale-out.md): the writer
 * acknowledges (PUBACK, HTTP 202) only after this commit. A state whose (asset, at, value) is
 * already held, on whichever node it arrived, is refused by the unique index and marked
 * `duplicate`: acknowledged, not stored twice, counted. The same statement keeps `latest_states`,
 * which every node reads (pg-state-reads.ts).
 */
export class PostgresStates {
  readonly #db: CentralDatabase;
  readonly #node: string;
  readonly #deviceOf: (assetId: string) => string | undefined;
  readonly partitions: StatePartitions;
  duplicates = 0;

  /** `deviceOf`: the catalog's device of an asset, kept with its latest state (see PostgresStateDeletions). */
  constructor(db: CentralDatabase, node: string, options: { partitions?: StatePartitions; deviceOf?: (assetId: string) => string | undefined } = {}) {
    this.#db = db;
    this.#node = node;
    this.partitions = options.partitions ?? new StatePartitions(db);
    this.#deviceOf = options.deviceOf ?? (() => undefined);
  }

  async write(states: StoredState[]): Promise<void> {
    if (states.length === 0) return;
    const columns: unknown[][] = [[], [], [], [], [], [], [], []];
    for (const s of states) {
      columns[0]!.push(s.assetId);
      columns[1]!.push(s.at);
      columns[2]!.push(s.valueJson);
      columns[3]!.push(s.receivedAt);
      columns[4]!.push(s.uplinkSeq ?? null);
      columns[5]!.push(s.codec ?? null);
      columns[6]!.push(this.#node);
      columns[7]!.push(this.#deviceOf(s.assetId) ?? null);
    }
    let inserted: Array<{ asset_id: string; at: string; h: string }> = [];
    for (let attempt = 1; ; attempt++) {
      await this.partitions.ensureFor(states.map((s) => s.at));
      try {
        inserted = await this.#db.transaction(async (client) => (await client.query<{ asset_id: string; at: string; h: string }>(INSERT, columns)).rows);
        break;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (attempt >= ATTEMPTS || (code !== DEADLOCK && code !== NO_PARTITION)) throw err;
        // Another node dropped a month this node thought it had (retention): read them again.
        if (code === NO_PARTITION) this.partitions.forget();
      }
    }
    // Each returned row stands for the first state of the batch with its key; the rest are duplicates.
    const fresh = new Map<string, number>();
    for (const row of inserted) {
      const key = `${row.asset_id}\u0000${row.at}\u0000${row.h}`;
      fresh.set(key, (fresh.get(key) ?? 0) + 1);
    }
    for (const s of states) {
      const key = `${s.assetId}\u0000${s.at}\u0000${md5(s.valueJson)}`;
      const left = fresh.get(key) ?? 0;
      if (left > 0) fresh.set(key, left - 1);
      else {
        s.duplicate = true;
        this.duplicates++;
      }
    }
  }
}

/**
 * One statement: the batch's new states, then each asset's latest among them over the one held.
 * Rows go in by (asset, at, arrival): two nodes' batches lock index entries and latest rows in the
 * same order (no deadlock between them), and a later arrival with the same `at` gets the larger
 * id, so ties go to the last received as on SQLite.
 */
const INSERT = `
  WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY
      AS b(asset_id, at, value, received_at, uplink_seq, codec, node, device_id, n)
  ), ins AS (
    INSERT INTO states (asset_id, at, value, value_md5, received_at, uplink_seq, codec, node)
    SELECT asset_id, at, value, md5(value)::uuid, received_at, uplink_seq, codec, node FROM batch ORDER BY asset_id, at, n
    ON CONFLICT (asset_id, at, value_md5) DO NOTHING
    RETURNING id, asset_id, at, value, received_at
  ), device_of AS (
    SELECT DISTINCT ON (asset_id) asset_id, device_id FROM batch
  ), newest AS (
    INSERT INTO latest_states (asset_id, id, at, value, received_at, device_id)
    SELECT DISTINCT ON (ins.asset_id) ins.asset_id, ins.id, ins.at, ins.value, max(ins.received_at) OVER (PARTITION BY ins.asset_id), d.device_id
    FROM ins JOIN device_of d ON d.asset_id = ins.asset_id ORDER BY ins.asset_id, ins.at DESC, ins.id DESC
    ON CONFLICT (asset_id) DO UPDATE SET
      device_id = coalesce(excluded.device_id, latest_states.device_id),
      id = CASE WHEN excluded.at >= latest_states.at THEN excluded.id ELSE latest_states.id END,
      value = CASE WHEN excluded.at >= latest_states.at THEN excluded.value ELSE latest_states.value END,
      at = GREATEST(excluded.at, latest_states.at),
      received_at = GREATEST(excluded.received_at, latest_states.received_at)
  )
  SELECT asset_id, at, md5(value) AS h FROM ins`;

/**
 * What a deleted asset or device leaves in PostgreSQL, deleted as SQLite's cascade does on one
 * machine (docs/scale-out.md): its latest states, then its history month by month (one statement
 * per partition, each a range scan of the unique index). Run by the node whose registry deleted
 * it, after that delete committed; a node that stops meanwhile leaves the history to retention.
 */
export class PostgresStateDeletions {
  readonly #db: CentralDatabase;
  readonly #partitions: StatePartitions;

  constructor(db: CentralDatabase, partitions: StatePartitions) {
    this.#db = db;
    this.#partitions = partitions;
  }

  async device(deviceId: string): Promise<number> {
    const r = await this.#db.query<{ asset_id: string }>('DELETE FROM latest_states WHERE device_id = $1 RETURNING asset_id', [deviceId]);
    return this.#history(r.rows.map((row) => row.asset_id));
  }

  async asset(assetId: string): Promise<number> {
    await this.#db.query('DELETE FROM latest_states WHERE asset_id = $1', [assetId]);
    return this.#history([assetId]);
  }

  async #history(assetIds: string[]): Promise<number> {
    if (assetIds.length === 0) return 0;
    let removed = 0;
    for (const month of await this.#partitions.list()) {
      const r = await this.#db.query(`DELETE FROM ${month.name} WHERE asset_id = ANY($1::text[])`, [assetIds]);
      removed += r.rowCount ?? 0;
    }
    return removed;
  }
}
