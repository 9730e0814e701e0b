import type { Database } from './database.js';
import { ServiceError } from '../core/errors.js';
import { IndexRounds, ownerParameters, ownerRows, sliceOf } from './index-rounds.js';
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
  /** The index by device, filled in rounds. */
  readonly #rounds: IndexRounds;

  constructor(db: Database) {
    this.#db = db;
    this.#rounds = new IndexRounds(db, 'raw_uplinks');
  }

  /** Keeps a raw uplink (outside the index by device until the next round); returns its `seq`, the id its states' provenance points at. */
  record(input: NewUplink): number {
    const now = performance.now();
    // In the group commit's transaction, or in one of its own.
    return this.#db.atomically(() => {
      this.#rounds.beforeWrite(now);
      return this.#insert(input);
    });
  }

  #insert(input: NewUplink): number {
    // Its device must exist (a device deleted while the uplink waited for the group commit). Checked
    // here rather than by a trigger: a trigger that can refuse makes SQLite keep a statement journal
    // for every insert, ~1 µs an uplink (docs/architecture.md, "History index").
    if (this.#db.statement('SELECT 1 FROM devices WHERE id = ?').pluck().get(input.deviceId) === undefined) {
      throw new ServiceError('DEVICE_NOT_FOUND', `device ${input.deviceId} was deleted before its uplink was stored`);
    }
    const slice = sliceOf(input.deviceId);
    const seq = Number(
      this.#db
        .statement('INSERT INTO raw_uplinks (device_id, at, payload, port, source, decoded, error, codec, declared_format, slice) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
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
          slice,
        ).lastInsertRowid,
    );
    this.#rounds.waits(slice, seq);
    return seq;
  }

  /**
   * Newest first; `before` is the `seq` cursor of the previous page. A page also ends once the
   * `budget` is spent (`sizeOf` of each record, at least one record a page): rows are read one at
   * a time and the rest stays on disk, so a page of large payloads never loads the whole `limit`.
   */
  list(deviceId: string, limit: number, before?: number, budget?: PageBudget<UplinkRecord>): { data: UplinkRecord[]; next: string | null } {
    const rows = this.#db
      .statement(ownerRows('raw_uplinks', 'seq, at, payload, port, source, decoded, error, codec', { ordered: 'seq < @before' }, 'seq DESC'))
      .iterate({ ...ownerParameters(deviceId), before: before ?? Number.MAX_SAFE_INTEGER, limit: limit + 1 }) as IterableIterator<Row>;
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
    // By age in the order received: `at` is when the uplink came, so it grows with seq, and the
    // rows before the first one young enough are the old ones (found by seq, without an index by
    // time, which cost every write more than this costs a run). After the clock was set back,
    // the rows received since wait until those before them are old too.
    const young = this.#db.statement('SELECT seq FROM raw_uplinks WHERE at >= ? ORDER BY seq LIMIT 1').pluck().get(olderThan) as number | undefined;
    let removed = this.#db.deleteInChunks('raw_uplinks', 'SELECT seq FROM raw_uplinks WHERE seq < ?', [young ?? Number.MAX_SAFE_INTEGER]);
    // Counting per device reads the index by device: what waits for it goes in first. Uplinks
    // received after this (in later turns) are newer and are counted by the next run.
    this.#rounds.runNow();
    const devices = this.#db.statement('SELECT device_id FROM raw_uplinks_by_device GROUP BY device_id HAVING count(*) > ?').pluck().all(keep) as string[];
    const edge = this.#db.statement('SELECT seq FROM raw_uplinks_by_device WHERE device_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?').pluck();
    const drop = this.#db.statement('DELETE FROM raw_uplinks WHERE seq IN (SELECT seq FROM raw_uplinks_by_device WHERE device_id = ? AND seq <= ?)');
    for (const id of devices) {
      const seq = edge.get(id, keep) as number | undefined;
      if (seq !== undefined) removed += drop.run(id, seq).changes;
    }
    return removed;
  }
}
