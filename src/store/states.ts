import type { Statement } from 'better-sqlite3';
import type { Database } from './database.js';
import { IndexRounds, indexRowNow, ownerCount, ownerParameters, ownerRows, sliceOf } from './index-rounds.js';
import { takePage, type PageBudget } from './page.js';

/** A state as stored: `value` is kept as its JSON text so it is serialised once on the way in. */
export interface StoredState {
  assetId: string;
  at: number;
  valueJson: string;
  receivedAt: number;
  /** Provenance: the raw uplink (`raw_uplinks.seq`) this state was decoded from, if any. */
  uplinkSeq?: number;
  /** Provenance: the codec version that decoded it (see DeviceCodecs.version). */
  codec?: string;
  /**
   * Skip the state if this asset already holds one with the same `at` and value (states a gateway
   * re-sends after a lost PUBACK); `write` then sets `duplicate`.
   */
  dedupe?: boolean;
  duplicate?: boolean;
}

export interface HistoryPage {
  data: HistoryRecord[];
  next: string | null;
}

export interface HistoryQuery {
  from?: number;
  to?: number;
  limit: number;
  cursor?: { at: number; seq: number };
  /** Bytes a page may take in the answer (see takePage). */
  budget?: PageBudget<HistoryRecord>;
}

export interface HistoryRecord {
  at: number;
  valueJson: string;
  uplinkSeq: number | null;
  codec: string | null;
}

type Row = Record<string, unknown>;

/** The statements of the group-commit write path, prepared once. */
interface WriteStatements {
  /** A state outside the history index by asset (under its asset's slice), indexed by a later round (src/store/index-rounds.ts). */
  insertUnindexed: Statement;
  /** `ROWS_PER_INSERT` of them in one statement. */
  insertGroup: Statement;
  /** A state straight into the index (batches that must see every state already held). */
  insertIndexed: Statement;
  latest: Statement;
  held: Statement;
}

/**
 * The seqs of states older than `?`, asset by asset through each one's range of `states_by_asset`.
 * CROSS JOIN keeps the assets the outer loop: a plain join let SQLite scan the whole index instead
 * (checked in test/unit/store.test.ts).
 */
export const AGED_STATES = 'SELECT b.seq FROM assets a CROSS JOIN states_by_asset b ON b.asset_id = a.id AND b.at < ?';

/**
 * States a batch writes per INSERT statement: store microbenchmark, ~0.3 µs a row less than one
 * statement each. Few enough that the group's pages (the table's end) stay few.
 */
const ROWS_PER_INSERT = 16;

/** History order: newest first, ties to the last received. */
export const NEWEST_FIRST = 'at DESC, seq DESC';

/**
 * States (one aggregate of the store): every asset's history and its latest state, which a batch
 * write keeps in step, and retention by age and count.
 */
export class StateStore {
  readonly #db: Database;
  #write: WriteStatements | undefined;
  /** The history index by asset, filled in rounds. */
  readonly #rounds: IndexRounds;

  constructor(db: Database) {
    this.#db = db;
    this.#rounds = new IndexRounds(db, 'states');
  }

