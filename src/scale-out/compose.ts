import { ServiceError } from '../core/errors.js';
import type { Core } from '../roles/core.js';
import { redisCluster, redisHealthDoor } from './redis-cluster.js';
import type { GatewayPresence, PendingCommands } from '../sync/central/ports.js';
import { CatalogReplica } from './catalog-replica.js';
import { CentralDatabase } from './postgres.js';
import { PostgresDoor } from './postgres-door.js';
import { PostgresGatewayPresence, PostgresPendingCommands } from './pg-ports.js';
import { PostgresStateDeletions, PostgresStates } from './pg-states.js';
import { PostgresStateReads } from './pg-state-reads.js';

/**
 * What `central.postgres` changes in the central's composition (docs/scale-out.md): states go to
 * PostgreSQL before they are acknowledged and every node reads them there (its SQLite keeps none:
 * no copy to fall behind, no node's disk holding the fleet's history), commands for offline
 * gateways wait there, presence is shared, and the node's catalog follows the cluster through the
 * replica. Loaded only then.
 */
export function scaleOutParts(core: Core) {
  const db = new CentralDatabase(core.config.central.postgres!);
  const replica = new CatalogReplica({ store: core.store, pg: db, logger: core.logger, catalog: core.catalog });
  // Catalog writes are committed in PostgreSQL first; the node's SQLite is their cache.
  core.registry.writes = replica;
  const states = new PostgresStates(db, replica.node, { deviceOf: (assetId) => core.catalog.assetById(assetId)?.deviceId });
  // A deleted asset or device takes its states with it, as SQLite's cascade does on one machine.
  const deletions = new PostgresStateDeletions(db, states.partitions);
  const notDeleted = (err: unknown) => core.logger.warn({ err: (err as Error).message }, 'postgres: states of a deleted asset or device not deleted; retention drops them');
  core.registry.on('assetDeleted', (asset) => void deletions.asset(asset.id).catch(notDeleted));
  core.registry.on('deviceDeleted', (deviceId) => void deletions.device(deviceId).catch(notDeleted));
  core.writer.setDurableStage((batch) => states.write(batch), { localStates: false });
  core.readStatesFrom(new PostgresStateReads(db));
  core.metrics.counterFrom('outpost_postgres_duplicates_total', 'States PostgreSQL already held (any node): acknowledged, not stored twice', () => states.duplicates);
  core.metrics.gauge('outpost_postgres_up', '1 while PostgreSQL answers this node', () => (db.failing ? 0 : 1));
  core.metrics.counterFrom('outpost_catalog_rows_written_total', 'Catalog rows this node committed to PostgreSQL', () => replica.figures.written);
  core.metrics.counterFrom('outpost_catalog_rows_applied_total', "Catalog rows applied to this node's cache from PostgreSQL (its own writes' and other nodes')", () => replica.figures.pulled);
  core.metrics.counterFrom('outpost_catalog_writes_refused_total', 'Catalog writes refused (503) because PostgreSQL did not answer', () => replica.figures.refused);
  const pgPresence = new PostgresGatewayPresence(db, replica.node);
  // Assets whose states this node took since the last retention run: it trims them to limits.historyPerAsset.
  const touched = new Set<string>();
  core.pipeline.on('state', (event) => touched.add(event.asset.id));
  return {
    db,
    replica,
    pendingCommands: new PostgresPendingCommands(db) as PendingCommands,
    /** A gateway connected to another live node (GET /gateway/<id> answers alike on every node). */
    connectedElsewhere: (gatewayId: string) => pgPresence.connectedElsewhere(gatewayId),
    /** The node's own record (GET /gateway lastSeen, replicated) and the shared one. */
    presence(local: GatewayPresence): GatewayPresence {
      return {
        opened: (id, at) => Promise.all([local.opened(id, at), pgPresence.opened(id, at)]).then(() => {}),
        closed: (id, at) => Promise.all([local.closed(id, at), pgPresence.closed(id, at)]).then(() => {}),
      };
    },
    /** A node that lost PostgreSQL takes no writes (its probe notices within 2 s; a failed write at once). */
    writesRefused: () => (db.failing ? new ServiceError('STORE_UNAVAILABLE', `store unavailable: PostgreSQL does not answer (${db.health().error})`, { retryAfter: 5 }) : undefined),
    door: (keptFor: (gatewayId: string) => void) => new PostgresDoor({
        db,
        replica,
        presence: pgPresence,
        partitions: states.partitions,
        logger: core.logger,
        keptFor,
        // Limits read per run: a reload changes them.
        retention: {
          historyDays: () => core.config.limits.historyDays,
          historyPerAsset: () => core.config.limits.historyPerAsset,
          intervalSeconds: core.config.store.pruneIntervalSeconds,
          now: () => core.clock.now(),
          touchedAssets: () => {
            const ids = [...touched];
            touched.clear();
            return ids;
          },
          touch: (assetId) => void touched.add(assetId),
        },
      }),
  };
}

/** `central.redis`: the MQTT doors of the nodes share messages through Redis (only with PostgreSQL: checked with the config). */
export async function brokerCluster(core: Core) {
  const cluster = await redisCluster(core.config.central.redis!);
  core.metrics.gauge('outpost_redis_up', '1 while this node is connected to Redis', () => (cluster.health().status === 'ok' ? 1 : 0));
  return { broker: cluster, door: redisHealthDoor(() => cluster.health(), () => cluster.close()) };
}
