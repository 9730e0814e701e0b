import type { Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { Store } from '../store/store.js';
import type { StatePipeline } from '../ingest/ingest.js';

export interface RetentionLimits {
  historyPerAsset: number;
  historyDays: number;
  rawUplinksPerDevice: number;
  rawUplinkDays: number;
}

/**
 * History and raw-uplink retention (docs/configuration.md, "Keys": limits.history*, limits.rawUplink*) in the background, never on the hot path: assets that received
 * states since the last run are trimmed to their newest N states, and everything past the age
 * limit goes.
 */
export class HistoryPruner {
  readonly #touched = new Set<string>();
  readonly #store: Pick<Store, 'states' | 'uplinks' | 'health'>;
  readonly #clock: Clock;
  readonly #limits: RetentionLimits;
  readonly #logger: Logger;

  constructor(store: Pick<Store, 'states' | 'uplinks' | 'health'>, pipeline: StatePipeline, clock: Clock, limits: RetentionLimits, logger: Logger) {
    this.#store = store;
    this.#clock = clock;
    this.#limits = limits;
    this.#logger = logger;
    pipeline.on('state', (event) => this.#touched.add(event.asset.id));
  }

  run(): number {
    const assets = [...this.#touched];
    this.#touched.clear();
    try {
      const removed =
        this.#store.states.prune(this.#clock.now() - this.#limits.historyDays * 86_400_000, assets, this.#limits.historyPerAsset) +
        this.#store.uplinks.prune(this.#limits.rawUplinksPerDevice, this.#clock.now() - this.#limits.rawUplinkDays * 86_400_000);
      if (removed > 0) this.#logger.debug({ removed }, 'history pruned');
      return removed;
    } catch (err) {
      for (const id of assets) this.#touched.add(id);
      // A damaged file is reported once, as an error with what to do (the store's health does);
      // repeating it every run would bury it.
      this.#store.health.observe(err);
      if (!this.#store.health.corrupt) this.#logger.warn({ err }, 'history pruning failed; will retry');
      return 0;
    }
  }
}
