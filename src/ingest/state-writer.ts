import type { Store } from '../store/store.js';
import type { StoredState } from '../store/states.js';

/**
 * Work that must commit atomically with a write's states (the raw uplink they came from, a radio
 * session's frame counters, outbox rows). It runs inside the batch's transaction, before the
 * states are inserted, so it may still fill in fields of its own states.
 */
export type AlongsideWrite = () => void;

/**
 * Work that goes with every batch rather than with one write (the upstream outbox: a row per state).
 * `withinTransaction` runs in the batch's transaction after its states are inserted and may throw a
 * ServiceError to refuse the whole batch (a full outbox under `reject-new`); `afterCommit` and
 * `afterFailure` let it keep in-memory totals true to what committed.
 */
export interface BatchHook {
  withinTransaction(states: readonly StoredState[]): void;
  afterCommit?(): void;
  afterFailure?(err: unknown): void;
}

interface PendingBatch {
  states: StoredState[];
  alongside: AlongsideWrite[];
  waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }>;
}

/**
 * Group commit: every state written during one turn of the event loop goes into one SQLite
 * transaction, and each writer's promise settles only after that commit. HTTP replies and MQTT
 * PUBACKs wait on it, so an acknowledged state is on disk, at the cost of one commit per batch
 * instead of one per message.
 */
export class StateWriter {
  readonly #store: Pick<Store, 'states' | 'transaction' | 'health'>;
  readonly #maxBatch: number;
  #pending: PendingBatch | null = null;
  #onCommit: ((count: number, micros: number) => void) | undefined;
  readonly #hooks: BatchHook[] = [];

  constructor(store: Pick<Store, 'states' | 'transaction' | 'health'>, options: { maxBatch?: number; onCommit?: (count: number, micros: number) => void } = {}) {
    this.#store = store;
    this.#maxBatch = options.maxBatch ?? 5000;
    this.#onCommit = options.onCommit;
  }

  addBatchHook(hook: BatchHook): void {
    this.#hooks.push(hook);
  }

  /** Settles after the commit that holds `states` and `alongside`; a write may carry no states. */
  write(states: StoredState[], alongside?: AlongsideWrite): Promise<void> {
    return new Promise((resolve, reject) => {
      let batch = this.#pending;
      if (!batch) {
        batch = this.#pending = { states: [], alongside: [], waiters: [] };
        setImmediate(() => this.flush());
      }
      for (const s of states) batch.states.push(s);
      if (alongside) batch.alongside.push(alongside);
      batch.waiters.push({ resolve, reject });
      if (batch.states.length >= this.#maxBatch) this.flush();
    });
  }

  /** Commits what is pending now; also called on shutdown so nothing queued is dropped. */
  flush(): void {
    const batch = this.#pending;
    if (!batch) return;
    this.#pending = null;
    const started = process.hrtime.bigint();
    const hooks = this.#hooks;
    try {
      if (batch.alongside.length === 0 && hooks.length === 0) this.#store.states.write(batch.states);
      else {
        this.#store.transaction(() => {
          for (const work of batch.alongside) work();
          this.#store.states.write(batch.states);
          for (const hook of hooks) hook.withinTransaction(batch.states);
        });
      }
    } catch (err) {
      for (const hook of hooks) hook.afterFailure?.(err);
      const refusal = this.#store.health.observe(err) ?? err;
      for (const w of batch.waiters) w.reject(refusal);
      return;
    }
    this.#store.health.writeSucceeded();
    for (const hook of hooks) hook.afterCommit?.();
    this.#onCommit?.(batch.states.length, Number(process.hrtime.bigint() - started) / 1000);
    for (const w of batch.waiters) w.resolve();
  }
}
