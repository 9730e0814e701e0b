// What the management commands open: the same database as the daemon (which notices their commits).
import { systemClock } from '../core/time.js';
import { Store } from '../store/store.js';
import { Catalog } from '../store/catalog.js';
import { Registry } from '../registry/registry.js';
import { DeviceCodecs } from '../device-codecs/device-codecs.js';
import { createLogger } from '../ops/logger.js';
import { ServiceError } from '../core/errors.js';
import { ConfigError, type OutpostConfig } from '../core/config.js';
import { isCatalogCache } from '../store/replica-log.js';

export function openStore(config: OutpostConfig): Store {
  return Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes });
}

/** Runs `work` with the registry (and the catalog it reads through) over a freshly opened store, closing it afterwards. */
export function withRegistry<T>(config: OutpostConfig, work: (registry: Registry, store: Store, catalog: Catalog) => T): T {
  const store = openStore(config);
  try {
    const catalog = new Catalog(store);
    return work(new Registry(catalog, store, systemClock, config.limits, config.central), store, catalog);
  } finally {
    store.close();
  }
}

/**
 * Like withRegistry, for the commands that change the catalog: on a central on PostgreSQL
 * (docs/scale-out.md, "How the nodes share") the registry's writes are committed there first, under
 * the same cluster-wide lock as the nodes' (PostgreSQL away: STORE_UNAVAILABLE, nothing changed),
 * and this data directory's SQLite, the cache, follows. On one machine it is withRegistry.
 */
export async function withCatalogWrites<T>(config: OutpostConfig, work: (registry: Registry, store: Store, catalog: Catalog) => T | Promise<T>): Promise<T> {
  const store = openStore(config);
  let closeWrites = async () => {};
  try {
    const catalog = new Catalog(store);
    const registry = new Registry(catalog, store, systemClock, config.limits, config.central);
    const onPostgres = config.role === 'central' && !!config.central.postgres;
    if (!onPostgres && isCatalogCache(store.path)) {
      // A change made here alone would be a second record that PostgreSQL and the other nodes never see.
      throw new ConfigError(
        `${store.path} is the catalog cache of a central node on PostgreSQL (docs/scale-out.md): its devices, assets, tokens and gateways change through PostgreSQL; run the command with the node's configuration (role central and central.postgres, or OUTPOST_ROLE=central and OUTPOST_POSTGRES_URL)`,
      );
    }
    if (onPostgres) {
      const [{ CentralDatabase, isConnectionFailure }, { CatalogReplica }, { migratePostgres }] = await Promise.all([
        import('../scale-out/postgres.js'),
        import('../scale-out/catalog-replica.js'),
        import('../scale-out/schema.js'),
      ]);
      const db = new CentralDatabase(config.central.postgres!, { max: 2 });
      closeWrites = () => db.close().catch(() => {});
      await migratePostgres(db).catch((err: unknown) => {
        if (!isConnectionFailure(err)) throw err;
        throw new ServiceError('STORE_UNAVAILABLE', `store unavailable: central.postgres does not answer (${(err as Error).message}); nothing was changed`);
      });
      const replica = new CatalogReplica({ store, pg: db, logger: createLogger('silent'), catalog });
      registry.writes = replica;
      closeWrites = async () => {
        await replica.stop();
        await db.close().catch(() => {});
      };
    }
    return await work(registry, store, catalog);
  } finally {
    await closeWrites();
    store.close();
  }
}

/** The store plus the device codecs, for the commands that decode (codec, try, re-decode). */
export function openCodecParts(config: OutpostConfig) {
  const store = openStore(config);
  const catalog = new Catalog(store);
  const logger = createLogger('silent');
  const codecs = new DeviceCodecs(config, logger);
  return {
    store,
    catalog,
    codecs,
    logger,
    registry: new Registry(catalog, store, systemClock, config.limits, config.central),
    close() {
      codecs.dispose();
      store.close();
    },
  };
}
