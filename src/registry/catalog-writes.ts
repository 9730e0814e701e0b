/**
 * Where a catalog write (devices, assets, tokens, gateways, LoRaWAN and codec settings, managed
 * devices) is decided and made durable. On one machine the write is simply run: its SQLite commit
 * is the record. A central on PostgreSQL (docs/scale-out.md, "How the nodes share") runs it under
 * the cluster's catalog lock and answers only once PostgreSQL committed it; its SQLite is a cache.
 * `work` is synchronous and makes the change through the store as on one machine.
 */
export interface CatalogWrites {
  run<T>(work: () => T): Promise<T>;
}
