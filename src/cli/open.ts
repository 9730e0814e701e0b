// What the management commands open: the same database as the daemon (which notices their commits).
import type { OutpostConfig } from '../core/config.js';
import { systemClock } from '../core/time.js';
import { Store } from '../store/store.js';
import { Catalog } from '../store/catalog.js';
import { Registry } from '../registry/registry.js';
import { DeviceCodecs } from '../device-codecs/device-codecs.js';
import { createLogger } from '../ops/logger.js';

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
