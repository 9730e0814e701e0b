import { createHash } from 'node:crypto';
import type { StoredState } from '../store/states.js';
import type { CentralDatabase } from './postgres.js';

const md5 = (text: string) => createHash('md5').update(text).digest('hex');

/**
 * States into PostgreSQL, one transaction per group-commit batch (docs/scale-out.md): the writer
 * acknowledges (PUBACK, HTTP 202) only after this commit. A state whose (asset, at, value) is
 * already held, on whichever node it arrived, is refused by the unique index and marked
 * `duplicate`: acknowledged, not stored twice, counted.
 */
export class PostgresStates {
  readonly #db: CentralDatabase;
  readonly #node: string;
  duplicates = 0;

  constructor(db: CentralDatabase, node: string) {
    this.#db = db;
    this.#node = node;
  }

  async write(states: StoredState[]): Promise<void> {
    const columns: unknown[][] = [[], [], [], [], [], [], []];
    for (const s of states) {
      columns[0]!.push(s.assetId);
      columns[1]!.push(s.at);
      columns[2]!.push(s.valueJson);
      columns[3]!.push(s.receivedAt);
      columns[4]!.push(s.uplinkSeq ?? null);
      columns[5]!.push(s.codec ?? null);
      columns[6]!.push(this.#node);
    }
    const inserted = await this.#db.transaction(async (client) => {
      const r = await client.query<{ asset_id: string; at: string; h: string }>(
        `INSERT INTO states (asset_id, at, value, received_at, uplink_seq, codec, node)
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[])
         ON CONFLICT (asset_id, at, md5(value)) DO NOTHING
         RETURNING asset_id, at, md5(value) AS h`,
        columns,
      );
      return r.rows;
    });
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
