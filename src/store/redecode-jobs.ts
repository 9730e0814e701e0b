import type { Database } from './database.js';
import { indexRowNow, ownerCount, ownerParameters, ownerRows, waitingRows, type OwnerFilter } from './index-rounds.js';
import { NEWEST_FIRST, type StoredState } from './states.js';

export type RedecodeStatus = 'queued' | 'running' | 'done' | 'failed';

/** States older than the oldest kept raw uplink: decoded from uplinks already pruned, left as they are. */
export interface NotCovered {
  from: number;
  to: number;
  states: number;
}

export interface RedecodeProblem {
  uplink: number;
  at: number;
  error: string;
}

export interface RedecodeJob {
  deviceId: string;
  status: RedecodeStatus;
  /** Process id of whoever runs it (the daemon or a CLI); null while queued. */
  owner: string | null;
  from: number | null;
  to: number | null;
  /** The codec version the job re-decodes with. */
  codec: string | null;
  /** The last raw uplink whose outcome is committed: where a resumed job continues. */
  lastSeq: number;
  total: number;
  done: number;
  replaced: number;
  failed: number;
  notCovered: NotCovered | null;
  /** The first few uplinks that could not be re-decoded and why. */
  problems: RedecodeProblem[];
  error: string | null;
  startedAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

export interface KeptRawUplink {
  seq: number;
  at: number;
  payload: Buffer;
  port: number | null;
}

/** The new states of one re-decoded uplink: they replace every state that uplink gave before. */
export interface Replacement {
  uplinkSeq: number;
  codec: string;
  states: StoredState[];
}

export interface LatestChange {
  assetId: string;
  at: number;
  valueJson: string;
}

type Row = Record<string, unknown>;

function jobFrom(row: Row): RedecodeJob {
  return {
    deviceId: row.device_id as string,
    status: row.status as RedecodeStatus,
    owner: (row.owner as string | null) ?? null,
    from: (row.range_from as number | null) ?? null,
    to: (row.range_to as number | null) ?? null,
    codec: (row.codec as string | null) ?? null,
    lastSeq: row.last_seq as number,
    total: row.total as number,
    done: row.done as number,
    replaced: row.replaced as number,
    failed: row.failed as number,
    notCovered: row.not_covered ? (JSON.parse(row.not_covered as string) as NotCovered) : null,
    problems: row.problems ? (JSON.parse(row.problems as string) as RedecodeProblem[]) : [],
    error: (row.error as string | null) ?? null,
    startedAt: row.started_at as number,
    updatedAt: row.updated_at as number,
    finishedAt: (row.finished_at as number | null) ?? null,
  };
}

const NEVER = -8.64e15;
const FOREVER = 8.64e15;

/**
 * Re-decode jobs and the history rewrites they make. Every batch of re-decoded uplinks commits in
 * one transaction together with the job's progress, so a killed process leaves history with each
 * uplink's states either all old or all new, and the job knows where to continue.
 */
export class RedecodeJobs {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  get(deviceId: string): RedecodeJob | undefined {
    const row = this.#stmt('SELECT * FROM redecode_jobs WHERE device_id = ?').get(deviceId) as Row | undefined;
    return row && jobFrom(row);
  }

