import type { OutpostConfig } from '../core/config.js';
import type { LatestState } from '../store/state-reads.js';

/**
 * The latest states a command shows: those of the SQLite file it opened (`local`, read while it
 * was open), or, on a central node on PostgreSQL (`central.postgres`), PostgreSQL's, since such a
 * node keeps no states in its file (docs/scale-out.md). The PostgreSQL client is loaded only then.
 */
export async function latestStates(config: OutpostConfig, assetIds: readonly string[], local: Map<string, LatestState>): Promise<Map<string, LatestState>> {
  const url = config.central.postgres;
  if (!url) return local;
  const [{ CentralDatabase }, { PostgresStateReads }] = await Promise.all([import('../scale-out/postgres.js'), import('../scale-out/pg-state-reads.js')]);
  const db = new CentralDatabase(url, { max: 1 });
  try {
    return await new PostgresStateReads(db).latestOf(assetIds);
  } finally {
    await db.close();
  }
}
