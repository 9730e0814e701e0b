import type { OutpostConfig } from '../core/config.js';
import type { LatestState } from '../store/state-reads.js';

// Where the CLI finds states: the data directory's SQLite file, or, on a central node on
// PostgreSQL, PostgreSQL (its client loaded only then).

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

/**
 * A device the CLI deleted on a central node on PostgreSQL takes its history and latest states out
 * of PostgreSQL, as the daemon does for a delete through its API (docs/scale-out.md).
 */
export async function deleteDeviceStates(config: OutpostConfig, deviceId: string): Promise<void> {
  const url = config.central.postgres;
  if (!url) return;
  const [{ CentralDatabase }, { PostgresStateDeletions }, { StatePartitions }] = await Promise.all([
    import('../scale-out/postgres.js'),
    import('../scale-out/pg-states.js'),
    import('../scale-out/pg-partitions.js'),
  ]);
  const db = new CentralDatabase(url, { max: 1 });
  try {
    await new PostgresStateDeletions(db, new StatePartitions(db)).device(deviceId);
  } finally {
    await db.close();
  }
}
