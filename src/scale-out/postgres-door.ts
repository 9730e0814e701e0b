import type { Door } from '../doors/door.js';
import type { Logger } from '../ops/logger.js';
import { ServiceError } from '../core/errors.js';
import { isConnectionFailure, type CentralDatabase } from './postgres.js';
import { migratePostgres } from './schema.js';
import { ChannelListener } from './channel-listener.js';
import type { CatalogReplica } from './catalog-replica.js';
import { COMMANDS_CHANNEL, type PostgresGatewayPresence } from './pg-ports.js';
import { pruneByCount, pruneHistory } from './pg-retention.js';
import type { StatePartitions } from './pg-partitions.js';

/** limits.historyDays and historyPerAsset (read per run: a reload changes them), the assets this node took states for since the last run. */
export interface Retention {
  historyDays: () => number;
  historyPerAsset: () => number;
  intervalSeconds: number;
  now: () => number;
  /** Takes the assets touched since the last call. */
  touchedAssets: () => string[];
  touch: (assetId: string) => void;
}

/**
 * PostgreSQL as a door of a central node (docs/scale-out.md): listed first, so the schema is
 * migrated and the node has caught up with the cluster's catalog before HTTP and MQTT serve; it
 * stops last. Its /healthz section is `postgres` (`ok` / `failing`); a node that lost PostgreSQL
 * is `degraded` and refuses writes with 503 STORE_UNAVAILABLE until it answers again.
 */
export class PostgresDoor implements Door {
  readonly name = 'postgres';
  readonly #db: CentralDatabase;
  readonly #replica: CatalogReplica;
  readonly #logger: Logger;
  readonly #keptFor: (gatewayId: string) => void;
  readonly #presence: PostgresGatewayPresence;
  readonly #partitions: StatePartitions;
  readonly #retention: Retention;
  #pruneTimer: NodeJS.Timeout | undefined;
  readonly #listener: ChannelListener;
  #timer: NodeJS.Timeout | undefined;
  schemaVersion = 0;

  constructor(deps: {
    db: CentralDatabase;
    replica: CatalogReplica;
    presence: PostgresGatewayPresence;
    partitions: StatePartitions;
    logger: Logger;
    keptFor: (gatewayId: string) => void;
    retention: Retention;
  }) {
    this.#presence = deps.presence;
    this.#partitions = deps.partitions;
    this.#retention = deps.retention;
    this.#db = deps.db;
    this.#replica = deps.replica;
    this.#logger = deps.logger;
    this.#keptFor = deps.keptFor;
    // Commands another node kept for a gateway that may be connected here.
    this.#listener = new ChannelListener({
      url: deps.db.url,
      channel: COMMANDS_CHANNEL,
      onNotify: (gatewayId) => gatewayId && this.#keptFor(gatewayId),
      logger: deps.logger,
      what: 'kept commands',
    });
  }

  async start(): Promise<Record<string, number>> {
    let migrated: { from: number; to: number };
    try {
      migrated = await migratePostgres(this.#db);
    } catch (err) {
      // One line naming the setting, not a stack: the service manager retries the start.
      if (isConnectionFailure(err)) throw new ServiceError('STORE_UNAVAILABLE', `central.postgres: PostgreSQL does not answer, the node cannot start (${(err as Error).message})`);
      throw err;
    }
    const { from, to } = migrated;
    this.schemaVersion = to;
    if (from !== to) this.#logger.info({ from, to }, 'postgres schema migrated');
    const { intervalSeconds, now } = this.#retention;
    // This month's and the next one's partitions before any state is taken.
    await this.#partitions.ensureAhead(now());
    await this.#replica.start();
    await this.#listener.start();
    this.#presence.start();
    this.#pruneTimer = setInterval(() => void this.#prune(), intervalSeconds * 1000).unref();
    // Keeps health honest when nothing is written.
    this.#timer = setInterval(() => void this.#probe(), 2000).unref();
    return {};
  }

  /** By age (whole months, then the straddling one), then by count for the assets this node took states for. */
  async #prune(): Promise<void> {
    const { historyDays, historyPerAsset, touchedAssets, now } = this.#retention;
    const touched = touchedAssets();
    try {
      await pruneHistory(this.#db, this.#partitions, historyDays(), now(), this.#logger);
      const removed = await pruneByCount(this.#db, touched, historyPerAsset());
      if (removed > 0) this.#logger.debug({ removed }, 'postgres history trimmed to limits.historyPerAsset');
    } catch (err) {
      // The assets are trimmed at the next run instead.
      for (const id of touched) this.#retention.touch(id);
      this.#logger.warn({ err: (err as Error).message }, 'postgres history pruning failed; will retry');
    }
  }

  async #probe(): Promise<void> {
    try {
      await this.#db.query('SELECT 1');
    } catch {
      // Reported by health(); tried again at the next tick.
    }
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#presence.stop();
    clearInterval(this.#pruneTimer);
    await this.#listener.stop();
    await this.#replica.stop();
    await this.#db.close().catch(() => {});
  }

  health(): Record<string, unknown> {
    return { ...this.#db.health(), schemaVersion: this.schemaVersion, node: this.#replica.node, replica: this.#replica.figures };
  }

  degradedBecause(): string | undefined {
    const h = this.#db.health();
    return h.status === 'failing' ? `postgres: ${h.error}` : undefined;
  }
}
