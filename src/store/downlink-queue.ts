import type { Database } from './database.js';

export type DownlinkStatus = 'queued' | 'sent' | 'acknowledged' | 'expired' | 'too_large' | 'refused' | 'tx_error';

/** A command encoded for the radio, waiting for (or done with) its device's next receive window. */
export interface DownlinkRecord {
  id: string;
  deviceId: string;
  fPort: number;
  confirmed: boolean;
  payload: Buffer;
  status: DownlinkStatus;
  reason: string | null;
  fCnt: number | null;
  /** How many times it was transmitted (a confirmed item goes again until acknowledged). */
  attempts: number;
  createdAt: number;
  expiresAt: number;
  finishedAt: number | null;
}

type Row = Record<string, unknown>;

function recordFrom(r: Row): DownlinkRecord {
  return {
    id: r.id as string,
    deviceId: r.device_id as string,
    fPort: r.f_port as number,
    confirmed: r.confirmed === 1,
    payload: r.payload as Buffer,
    status: r.status as DownlinkStatus,
    reason: (r.reason as string | null) ?? null,
    fCnt: (r.f_cnt as number | null) ?? null,
    attempts: (r.attempts as number | undefined) ?? 0,
    createdAt: r.created_at as number,
    expiresAt: r.expires_at as number,
    finishedAt: (r.finished_at as number | null) ?? null,
  };
}

/**
 * The per-device downlink queue in SQLite: items in order of arrival; an item is "open" (in the
 * queue) until it is finished (sent unconfirmed, acknowledged, expired, refused, too large).
 * Finished items are kept (the last few per device) so `GET /device/<id>/downlinks` can show outcomes.
 */
export class DownlinkQueueStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  enqueue(item: Omit<DownlinkRecord, 'status' | 'reason' | 'fCnt' | 'finishedAt' | 'attempts'>): DownlinkRecord {
    this.#stmt('INSERT INTO downlinks (id, device_id, f_port, confirmed, payload, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
      item.id,
      item.deviceId,
      item.fPort,
      item.confirmed ? 1 : 0,
      item.payload,
      'queued',
      item.createdAt,
      item.expiresAt,
    );
    return { ...item, status: 'queued', reason: null, fCnt: null, attempts: 0, finishedAt: null };
  }

  /** Open items of a device, oldest first. */
  open(deviceId: string): DownlinkRecord[] {
    return (this.#stmt('SELECT * FROM downlinks WHERE device_id = ? AND finished_at IS NULL ORDER BY seq').all(deviceId) as Row[]).map(recordFrom);
  }

  openCount(deviceId: string): number {
    return this.#stmt('SELECT count(*) FROM downlinks WHERE device_id = ? AND finished_at IS NULL').pluck().get(deviceId) as number;
  }

  /** Open items per device, for the daemon's in-memory "anything queued?" test at start. */
  openCounts(): Map<string, number> {
    const rows = this.#stmt('SELECT device_id, count(*) AS n FROM downlinks WHERE finished_at IS NULL GROUP BY device_id').all() as Row[];
    return new Map(rows.map((r) => [r.device_id as string, r.n as number]));
  }

  /** Open items first, then the last `finished` finished ones, newest first. */
  list(deviceId: string, finished = 50): DownlinkRecord[] {
    const open = this.open(deviceId);
    const done = (this.#stmt('SELECT * FROM downlinks WHERE device_id = ? AND finished_at IS NOT NULL ORDER BY seq DESC LIMIT ?').all(deviceId, finished) as Row[]).map(recordFrom);
    return [...open, ...done];
  }

  /** A transmission of an open item (a confirmed one stays open until acknowledged). */
  markSent(id: string, fCnt: number, finishedAt: number | null): void {
    this.#stmt('UPDATE downlinks SET status = ?, f_cnt = ?, finished_at = ?, attempts = attempts + 1 WHERE id = ?').run('sent', fCnt, finishedAt, id);
  }

  finish(id: string, status: DownlinkStatus, reason: string | null, at: number): void {
    this.#stmt('UPDATE downlinks SET status = ?, reason = ?, finished_at = ? WHERE id = ? AND finished_at IS NULL').run(status, reason, at, id);
  }

  /** Keeps the newest `keep` finished items of each device. */
  pruneFinished(keep: number): number {
    return this.#stmt(
      `DELETE FROM downlinks WHERE finished_at IS NOT NULL AND seq NOT IN (
         SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY device_id ORDER BY seq DESC) AS n FROM downlinks WHERE finished_at IS NOT NULL) WHERE n <= ?)`,
    ).run(keep).changes;
  }
}
