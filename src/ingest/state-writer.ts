import type { Store } from '../store/store.js';
import type { StoredState } from '../store/states.js';
import { isServiceError, ServiceError } from '../core/errors.js';

/**
 * Work that must commit atomically with a write's states (the raw uplink they came from, a radio
 * session's frame counters, outbox rows). It runs inside the batch's transaction, before the
 * states are inserted, so it may still fill in fields of its own states.
 */
export type AlongsideWrite = () => void;

/**
 * Work that goes with every batch rather than with one write (the upstream outbox: a row per state).
 * `withinTransaction` runs in the batch's transaction after its states are inserted, possibly
 * several times in one transaction (once per write, when the writer retries a batch write by
 * write), and may throw a ServiceError to refuse the states it was given (a full outbox under
 * `reject-new`): the writer then refuses only the writes those states came with. `afterCommit`
 * and `afterFailure` let it keep in-memory totals true to what committed.
 */
export interface BatchHook {
  withinTransaction(states: readonly StoredState[]): void;
  afterCommit?(): void;
  /**
   * The transaction was rolled back: forget what `withinTransaction` added since the last commit.
   * `retried`: the writer runs the same writes again, one at a time, so a refusal is not final yet.
   */
  afterFailure?(err: unknown, retried: boolean): void;
}

/**
 * Where states are made durable before the node's own SQLite commit (several central nodes on
 * PostgreSQL, docs/scale-out.md): one call per batch; it marks the states already held as
 * `duplicate` and throws (STORE_UNAVAILABLE) when it cannot commit, so nothing is acknowledged.
 */
export type DurableStage = (states: StoredState[]) => Promise<void>;

/**
 * How long a batch may stay open while writes keep coming (ms): long enough to gather a burst of
 * datagrams into one commit, short against the 20 ms an uplink may take to its feed message.
 */
export const DEFAULT_COMMIT_WINDOW_MS = 5;

/**
 * SQLite refused a state naming an asset that no longer exists (the foreign key of latest_states):
 * deleted after the write was accepted, while it waited for the commit. (A raw uplink of a deleted
 * device is refused by its store with DEVICE_NOT_FOUND.)
 */
