import type { LatestState, StateReads } from '../store/state-reads.js';
import { encodeHistoryCursor, type HistoryPage, type HistoryQuery, type HistoryRecord } from '../store/states.js';
import { takePage } from '../store/page.js';
import type { CentralDatabase } from './postgres.js';

/** Below this many states (the planner's estimate) `outpost status` counts them exactly. */
const EXACT_COUNT_BELOW = 1_000_000;

interface HistoryRow {
  id: string;
  at: string;
  value: string;
  uplink_seq: string | null;
  codec: string | null;
}

/**
 * States as every central node on PostgreSQL reads them (docs/scale-out.md, "How the nodes
 * share"): a state committed by any node is in the next answer of every node. The answers are
 * SQLite's (StateStore): history newest first with ties on `at` by id, the same `<at>:<id>` cursor
 * (ids are the cluster's, so a cursor from one node works on another), the same byte budget.
 */
export class PostgresStateReads implements StateReads {
  readonly #db: CentralDatabase;

  constructor(db: CentralDatabase) {
    this.#db = db;
  }

  async latest(assetId: string): Promise<LatestState | undefined> {
    const r = await this.#db.query<{ at: string; value: string }>('SELECT at, value FROM latest_states WHERE asset_id = $1', [assetId]);
    const row = r.rows[0];
    return row && { at: Number(row.at), valueJson: row.value };
  }

  async latestOf(assetIds: readonly string[]): Promise<Map<string, LatestState>> {
    if (assetIds.length === 0) return new Map();
    const r = await this.#db.query<{ asset_id: string; at: string; value: string }>('SELECT asset_id, at, value FROM latest_states WHERE asset_id = ANY($1::text[])', [assetIds]);
    return new Map(r.rows.map((row) => [row.asset_id, { at: Number(row.at), valueJson: row.value }]));
  }

  async allLatest(): Promise<Array<LatestState & { assetId: string }>> {
    const r = await this.#db.query<{ asset_id: string; at: string; value: string }>('SELECT asset_id, at, value FROM latest_states');
    return r.rows.map((row) => ({ assetId: row.asset_id, at: Number(row.at), valueJson: row.value }));
  }

  async lastSeenByDevice(deviceOf: (assetId: string) => string | undefined): Promise<Map<string, number>> {
    const r = await this.#db.query<{ asset_id: string; at: string }>('SELECT asset_id, at FROM latest_states');
    const byDevice = new Map<string, number>();
    for (const row of r.rows) {
      // Assets deleted since keep their latest row here until retention: not shown.
      const device = deviceOf(row.asset_id);
      if (device === undefined) continue;
      const at = Number(row.at);
      if (!byDevice.has(device) || at > byDevice.get(device)!) byDevice.set(device, at);
    }
    return byDevice;
  }

  async history(assetId: string, query: HistoryQuery): Promise<HistoryPage> {
    const from = query.from ?? -8.64e15;
    const to = query.to ?? 8.64e15;
    const c = query.cursor ?? { at: 8.64e15 + 1, seq: 0 };
    // Partition pruning keeps a page within the months from..to and the cursor cover.
    const r = await this.#db.query<HistoryRow>(
      `SELECT id, at, value, uplink_seq, codec FROM states
       WHERE asset_id = $1 AND at >= $2 AND at <= $3 AND (at < $4 OR (at = $4 AND id < $5))
       ORDER BY at DESC, id DESC LIMIT $6`,
      [assetId, from, to, c.at, c.seq, query.limit + 1],
    );
    const page = takePage<HistoryRow, HistoryRecord & { id: number }>(r.rows[Symbol.iterator](), query.limit, query.budget, (row) => ({
      id: Number(row.id),
      at: Number(row.at),
      valueJson: row.value,
      uplinkSeq: row.uplink_seq === null ? null : Number(row.uplink_seq),
      codec: row.codec,
    }));
    const last = page.data[page.data.length - 1];
    return {
      data: page.data.map(({ id: _id, ...state }) => state),
      next: page.more && last ? encodeHistoryCursor(last.at, last.id) : null,
    };
  }

  /**
   * A year of a large fleet is billions of rows, which count(*) would read every time: past a
   * million the planner's estimate is reported (docs/scale-out.md); the newest received comes
   * from the latest states.
   */
  async figures(): Promise<{ stored: number; lastReceivedAt: number | null }> {
    const estimate = await this.#db.query<{ n: string }>(
      `SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint AS n FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = 'states'::regclass`,
    );
    let stored = Number(estimate.rows[0]?.n ?? 0);
    if (stored < EXACT_COUNT_BELOW) stored = Number((await this.#db.query<{ n: string }>('SELECT count(*) AS n FROM states')).rows[0]!.n);
    const last = await this.#db.query<{ at: string | null }>('SELECT max(received_at) AS at FROM latest_states');
    const at = last.rows[0]?.at;
    return { stored, lastReceivedAt: at === null || at === undefined ? null : Number(at) };
  }
}
