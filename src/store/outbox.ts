import type { Database } from './database.js';

/** `state`: a stored state on its way upstream; `catalog`: a device description (gateway catalog topic). */
export type OutboxKind = 'state' | 'catalog';

export interface OutboxRowInput {
  deviceId: string;
  kind: OutboxKind;
  topic: string;
  payload: Buffer;
  createdAt: number;
}

export interface OutboxRow {
  seq: number;
  deviceId: string;
  kind: OutboxKind;
  topic: string;
  payload: Buffer;
  bytes: number;
}

export interface OutboxTotals {
  depth: number;
  bytes: number;
  oldestAt: number | null;
}

export interface OutboxCounters {
  sent: number;
  dropped: number;
  rejected: number;
  /** Rows the upstream can never take (too large, or closing the link each time), removed unsent. */
  setAside: number;
  lastAckAt: number | null;
  link: string;
  updatedAt: number | null;
}

/** Rows removed by a bound, a purge or an acknowledgement. */
export interface Removed {
  rows: number;
  bytes: number;
}

/**
 * The outbox table (one aggregate of the store): rows waiting for the upstream's PUBACK, in the
 * order they were accepted (`seq`), and the persisted counters that `outpost outbox status` reads
 * from another process. Plain synchronous methods; callers decide the transactions.
 */
export class OutboxStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  /** The bytes a row counts against `maxBytes`: topic plus payload, as on the wire. */
  static rowBytes(topic: string, payload: Buffer): number {
    return Buffer.byteLength(topic) + payload.length;
  }

  insert(rows: readonly OutboxRowInput[]): number {
    const insert = this.#stmt('INSERT INTO outbox (device_id, kind, topic, payload, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)');
    let bytes = 0;
    for (const r of rows) {
      const size = OutboxStore.rowBytes(r.topic, r.payload);
      insert.run(r.deviceId, r.kind, r.topic, r.payload, size, r.createdAt);
      bytes += size;
    }
    return bytes;
  }

  /** The next rows of one device after `afterSeq`, oldest first. */
  nextForDevice(deviceId: string, afterSeq: number, limit: number): OutboxRow[] {
    const rows = this.#stmt('SELECT seq, device_id, kind, topic, payload, bytes FROM outbox WHERE device_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(
      deviceId,
      afterSeq,
      limit,
    ) as Array<Record<string, unknown>>;
    return rows.map((r) => ({
      seq: r.seq as number,
      deviceId: r.device_id as string,
      kind: r.kind as OutboxKind,
      topic: r.topic as string,
      payload: r.payload as Buffer,
      bytes: r.bytes as number,
    }));
  }

  /** Devices that have rows waiting, by their oldest row. */
  devicesWithRows(): string[] {
    return this.#stmt('SELECT device_id FROM outbox GROUP BY device_id ORDER BY min(seq)').pluck().all() as string[];
  }

  /** Acknowledged rows leave; a row already gone (purged, dropped) counts nothing. */
  deleteRows(seqs: readonly number[]): Removed {
    const del = this.#stmt('DELETE FROM outbox WHERE seq = ? RETURNING bytes').pluck();
    const removed: Removed = { rows: 0, bytes: 0 };
    this.#db.transaction(() => {
      for (const seq of seqs) {
        const bytes = del.get(seq) as number | undefined;
        if (bytes !== undefined) {
          removed.rows++;
          removed.bytes += bytes;
        }
      }
    });
    return removed;
  }

  /**
   * Drops the oldest state rows until at least `bytesToFree` are freed. Catalog rows stay: they are
   * tiny, and without them the upstream would not know the device the following states belong to.
   */
  dropOldestStates(bytesToFree: number): Removed {
    const removed: Removed = { rows: 0, bytes: 0 };
    const pick = this.#stmt("SELECT seq, bytes FROM outbox WHERE kind = 'state' AND seq > ? ORDER BY seq LIMIT 500");
    const del = this.#stmt('DELETE FROM outbox WHERE seq = ?');
    let after = 0;
    while (removed.bytes < bytesToFree) {
      const rows = pick.all(after) as Array<{ seq: number; bytes: number }>;
      if (rows.length === 0) break;
      for (const r of rows) {
        del.run(r.seq);
        removed.rows++;
        removed.bytes += r.bytes;
        after = r.seq;
        if (removed.bytes >= bytesToFree) break;
      }
    }
    return removed;
  }

  /** Drops state rows accepted before `cutoff` (ms): the age bound, and `outpost outbox purge`. */
  dropStatesBefore(cutoff: number): Removed {
    const row = this.#stmt("SELECT count(*) AS rows, coalesce(sum(bytes), 0) AS bytes FROM outbox WHERE kind = 'state' AND created_at < ?").get(cutoff) as Removed;
    if (row.rows > 0) this.#stmt("DELETE FROM outbox WHERE kind = 'state' AND created_at < ?").run(cutoff);
    return { rows: row.rows, bytes: row.bytes };
  }

  totals(): OutboxTotals {
    const row = this.#stmt('SELECT count(*) AS depth, coalesce(sum(bytes), 0) AS bytes, min(created_at) AS oldestAt FROM outbox').get() as OutboxTotals;
    return { depth: row.depth, bytes: row.bytes, oldestAt: row.oldestAt ?? null };
  }

  oldestCreatedAt(): number | null {
    return (this.#stmt('SELECT created_at FROM outbox ORDER BY seq LIMIT 1').pluck().get() as number | undefined) ?? null;
  }

  /** Adds to the persisted counters (the daemon and the CLI both add, so neither overwrites the other). */
  /** `now`: the daemon's heartbeat (the CLI passes null: its counts say nothing about the link). */
  addCounts(delta: { sent?: number; dropped?: number; rejected?: number; setAside?: number; lastAckAt?: number | null; link?: string }, now: number | null): void {
    this.#stmt(
      `UPDATE outbox_counters SET sent = sent + ?, dropped = dropped + ?, rejected = rejected + ?, set_aside = set_aside + ?,
       last_ack_at = coalesce(?, last_ack_at), link = coalesce(?, link), updated_at = coalesce(?, updated_at) WHERE id = 1`,
    ).run(delta.sent ?? 0, delta.dropped ?? 0, delta.rejected ?? 0, delta.setAside ?? 0, delta.lastAckAt ?? null, delta.link ?? null, now);
  }

  counters(): OutboxCounters {
    const r = this.#stmt('SELECT sent, dropped, rejected, set_aside, last_ack_at, link, updated_at FROM outbox_counters WHERE id = 1').get() as Record<string, unknown>;
    return {
      sent: r.sent as number,
      dropped: r.dropped as number,
      rejected: r.rejected as number,
      setAside: r.set_aside as number,
      lastAckAt: (r.last_ack_at as number | null) ?? null,
      link: r.link as string,
      updatedAt: (r.updated_at as number | null) ?? null,
    };
  }
}
