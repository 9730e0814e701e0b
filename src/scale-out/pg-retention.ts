import type { Logger } from '../ops/logger.js';
import type { CentralDatabase } from './postgres.js';

const DAY_MS = 86_400_000;
/** Rows per DELETE: short transactions, so writers are never held long. */
const CHUNK = 10_000;

/**
 * Age retention of the history in PostgreSQL (limits.historyDays, docs/scale-out.md): every node
 * runs it at store.pruneIntervalSeconds in chunks; nodes doing it at once delete disjoint rows or
 * wait on each other's, nothing more. The per-asset count limit (limits.historyPerAsset) applies
 * to each node's SQLite copy only.
 */
export async function pruneHistory(db: CentralDatabase, historyDays: number, now: number, logger: Logger): Promise<number> {
  const before = now - historyDays * DAY_MS;
  let removed = 0;
  for (;;) {
    const r = await db.query(`DELETE FROM states WHERE id IN (SELECT id FROM states WHERE at < $1 LIMIT ${CHUNK} FOR UPDATE SKIP LOCKED)`, [before]);
    removed += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < CHUNK) break;
  }
  if (removed > 0) logger.debug({ removed }, 'postgres history pruned');
  return removed;
}
