import type { Database } from './database.js';
import { takePage, type PageBudget } from './page.js';

/** A raw uplink as it is kept: the bytes before any codec, and what decoding them gave. */
export interface NewUplink {
  deviceId: string;
  at: number;
  payload: Uint8Array;
  port: number | null;
  source: string;
  decoded: boolean;
  error: string | null;
  /** The codec version that decoded it (null when the device had none). */
  codec?: string | null;
  /** Set when the door fixed the format (HTTP `application/cbor`): a re-decode leaves it alone. */
  declaredFormat?: string | null;
}

export interface UplinkRecord {
  seq: number;
  at: number;
  payload: Buffer;
  port: number | null;
  source: string;
  decoded: boolean;
  error: string | null;
  codec: string | null;
}

type Row = Record<string, unknown>;

/** Raw uplinks (one aggregate of the store): the bytes devices sent, kept for re-decoding and provenance. */
export class UplinkStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  /** Keeps a raw uplink; returns its `seq`, the id its states' provenance points at. */
  record(input: NewUplink): number {
    return Number(
      this.#db
        .statement('INSERT INTO raw_uplinks (device_id, at, payload, port, source, decoded, error, codec, declared_format) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(
          input.deviceId,
          input.at,
          Buffer.from(input.payload.buffer, input.payload.byteOffset, input.payload.byteLength),
          input.port,
          input.source,
          input.decoded ? 1 : 0,
          input.error,
          input.codec ?? null,
          input.declaredFormat ?? null,
        ).lastInsertRowid,
    );
  }

  /**
   * Newest first; `before` is the `seq` cursor of the previous page. A page also ends once the
   * `budget` is spent (`sizeOf` of each record, at least one record a page): rows are read one at
   * a time and the rest stays on disk, so a page of large payloads never loads the whole `limit`.
   */
  list(deviceId: string, limit: number, before?: number, budget?: PageBudget<UplinkRecord>): { data: UplinkRecord[]; next: string | null } {
    const rows = this.#db
      .statement('SELECT * FROM raw_uplinks WHERE device_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?')
      .iterate(deviceId, before ?? Number.MAX_SAFE_INTEGER, limit + 1) as IterableIterator<Row>;
    const page = takePage(rows, limit, budget, (r) => ({
      seq: r.seq as number,
      at: r.at as number,
      payload: r.payload as Buffer,
      port: (r.port as number | null) ?? null,
      source: r.source as string,
      decoded: r.decoded === 1,
      error: (r.error as string | null) ?? null,
      codec: (r.codec as string | null) ?? null,
    }));
    return { data: page.data, next: page.more ? String(page.data[page.data.length - 1]!.seq) : null };
  }

  /** The `at` of the last raw uplink received from any device (null: none kept). */
  lastReceivedAt(): number | null {
    // seq grows with every insert, so the row with the largest seq is the newest received.
    return (this.#db.statement('SELECT at FROM raw_uplinks ORDER BY seq DESC LIMIT 1').pluck().get() as number | null) ?? null;
  }

  /** Keeps the newest `keep` raw uplinks of each device that has more, and none received before `olderThan`. */
  prune(keep: number, olderThan = -8.64e15): number {
    let removed = this.#db.deleteInChunks('raw_uplinks', 'at < ?', [olderThan]);
    const devices = this.#db.statement('SELECT device_id FROM raw_uplinks GROUP BY device_id HAVING count(*) > ?').pluck().all(keep) as string[];
    const edge = this.#db.statement('SELECT seq FROM raw_uplinks WHERE device_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?').pluck();
    const drop = this.#db.statement('DELETE FROM raw_uplinks WHERE device_id = ? AND seq <= ?');
    for (const id of devices) {
      const seq = edge.get(id, keep) as number | undefined;
      if (seq !== undefined) removed += drop.run(id, seq).changes;
    }
    return removed;
  }
}