  /** Jobs someone should be running: queued ones, and running ones (their owner may be gone). */
  unfinished(): RedecodeJob[] {
    return (this.#stmt("SELECT * FROM redecode_jobs WHERE status IN ('queued', 'running')").all() as Row[]).map(jobFrom);
  }

  /**
   * Creates the device's job, replacing a finished one or one whose owner is gone; undefined when a
   * live one holds the device (the caller answers 409). Atomic, so two processes cannot both start.
   */
  create(
    job: { deviceId: string; status: 'queued' | 'running'; owner: string | null; from: number | null; to: number | null; codec: string | null; total: number; notCovered: NotCovered | null },
    now: number,
    isLive: (job: RedecodeJob) => boolean,
  ): RedecodeJob | undefined {
    return this.#db.transaction(() => {
      const existing = this.get(job.deviceId);
      if (existing && isLive(existing)) return undefined;
      this.#stmt(
        `INSERT OR REPLACE INTO redecode_jobs
         (device_id, status, owner, range_from, range_to, codec, last_seq, total, done, replaced, failed, not_covered, problems, error, started_at, updated_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0, 0, 0, ?, NULL, NULL, ?, ?, NULL)`,
      ).run(job.deviceId, job.status, job.owner, job.from, job.to, job.codec, job.total, job.notCovered ? JSON.stringify(job.notCovered) : null, now, now);
      return this.get(job.deviceId);
    });
  }

  /** Takes over a queued job, or a running one whose owner is gone; undefined if someone else has it. */
  claim(deviceId: string, owner: string, now: number, isLive: (job: RedecodeJob) => boolean): RedecodeJob | undefined {
    return this.#db.transaction(() => {
      const job = this.get(deviceId);
      if (!job || (job.status !== 'queued' && job.status !== 'running')) return undefined;
      if (job.status === 'running' && isLive(job)) return undefined;
      this.#stmt("UPDATE redecode_jobs SET status = 'running', owner = ?, updated_at = ? WHERE device_id = ?").run(owner, now, deviceId);
      return this.get(deviceId);
    });
  }

  /** Sets the codec version and total when the job really starts (a queued job has neither yet). */
  begin(deviceId: string, codec: string, total: number, notCovered: NotCovered | null, now: number): void {
    this.#stmt('UPDATE redecode_jobs SET codec = ?, total = ?, not_covered = ?, updated_at = ? WHERE device_id = ?').run(
      codec,
      total,
      notCovered ? JSON.stringify(notCovered) : null,
      now,
      deviceId,
    );
  }

  requeue(deviceId: string, now: number): void {
    this.#stmt("UPDATE redecode_jobs SET status = 'queued', owner = NULL, updated_at = ? WHERE device_id = ?").run(now, deviceId);
  }

  finish(deviceId: string, status: 'done' | 'failed', error: string | null, now: number): void {
    this.#stmt('UPDATE redecode_jobs SET status = ?, error = ?, owner = NULL, updated_at = ?, finished_at = ? WHERE device_id = ?').run(status, error, now, now, deviceId);
  }

  // ---- the raw uplinks a job works on

  /**
   * Uplinks a re-decode may rewrite: not those whose format the door fixed (CBOR declared over
   * HTTP), nor those decoded before states remembered their uplink (their states cannot be found).
   */
  static readonly #ELIGIBLE: OwnerFilter = { ordered: 'seq > @after', row: 'at >= @from AND at <= @to AND declared_format IS NULL AND NOT (codec IS NULL AND decoded = 1)' };

  countUplinks(deviceId: string, afterSeq: number, from: number | null, to: number | null): number {
    return this.#stmt(ownerCount('raw_uplinks', RedecodeJobs.#ELIGIBLE)).pluck().get({ ...ownerParameters(deviceId), after: afterSeq, from: from ?? NEVER, to: to ?? FOREVER }) as number;
  }

  uplinks(deviceId: string, afterSeq: number, from: number | null, to: number | null, limit: number): KeptRawUplink[] {
    return (
      this.#stmt(ownerRows('raw_uplinks', 'seq, at, payload, port', RedecodeJobs.#ELIGIBLE, 'seq')).all({ ...ownerParameters(deviceId), after: afterSeq, from: from ?? NEVER, to: to ?? FOREVER, limit }) as Row[]
    ).map((r) => ({ seq: r.seq as number, at: r.at as number, payload: r.payload as Buffer, port: (r.port as number | null) ?? null }));
  }

  /** The newest `limit` raw uplinks in the range older than `beforeSeq`, newest first (what a codec try runs on, a batch at a time). */
  latestUplinks(deviceId: string, from: number | null, to: number | null, limit: number, beforeSeq = Number.MAX_SAFE_INTEGER): KeptRawUplink[] {
    return (
      this.#stmt(ownerRows('raw_uplinks', 'seq, at, payload, port', { ordered: 'seq < @before', row: 'at >= @from AND at <= @to AND declared_format IS NULL' }, 'seq DESC')).all({
        ...ownerParameters(deviceId),
        from: from ?? NEVER,
        to: to ?? FOREVER,
        before: beforeSeq,
        limit,
      }) as Row[]
    ).map((r) => ({ seq: r.seq as number, at: r.at as number, payload: r.payload as Buffer, port: (r.port as number | null) ?? null }));
  }

  /**
   * States in the range that came from a raw uplink no longer kept (pruned by count or age, or
   * decoded before provenance was recorded): a re-decode cannot reach them.
   */
  notCovered(deviceId: string, from: number | null, to: number | null): NotCovered | null {
    // Both parts of the history (docs/architecture.md, "History index"), each through its own index.
    const lost = 's.uplink_seq IS NOT NULL AND s.at >= @from AND s.at <= @to AND NOT EXISTS (SELECT 1 FROM raw_uplinks u WHERE u.seq = s.uplink_seq)';
    const row = this.#stmt(
      `SELECT min(at) AS first, max(at) AS last, count(*) AS n FROM (
         SELECT s.at FROM assets a JOIN states_by_asset b ON b.asset_id = a.id JOIN states s ON s.seq = b.seq WHERE a.device_id = @device AND ${lost}
         UNION ALL
         SELECT s.at FROM states s WHERE ${waitingRows('states', 's')} AND s.asset_id IN (SELECT id FROM assets WHERE device_id = @device) AND ${lost})`,
    ).get({ device: deviceId, from: from ?? NEVER, to: to ?? FOREVER }) as Row;
    const n = row.n as number;
    return n > 0 ? { from: row.first as number, to: row.last as number, states: n } : null;
  }

  // ---- rewriting history

  /**
   * One batch in one transaction: each replaced uplink's old states give way to its new ones
   * (history only: latest states are recomputed once, at the end), the raw uplink records the new
   * codec, and the job's progress moves on. A new state for the same asset and time as an old one
   * rewrites that row's value in place, which touches no index; only states that appear, vanish
   * or move in time are inserted or deleted.
   */
  applyBatch(
    deviceId: string,
    replacements: readonly Replacement[],
    progress: { lastSeq: number; done: number; replaced: number; failed: number; problems: RedecodeProblem[] },
    now: number,
  ): void {
    // Whole-batch statements (the uplinks' seqs as one JSON array) save two calls per uplink.
    const old = this.#stmt('SELECT seq, asset_id, at, uplink_seq FROM states WHERE uplink_seq IN (SELECT value FROM json_each(?))');
    const rewrite = this.#stmt('UPDATE states SET value = ?, codec = ? WHERE seq = ?');
    const remove = this.#stmt('DELETE FROM states WHERE seq = ?');
    // Only for an asset that still exists (it may have been deleted while the job ran): nothing
    // else refuses a state of an unknown asset here (src/store/migrations.ts, schema 15).
    const insert = this.#stmt('INSERT INTO states (asset_id, at, value, received_at, uplink_seq, codec) SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM assets WHERE id = ?)');
    const mark = this.#stmt('UPDATE raw_uplinks SET decoded = 1, error = NULL, codec = ? WHERE seq IN (SELECT value FROM json_each(?))');
    const advance = this.#stmt('UPDATE redecode_jobs SET last_seq = ?, done = ?, replaced = ?, failed = ?, problems = ?, updated_at = ? WHERE device_id = ?');
    this.#db.transaction(() => {
      const seqs = JSON.stringify(replacements.map((r) => r.uplinkSeq));
      const byUplink = new Map<number, Array<{ seq: number; asset_id: string; at: number }>>();
      for (const row of old.all(seqs) as Array<{ seq: number; asset_id: string; at: number; uplink_seq: number }>) {
        const list = byUplink.get(row.uplink_seq);
        if (list) list.push(row);
        else byUplink.set(row.uplink_seq, [row]);
      }
      for (const r of replacements) {
        const previous = byUplink.get(r.uplinkSeq) ?? [];
        for (const s of r.states) {
          const match = previous.findIndex((p) => p.asset_id === s.assetId && p.at === s.at);
          if (match >= 0) {
            rewrite.run(s.valueJson, r.codec, previous[match]!.seq);
            previous.splice(match, 1);
          } else {
            const added = insert.run(s.assetId, s.at, s.valueJson, s.receivedAt, r.uplinkSeq, r.codec, s.assetId);
            if (added.changes > 0) indexRowNow(this.#db, 'states', s.assetId, s.at, added.lastInsertRowid);
          }
        }
        for (const p of previous) remove.run(p.seq);
      }
      if (replacements.length > 0) mark.run(replacements[0]!.codec, seqs);
      advance.run(progress.lastSeq, progress.done, progress.replaced, progress.failed, JSON.stringify(progress.problems), now, deviceId);
    });
  }

  /**
   * Sets each asset's latest state from its history again and finishes the job, in one
   * transaction. Returns the latest states that changed, for the feed.
   */
  settleLatest(deviceId: string, now: number): LatestChange[] {
    // Every asset of the device, not only those this process saw change: a resumed job may have
    // rewritten others before the restart.
    const assetIds = this.#stmt('SELECT id FROM assets WHERE device_id = ?').pluck().all(deviceId) as string[];
    const newest = this.#stmt(ownerRows('states', 'seq, at, value', {}, NEWEST_FIRST));
    const current = this.#stmt('SELECT at, value FROM latest_states WHERE asset_id = ?');
    const upsert = this.#stmt(
      `INSERT INTO latest_states (asset_id, seq, at, value) VALUES (?, ?, ?, ?)
       ON CONFLICT(asset_id) DO UPDATE SET seq = excluded.seq, at = excluded.at, value = excluded.value`,
    );
    const changes: LatestChange[] = [];
    this.#db.transaction(() => {
      for (const assetId of assetIds) {
        const top = newest.get({ ...ownerParameters(assetId), limit: 1 }) as Row | undefined;
        // An asset whose history is gone keeps its latest state: retention may have pruned history, not the value.
        if (!top) continue;
        const before = current.get(assetId) as Row | undefined;
        upsert.run(assetId, top.seq, top.at, top.value);
        if (!before || before.at !== top.at || before.value !== top.value) changes.push({ assetId, at: top.at as number, valueJson: top.value as string });
      }
      this.finish(deviceId, 'done', null, now);
    });
    return changes;
  }
}
