import type { Logger } from '../ops/logger.js';
import type { CentralDatabase } from './postgres.js';
import { monthOf, type StatePartitions } from './pg-partitions.js';

const DAY_MS = 86_400_000;
/** Rows per DELETE: short transactions, so writers are never held long. */
const CHUNK = 10_000;

/**
 * Age retention of the history in PostgreSQL (limits.historyDays, docs/scale-out.md), run by every
 * node at store.pruneIntervalSeconds: the months wholly older than the limit are dropped as
 * partitions (no row-by-row delete, no table bloat), then the rows older than it in the month
 * that straddles it go in chunks. The months ahead are created on the way. Nodes doing it at once
 * take turns on the partitions (an advisory lock) and delete disjoint rows. Latest states stay, as
 * on SQLite; limits.historyPerAsset: see pruneByCount.
 */
export async function pruneHistory(db: CentralDatabase, partitions: StatePartitions, historyDays: number, now: number, logger: Logger): Promise<{ dropped: string[]; removed: number }> {
  await partitions.ensureAhead(now);
  const before = now - historyDays * DAY_MS;
  const dropped = await partitions.dropBefore(before);
  const straddling = monthOf(before);
  let removed = 0;
  if ((await partitions.list()).some((m) => m.start === straddling.start)) {
    for (;;) {
      // The partition itself, not `states`: a ctid is only meaningful within one table.
      const r = await db.query(
        `DELETE FROM ${straddling.name} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${straddling.name} WHERE at < $1 LIMIT ${CHUNK} FOR UPDATE SKIP LOCKED))`,
        [before],
      );
      removed += r.rowCount ?? 0;
      if ((r.rowCount ?? 0) < CHUNK) break;
    }
  }
  if (dropped.length > 0 || removed > 0) logger.debug({ dropped, removed }, 'postgres history pruned');
  return { dropped, removed };
}

/**
 * limits.historyPerAsset in PostgreSQL, as on SQLite (ops/retention.ts): each asset that received
 * states since the last run keeps its newest `keep`; every node trims the assets whose states it
 * took. The edge is found by the unique index, newest first; the delete is a range of it.
 */
export async function pruneByCount(db: CentralDatabase, assetIds: Iterable<string>, keep: number): Promise<number> {
  let removed = 0;
  for (const assetId of assetIds) {
    const edge = await db.query<{ at: string; id: string }>('SELECT at, id FROM states WHERE asset_id = $1 ORDER BY at DESC, id DESC OFFSET $2 LIMIT 1', [assetId, keep]);
    const row = edge.rows[0];
    if (!row) continue;
    const r = await db.query('DELETE FROM states WHERE asset_id = $1 AND (at < $2 OR (at = $2 AND id <= $3))', [assetId, row.at, row.id]);
    removed += r.rowCount ?? 0;
  }
  return removed;
}
