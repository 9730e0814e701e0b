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

/** How long one slice of the pruner may hold the event loop (ms), and the pause before the next. */
export const PRUNE_SLICE_MS = 10;
export const PRUNE_PAUSE_MS = 40;

/**
 * History and raw-uplink retention (docs/configuration.md, "Keys": limits.history*, limits.rawUplink*)
 * in the background, never on the hot path: assets that received states since the last run are
 * trimmed to their newest N states, and everything past the age limit goes.
 *
 * Trimming an asset at its limit steps through its N newest index entries (~0.3 ms at the default
 * 10 000), so 2 000 busy assets would hold the event loop ~0.65 s in one go every run, long
 * enough to miss a LoRaWAN receive window. The periodic run (`start`) therefore works in slices of
 * PRUNE_SLICE_MS with PRUNE_PAUSE_MS between them.
 */
export class HistoryPruner {
  readonly #touched = new Set<string>();
  readonly #store: Pick<Store, 'states' | 'uplinks' | 'health'>;
  readonly #clock: Clock;
  readonly #limits: RetentionLimits;
  readonly #logger: Logger;
  readonly #sliceMs: number;
  readonly #pauseMs: number;
  /** The pause between two slices of a run, while assets are left to trim. */
  #nextSlice: NodeJS.Timeout | undefined;
  /** Assets this run still has to trim (taken from #touched when it started). */
  #due: string[] = [];

  constructor(
    store: Pick<Store, 'states' | 'uplinks' | 'health'>,
    pipeline: StatePipeline,
    clock: Clock,
    limits: RetentionLimits,
    logger: Logger,
    slices: { sliceMs?: number; pauseMs?: number } = {},
  ) {
    this.#store = store;
    this.#clock = clock;
    this.#limits = limits;
    this.#logger = logger;
    this.#sliceMs = slices.sliceMs ?? PRUNE_SLICE_MS;
    this.#pauseMs = slices.pauseMs ?? PRUNE_PAUSE_MS;
    pipeline.on('state', (event) => this.#touched.add(event.asset.id));
  }

  /**
   * Starts a run in slices, unless one is still going: the age limits and as many touched assets as
   * fit in a slice, then the rest a pause later, and so on. Returns how many rows the first slice removed.
   */
  start(): number {
    if (this.#nextSlice) return 0;
    this.#takeTouched();
    return this.#attempt(() => this.#pruneAged() + this.#slice());
  }

  /** The assets touched since the last run become due (one by one: a spread of tens of thousands would overflow the call). */
  #takeTouched(): void {
    for (const id of this.#touched) this.#due.push(id);
    this.#touched.clear();
  }

  /** Whether a run is still between two slices. */
  get running(): boolean {
    return this.#nextSlice !== undefined;
  }

  stop(): void {
    clearTimeout(this.#nextSlice);
    this.#nextSlice = undefined;
  }

  #slice(): number {
    const removed = this.#trimDue(performance.now() + this.#sliceMs);
    if (this.#due.length > 0) {
      this.#nextSlice = setTimeout(() => {
        this.#nextSlice = undefined;
        this.#attempt(() => this.#slice());
      }, this.#pauseMs);
      this.#nextSlice.unref();
    }
    return removed;
  }

  #pruneAged(): number {
    const now = this.#clock.now();
    return (
      this.#store.states.pruneAged(now - this.#limits.historyDays * 86_400_000) +
      this.#store.uplinks.prune(this.#limits.rawUplinksPerDevice, now - this.#limits.rawUplinkDays * 86_400_000)
    );
  }

  /** Trims due assets until `until` (performance.now()) has passed; the others stay due. */
  #trimDue(until: number): number {
    let removed = 0;
    while (this.#due.length > 0) {
      removed += this.#store.states.trimAsset(this.#due[this.#due.length - 1]!, this.#limits.historyPerAsset);
      this.#due.pop();
      if (performance.now() >= until) break;
    }
    return removed;
  }

  #attempt(work: () => number): number {
    try {
      const removed = work();
      if (removed > 0) this.#logger.debug({ removed }, 'history pruned');
      return removed;
    } catch (err) {
      // What was left of the run is tried again by the next one.
      for (const id of this.#due) this.#touched.add(id);
      this.#due = [];
      // A damaged file is reported once, as an error with what to do (the store's health does);
      // repeating it every run would bury it.
      this.#store.health.observe(err);
      if (!this.#store.health.corrupt) this.#logger.warn({ err }, 'history pruning failed; will retry');
      return 0;
    }
  }
}