  #writeStatements(): WriteStatements {
    const columns = 'asset_id, at, value, received_at, uplink_seq, codec';
    return (this.#write ??= {
      insertUnindexed: this.#db.statement(`INSERT INTO states (${columns}, slice) VALUES (?, ?, ?, ?, ?, ?, ?)`),
      insertGroup: this.#db.statement(`INSERT INTO states (${columns}, slice) VALUES ${Array(ROWS_PER_INSERT).fill('(?, ?, ?, ?, ?, ?, ?)').join(', ')}`),
      insertIndexed: this.#db.statement(`INSERT INTO states (${columns}) VALUES (?, ?, ?, ?, ?, ?)`),
      // Ties on `at` go to the last received, hence >=.
      latest: this.#db.statement(
        `INSERT INTO latest_states (asset_id, seq, at, value) VALUES (?, ?, ?, ?)
         ON CONFLICT(asset_id) DO UPDATE SET seq = excluded.seq, at = excluded.at, value = excluded.value
         WHERE excluded.at >= latest_states.at`,
      ),
      // Asked only once nothing waits outside the index (see write).
      held: this.#db.statement('SELECT 1 FROM states_by_asset b JOIN states s ON s.seq = b.seq WHERE b.asset_id = ? AND b.at = ? AND s.value = ? LIMIT 1').pluck(),
    });
  }

  /**
   * Writes a batch of states in one transaction (part of the caller's when there is one): history rows plus
   * the latest state per asset. The group commit's hot path.
   */
  write(states: readonly StoredState[]): void {
    if (states.length === 0) return;
    const { insertUnindexed, insertGroup, insertIndexed, latest, held } = this.#writeStatements();
    // States re-sent by a gateway are compared with every state held, so their batch indexes first.
    const compares = states.some((s) => s.dedupe);
    const now = performance.now();
    // The group commit's transaction (or the savepoint of one write) already holds the batch together.
    this.#db.atomically(() => {
      if (compares) this.#rounds.runNow();
      else this.#rounds.beforeWrite(now);
      // One latest-state upsert per asset and batch, not per row: a burst on one asset is one upsert.
      const newest = new Map<string, { seq: number | bigint; at: number; valueJson: string }>();
      const wrote = (s: StoredState, seq: number | bigint) => {
        const best = newest.get(s.assetId);
        if (!best || s.at >= best.at) newest.set(s.assetId, { seq, at: s.at, valueJson: s.valueJson });
      };
      let i = 0;
      if (!compares) {
        // Whole groups of rows in one statement (a call and a statement run less per row). SQLite
        // gives each row the largest seq plus one, so a group's seqs are the last one's and those before.
        for (; i + ROWS_PER_INSERT <= states.length; i += ROWS_PER_INSERT) {
          const values: unknown[] = [];
          const slices: number[] = [];
          for (let j = i; j < i + ROWS_PER_INSERT; j++) {
            const s = states[j]!;
            const slice = sliceOf(s.assetId);
            slices.push(slice);
            values.push(s.assetId, s.at, s.valueJson, s.receivedAt, s.uplinkSeq ?? null, s.codec ?? null, slice);
          }
          const first = Number(insertGroup.run(values).lastInsertRowid) - ROWS_PER_INSERT + 1;
          for (let j = 0; j < ROWS_PER_INSERT; j++) {
            this.#rounds.waits(slices[j]!, first + j);
            wrote(states[i + j]!, first + j);
          }
        }
      }
      for (; i < states.length; i++) {
        const s = states[i]!;
        if (s.dedupe && held.get(s.assetId, s.at, s.valueJson) !== undefined) {
          s.duplicate = true;
          continue;
        }
        let seq: number | bigint;
        if (compares) {
          seq = insertIndexed.run(s.assetId, s.at, s.valueJson, s.receivedAt, s.uplinkSeq ?? null, s.codec ?? null).lastInsertRowid;
          indexRowNow(this.#db, 'states', s.assetId, s.at, seq);
        } else {
          const slice = sliceOf(s.assetId);
          seq = insertUnindexed.run(s.assetId, s.at, s.valueJson, s.receivedAt, s.uplinkSeq ?? null, s.codec ?? null, slice).lastInsertRowid;
          this.#rounds.waits(slice, seq);
        }
        wrote(s, seq);
      }
      for (const [assetId, n] of newest) latest.run(assetId, n.seq, n.at, n.valueJson);
    });
  }

  /** Puts every state still waiting for the history index by asset into it (retention, before it counts per asset). */
  indexWaiting(): void {
    this.#rounds.runNow();
  }

  latest(assetId: string): { at: number; valueJson: string } | undefined {
    const row = this.#db.statement('SELECT at, value FROM latest_states WHERE asset_id = ?').get(assetId) as Row | undefined;
    return row && { at: row.at as number, valueJson: row.value as string };
  }

  /** The latest state of each asset of a device that has one, in one query (a device's asset list). */
  latestOfDevice(deviceId: string): Map<string, { at: number; valueJson: string }> {
    const rows = this.#db
      .statement('SELECT l.asset_id, l.at, l.value FROM latest_states l JOIN assets a ON a.id = l.asset_id WHERE a.device_id = ?')
      .all(deviceId) as Row[];
    return new Map(rows.map((r) => [r.asset_id as string, { at: r.at as number, valueJson: r.value as string }]));
  }

  /** The latest state of each of these assets that has one, in one query. */
  latestOf(assetIds: readonly string[]): Map<string, { at: number; valueJson: string }> {
    if (assetIds.length === 0) return new Map();
    const rows = this.#db
      .statement('SELECT asset_id, at, value FROM latest_states WHERE asset_id IN (SELECT value FROM json_each(?))')
      .all(JSON.stringify(assetIds)) as Row[];
    return new Map(rows.map((r) => [r.asset_id as string, { at: r.at as number, valueJson: r.value as string }]));
  }

  /** Every asset's latest state: the MQTT door rebuilds its retained feed messages from this at start. */
  allLatest(): Array<{ assetId: string; at: number; valueJson: string }> {
    return (this.#db.statement('SELECT asset_id, at, value FROM latest_states').all() as Row[]).map((r) => ({
      assetId: r.asset_id as string,
      at: r.at as number,
      valueJson: r.value as string,
    }));
  }

  /**
   * Newest first. `cursor` is the opaque `next` of the previous page (see decodeHistoryCursor). A
   * page ends at `limit` rows or when `budget` is spent, whichever comes first (see takePage).
   */
  history(assetId: string, query: HistoryQuery): HistoryPage {
    const from = query.from ?? -8.64e15;
    const to = query.to ?? 8.64e15;
    const c = query.cursor ?? { at: 8.64e15 + 1, seq: 0 };
    const rows = this.#db
      .statement(ownerRows('states', 'seq, at, value, uplink_seq, codec', { ordered: 'at >= @from AND at <= @to AND (at < @at OR (at = @at AND seq < @seq))' }, NEWEST_FIRST))
      .iterate({ ...ownerParameters(assetId), from, to, at: c.at, seq: c.seq, limit: query.limit + 1 }) as IterableIterator<Row>;
    const page = takePage<Row, HistoryRecord & { seq: number }>(rows, query.limit, query.budget, (r) => ({
      seq: r.seq as number,
      at: r.at as number,
      valueJson: r.value as string,
      uplinkSeq: (r.uplink_seq as number | null) ?? null,
      codec: (r.codec as string | null) ?? null,
    }));
    const last = page.data[page.data.length - 1];
    return {
      data: page.data.map(({ seq: _seq, ...state }) => state),
      next: page.more && last ? encodeHistoryCursor(last.at, last.seq) : null,
    };
  }

  /** Every stored state, oldest first, in chunks (`outpost migrate --copy`). */
  *allStatesInChunks(size: number): Generator<StoredState[]> {
    const page = this.#db.statement('SELECT seq, asset_id, at, value, received_at, codec FROM states WHERE seq > ? ORDER BY seq LIMIT ?');
    for (let after = 0; ; ) {
      const rows = page.all(after, size) as Row[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.seq as number;
      yield rows.map((r) => ({ assetId: r.asset_id as string, at: r.at as number, valueJson: r.value as string, receivedAt: r.received_at as number, codec: (r.codec as string | null) ?? undefined }));
    }
  }

  /** States of one asset, or of every asset. */
  count(assetId?: string): number {
    return assetId
      ? (this.#db.statement(ownerCount('states')).pluck().get(ownerParameters(assetId)) as number)
      : (this.#db.statement('SELECT count(*) FROM states').pluck().get() as number);
  }

  /** When the last stored state was received (null: none stored). */
  lastReceivedAt(): number | null {
    // seq grows with every insert, so the row with the largest seq is the newest received.
    return (this.#db.statement('SELECT received_at FROM states ORDER BY seq DESC LIMIT 1').pluck().get() as number | null) ?? null;
  }

  /**
   * Retention (docs/configuration.md) in one go: drops states and commands older than `olderThan`
   * and, for the given assets, all but the newest `keepPerAsset` states, in small transactions so
   * writers are never held long. The daemon's pruner runs the same two parts with the assets spread
   * over slices (src/ops/retention.ts).
   */
  prune(olderThan: number, assetIds: Iterable<string>, keepPerAsset: number): number {
    let removed = this.pruneAged(olderThan);
    for (const assetId of assetIds) removed += this.trimAsset(assetId, keepPerAsset);
    return removed;
  }

  /**
   * States and commands older than `olderThan`, with what waits for the index by asset indexed first
   * (`trimAsset` reads that index too). States written after this (in later turns) wait for the
   * next round: a trim that misses them keeps more, never fewer.
   */
  pruneAged(olderThan: number): number {
    this.indexWaiting();
    // By age, each asset's range of the index by asset (there is no index by time: it cost every
    // write more than this costs a run, docs/architecture.md, "History index").
    const removed = this.#db.deleteInChunks('states', AGED_STATES, [olderThan]);
    return removed + this.#db.statement('DELETE FROM commands WHERE at < ?').run(olderThan).changes;
  }

  /**
   * All but the asset's newest `keep` indexed states. Finding the edge steps through up to `keep`
   * entries of the index: ~0.3 ms for an asset at the default 10 000 on the development machine,
   * so the pruner spreads many such assets over short slices (src/ops/retention.ts).
   */
  trimAsset(assetId: string, keep: number): number {
    const edge = this.#db.statement('SELECT at, seq FROM states_by_asset WHERE asset_id = ? ORDER BY at DESC, seq DESC LIMIT 1 OFFSET ?').get(assetId, keep) as Row | undefined;
    if (!edge) return 0;
    return this.#db.statement('DELETE FROM states WHERE seq IN (SELECT seq FROM states_by_asset WHERE asset_id = ? AND (at < ? OR (at = ? AND seq <= ?)))').run(assetId, edge.at, edge.at, edge.seq).changes;
  }
}

/** The opaque `next` of a history page: the last state's `at` and the id that orders ties (SQLite's seq, PostgreSQL's id). */
export function encodeHistoryCursor(at: number, seq: number): string {
  return Buffer.from(`${at}:${seq}`).toString('base64url');
}

export function decodeHistoryCursor(text: string): { at: number; seq: number } | undefined {
  const m = /^(-?\d+):(\d+)$/.exec(Buffer.from(text, 'base64url').toString());
  return m ? { at: Number(m[1]), seq: Number(m[2]) } : undefined;
}