function namesDeletedAsset(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

const DELETED_ASSET = 'the asset was deleted before its state was stored';

/** What the writer needs of the store. */
type WriterStore = Pick<Store, 'states' | 'transaction' | 'transactionSyncedLater' | 'syncLog' | 'health' | 'checkpointForBurst'>;

/**
 * Writes in one batch from which on the commits count as a burst (Database.checkpointForBurst):
 * batches this large form only when writes queue up behind a commit and its flush (a saturating
 * load: some 140 uplinks or hundreds of MQTT states a commit); a steady 2 000 uplinks/s commits a
 * few at a time.
 */
export const BURST_WRITES = 64;

/** One caller's states and the work that commits with them: stored, or refused, together. */
interface Write {
  states: StoredState[];
  alongside: AlongsideWrite | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface PendingBatch {
  /** Every write's states in order, for the one-transaction path. */
  states: StoredState[];
  writes: Write[];
  /** When the first write came (performance.now()), for the window's bound. */
  openedAt: number;
  /** How many writes the batch had at the end of the previous turn: more now means the burst goes on. */
  seenWrites: number;
}

/**
 * Group commit: every state written while the batch is open goes into one SQLite transaction, and
 * each writer's promise settles only after that commit and the flush of the log that holds it
 * (the flush runs on the thread pool; the next batch gathers meanwhile). HTTP replies and MQTT
 * PUBACKs wait on it, so an acknowledged state is on disk, at the cost of one commit per batch
 * instead of one per message.
 *
 * A batch opens with its first write and commits at the end of that turn of the event loop, unless
 * the turn brought more writes: then it stays open for one more turn, and so on while each turn
 * adds writes, for at most `windowMs` after it opened. A socket hands over a bounded number of
 * messages per turn (libuv reads at most 32 UDP datagrams), so under a burst the batch gathers what
 * is already waiting in the kernel instead of committing every 32; a lone message commits one turn
 * later, and no write waits longer than `windowMs` plus one commit (docs/architecture.md, "Group
 * commit").
 *
 * A batch hook may refuse states (a full outbox under `reject-new`), and a write may name an asset
 * or device deleted after it was accepted (SQLite refuses it). Refusing the whole batch would
 * refuse every device's states for the few that did not fit, so then the batch runs again in one
 * transaction with a savepoint per write: a refused write rolls back alone and its caller gets the
 * refusal, the others commit. Only the rare refused batch pays for the savepoints.
 */
export class StateWriter {
  readonly #store: WriterStore;
  readonly #maxBatch: number;
  readonly #windowMs: number;
  #pending: PendingBatch | null = null;
  #onCommit: ((count: number, micros: number) => void) | undefined;
  readonly #onFlush: ((micros: number) => void) | undefined;
  readonly #hooks: BatchHook[] = [];
  #durable: DurableStage | undefined;
  #durableBusy = false;
  /** Whether states also go into the node's own SQLite history (false: the durable store serves every read). */
  #localStates = true;
  /** A committed batch's log flush is running: the next batch keeps gathering writes until it is done. */
  #flushing = false;
  /** The open batch reached its end (a quiet turn, or the window) while a flush ran: it commits when the flush is done. */
  #dueAfterFlush = false;

  /** `onCommit`: each commit's states and duration; `onFlush`: how long each batch's log flush took (the disk's share). */
  constructor(store: WriterStore, options: { maxBatch?: number; windowMs?: number; onCommit?: (count: number, micros: number) => void; onFlush?: (micros: number) => void } = {}) {
    this.#store = store;
    this.#maxBatch = options.maxBatch ?? 5000;
    this.#windowMs = options.windowMs ?? DEFAULT_COMMIT_WINDOW_MS;
    this.#onCommit = options.onCommit;
    this.#onFlush = options.onFlush;
  }

  addBatchHook(hook: BatchHook): void {
    this.#hooks.push(hook);
  }

  /**
   * Every batch goes through `stage` first; its duplicates are not written here again. With
   * `localStates: false` the node's SQLite keeps only what commits alongside the states (raw
   * uplinks, counters): history and latest states are read from the durable store itself.
   */
  setDurableStage(stage: DurableStage, options: { localStates?: boolean } = {}): void {
    this.#durable = stage;
    this.#localStates = options.localStates ?? true;
  }

  /** What of `states` the node's own SQLite stores. */
  #local(states: StoredState[]): StoredState[] {
    return this.#localStates ? states : [];
  }

  /** Settles after the commit that holds `states` and `alongside`; a write may carry no states. */
  write(states: StoredState[], alongside?: AlongsideWrite): Promise<void> {
    return new Promise((resolve, reject) => {
      let batch = this.#pending;
      if (!batch) {
        const opened = (batch = this.#pending = { states: [], writes: [], openedAt: performance.now(), seenWrites: 0 });
        setImmediate(() => this.#endOfTurn(opened));
      }
      for (const s of states) batch.states.push(s);
      batch.writes.push({ states, alongside, resolve, reject });
      if (batch.states.length >= this.#maxBatch) this.flush();
    });
  }

  /** The batch stays open while each turn of the event loop adds writes, within the window; else it commits. */
  #endOfTurn(batch: PendingBatch): void {
    if (this.#pending !== batch) return; // committed meanwhile (full, or flushed on shutdown)
    if (batch.writes.length > batch.seenWrites && performance.now() - batch.openedAt < this.#windowMs) {
      batch.seenWrites = batch.writes.length;
      setImmediate(() => this.#endOfTurn(batch));
      return;
    }
    // Committing now would only wait for the disk behind the flush in flight: gather until it is done.
    if (this.#flushing) {
      this.#dueAfterFlush = true;
      return;
    }
    this.flush();
  }

  /** Commits what is pending now; also called on shutdown so nothing queued is dropped. */
  flush(): void {
    this.#dueAfterFlush = false;
    if (this.#durable) return this.#flushDurable(this.#durable);
    const batch = this.#pending;
    if (!batch) return;
    this.#pending = null;
    this.#commit(batch);
  }

  /**
   * One batch at a time in the durable store: states commit in the order they were accepted, and
   * those arriving meanwhile gather into the next batch, taken as soon as this one is done (group
   * commit over the network: the busier the node, the larger the batches).
   */
  #flushDurable(stage: DurableStage): void {
    if (this.#durableBusy) return;
    const batch = this.#pending;
    if (!batch) return;
    this.#pending = null;
    this.#durableBusy = true;
    void this.#durableFirst(batch, stage).finally(() => {
      this.#durableBusy = false;
      this.#flushDurable(stage);
    });
  }

  /** The batch in the durable store, then (what was new there) in the node's own SQLite. */
  async #durableFirst(batch: PendingBatch, stage: DurableStage): Promise<void> {
    try {
      if (batch.states.length > 0) await stage(batch.states);
    } catch (err) {
      for (const hook of this.#hooks) hook.afterFailure?.(err, false);
      for (const w of batch.writes) w.reject(err);
      return;
    }
    batch.states = batch.states.filter((s) => !s.duplicate);
    for (const w of batch.writes) w.states = w.states.filter((s) => !s.duplicate);
    this.#commit(batch);
  }

  #commit(batch: PendingBatch): void {
    const started = process.hrtime.bigint();
    const hooks = this.#hooks;
    this.#store.checkpointForBurst(batch.writes.length >= BURST_WRITES);
    try {
      // The commit does not wait for the disk; the writers are settled once the log is flushed (#settle).
      this.#store.transactionSyncedLater(() => {
        for (const w of batch.writes) w.alongside?.();
        this.#store.states.write(this.#local(batch.states));
        for (const hook of hooks) hook.withinTransaction(batch.states);
      });
    } catch (err) {
      // A write of an asset or device deleted meanwhile, or refused by a hook: the others still commit.
      if ((isServiceError(err) && batch.writes.length > 1) || namesDeletedAsset(err)) {
        for (const hook of hooks) hook.afterFailure?.(err, true);
        this.#flushOneByOne(batch, started);
        return;
      }
      this.#failed(batch.writes, err);
      return;
    }
    this.#committed(batch.states.length, started);
    this.#settle(batch.writes, new Map());
  }

  /**
   * Settles the writes of a committed batch once its commit is on the disk: nothing is acknowledged
   * (HTTP answer, PUBACK, feed message, LoRaWAN answer) before. A disk that reports a failed flush
   * refuses them all (503): what the commit holds may not survive a power cut.
   */
  #settle(writes: readonly Write[], refused: ReadonlyMap<Write, unknown>): void {
    this.#flushing = true;
    const started = process.hrtime.bigint();
    const done = this.#store.syncLog();
    void done
      .catch(() => {})
      .then(() => {
        this.#flushing = false;
        this.#onFlush?.(Number(process.hrtime.bigint() - started) / 1000);
        if (this.#dueAfterFlush) {
          this.#dueAfterFlush = false;
          this.flush();
        }
      });
    done.then(
      () => {
        for (const w of writes) {
          if (refused.has(w)) w.reject(refused.get(w));
          else w.resolve();
        }
      },
      (err: unknown) => {
        const refusal = new ServiceError('STORAGE_UNAVAILABLE', `the disk did not confirm the write (${(err as Error)?.message ?? String(err)}); retry later`);
        for (const w of writes) w.reject(refused.get(w) ?? refusal);
      },
    );
  }

  /** The batch again, in one transaction with a savepoint per write: a refused write rolls back alone. */
  #flushOneByOne(batch: PendingBatch, started: bigint): void {
    const hooks = this.#hooks;
    // Set again by this run: a state that duplicated one of a write now refused is new after all.
    for (const s of batch.states) s.duplicate = undefined;
    const refused = new Map<Write, unknown>();
    try {
      this.#store.transactionSyncedLater(() => {
        for (const w of batch.writes) {
          try {
            // Nested: a savepoint of the batch's transaction.
            this.#store.transaction(() => {
              w.alongside?.();
              this.#store.states.write(this.#local(w.states));
              for (const hook of hooks) hook.withinTransaction(w.states);
            });
          } catch (err) {
            // Anything but a refusal (a full disk, a bug) fails the batch as before.
            if (namesDeletedAsset(err)) refused.set(w, new ServiceError('ASSET_NOT_FOUND', DELETED_ASSET));
            else if (isServiceError(err)) refused.set(w, err);
            else throw err;
          }
        }
      });
    } catch (err) {
      this.#failed(batch.writes, err);
      return;
    }
    let count = 0;
    for (const w of batch.writes) if (!refused.has(w)) count += w.states.length;
    this.#committed(count, started);
    this.#settle(batch.writes, refused);
  }

  #committed(count: number, started: bigint): void {
    this.#store.health.writeSucceeded();
    for (const hook of this.#hooks) hook.afterCommit?.();
    this.#onCommit?.(count, Number(process.hrtime.bigint() - started) / 1000);
  }

  #failed(writes: readonly Write[], err: unknown): void {
    for (const hook of this.#hooks) hook.afterFailure?.(err, false);
    const refusal = this.#store.health.observe(err) ?? err;
    for (const w of writes) w.reject(refusal);
  }
}
