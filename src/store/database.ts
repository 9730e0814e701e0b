import { statSync } from 'node:fs';
import BetterSqlite3, { type Database as SqliteHandle, type Statement } from 'better-sqlite3';
import { migrate } from './migrations.js';
import { StoreHealth, restoreAdvice } from './health.js';
import { isCorruption } from '../core/errors.js';
import { StatementCache } from './statements.js';
import { WalSync } from './wal-sync.js';

export interface DatabaseOptions {
  synchronous?: 'normal' | 'full';
  /** Largest database file in bytes (0: no limit). Over it writes fail with SQLITE_FULL (HTTP 503). */
  maxBytes?: number;
  /**
   * Run `PRAGMA quick_check` before using the file (the daemon does at start; the CLI does not,
   * it opens the file for every command). A damaged file throws StoreCorruptError.
   */
  checkIntegrity?: boolean;
}

/**
 * Pages the write-ahead log may hold before a commit checkpoints it into the file: SQLite's default
 * while commits are small, four times as many while they come in a burst (docs/architecture.md,
 * "Group commit": a checkpoint's stall grows with the log, its cost per page shrinks).
 */
export const WAL_CHECKPOINT_PAGES = { steady: 1000, burst: 4000 } as const;

/** The database file is damaged; the message says what to do. */
export class StoreCorruptError extends Error {
  override name = 'StoreCorruptError';
  readonly code = 'STORE_CORRUPT';
  constructor(
    readonly path: string,
    readonly problems: string[],
  ) {
    super(`the database file ${path} is damaged (${problems.slice(0, 3).join('; ')}${problems.length > 3 ? `; ${problems.length - 3} more` : ''}): ${restoreAdvice(path)}`);
  }
}

/**
 * The one SQLite connection of a process, shared by every aggregate of the store. It owns what is
 * about the file rather than about a table: opening it (pragmas, integrity check, migrations, size
 * cap), prepared statements, transactions, and the figures /healthz and the metrics read.
 * better-sqlite3 is synchronous, so the methods are too. Only src/store uses it (docs/architecture.md).
 */
export class Database {
  readonly path: string;
  /** What the store's failures say about it (damaged, full), for /healthz. */
  readonly health: StoreHealth;
  readonly #handle: SqliteHandle;
  readonly #statements: StatementCache;
  /**
   * `synchronous` FULL on a WAL database: a `transactionSyncedLater` commit leaves the flush of the
   * log to `syncLog`. Off with NORMAL (nothing to flush) and where WAL could not be had (a rollback
   * journal under NORMAL would risk more than the last commits; those commits keep waiting for the disk).
   */
  #flushLater = false;
  /** The log's checkpoint threshold now (checkpointForBurst). */
  #checkpointPages: number = WAL_CHECKPOINT_PAGES.steady;
  readonly #walSync: WalSync;
  /** What to undo in memory if the transaction or savepoint running now rolls back (`onRollback`); null outside one. */
  #undoOnRollback: Array<() => void> | null = null;

  constructor(path: string, options: DatabaseOptions = {}) {
    this.path = path;
    this.health = new StoreHealth(path);
    this.#handle = new BetterSqlite3(path);
    this.#statements = new StatementCache(this.#handle);
    this.#walSync = new WalSync(path);
    try {
      this.#configure(options);
    } catch (err) {
      this.#handle.close();
      // A header or schema page too damaged to even open the file.
      if (isCorruption(err)) throw new StoreCorruptError(path, [(err as Error).message]);
      throw err;
    }
  }

  #configure(options: DatabaseOptions): void {
    const db = this.#handle;
    if (options.checkIntegrity) {
      // Before migrations, so a damaged file is never written to. quick_check reads every page
      // (O(N), measured in docs/configuration.md) but skips the index-content cross-check.
      const problems = db.pragma('quick_check(20)', { simple: false }) as Array<{ quick_check: string }>;
      const found = problems.map((r) => r.quick_check).filter((m) => m !== 'ok');
      if (found.length > 0) throw new StoreCorruptError(this.path, found);
    }
    const journal = db.pragma('journal_mode = WAL', { simple: true });
    this.#flushLater = options.synchronous !== 'normal' && journal === 'wal';
    // NORMAL in WAL mode survives a killed process; FULL (the default) also survives power loss, at
    // one fsync per group commit: measured to keep well over half the ingest rate (README, Benchmarks).
    db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    db.pragma(`wal_autocheckpoint = ${this.#checkpointPages}`);
    db.pragma('foreign_keys = ON');
    // A cap on the database file keeps a small SD card from filling up: writes over it are refused
    // (503, Retry-After) instead of taking the whole system down with a full disk.
    if (options.maxBytes) this.setMaxBytes(options.maxBytes);
    // The CLI writes to the same file while the daemon runs; wait for each other's short transactions.
    db.pragma('busy_timeout = 5000');
    migrate(db);
  }

  /** A prepared statement for this SQL, prepared once per connection (the aggregates' hot paths). */
  statement(sql: string): Statement {
    return this.#statements.get(sql);
  }

  /**
   * Deletes the rows of `table` whose seq `seqs` selects (a SELECT of one column, with `params`) at
   * most `chunk` at a time, each chunk its own short transaction, so retention never holds the
   * write lock long enough to stall the group commit. `seqs` should find its rows through an index
   * (it runs again for each chunk). Returns how many went.
   */
  deleteInChunks(table: 'states' | 'raw_uplinks', seqs: string, params: unknown[], chunk = 5000): number {
    const statement = this.statement(`DELETE FROM ${table} WHERE seq IN (${seqs} LIMIT ${chunk})`);
    let removed = 0;
    for (;;) {
      const n = statement.run(...params).changes;
      removed += n;
      if (n < chunk) return removed;
    }
  }

  /**
   * Runs `work` in one transaction (a savepoint when already inside one), so writes that belong
   * together (an uplink's states, its raw bytes, a radio session's counters, an outbox row) commit
   * or fail together.
   */
  transaction<T>(work: () => T): T {
    const enclosing = this.#undoOnRollback;
    const undo: Array<() => void> = [];
    this.#undoOnRollback = undo;
    try {
      // IMMEDIATE takes the write lock at BEGIN, waiting out the other process's transaction
      // (busy_timeout). A deferred BEGIN that reads first and writes second fails at once with
      // SQLITE_BUSY when the daemon committed in between (WAL cannot upgrade a stale snapshot):
      // `outpost outbox purge` met exactly that while the daemon ingested.
      const result = this.#handle.transaction(work).immediate();
      // A savepoint released: the enclosing transaction's rollback still undoes its work.
      if (enclosing) for (const u of undo) enclosing.push(u);
      return result;
    } catch (err) {
      for (let i = undo.length - 1; i >= 0; i--) undo[i]!();
      throw err;
    } finally {
      this.#undoOnRollback = enclosing;
    }
  }

  /**
   * Runs `undo` if the transaction (or savepoint) open now rolls back: for what a writer keeps in
   * memory beside its rows (the rows waiting for an index filled in rounds). Outside a transaction
   * there is nothing to undo.
   */
  onRollback(undo: () => void): void {
    this.#undoOnRollback?.push(undo);
  }

  /**
   * Runs `work` as one unit: as part of the caller's transaction when there is one (its rollback
   * undoes the work too), else in a transaction of its own. Unlike a nested `transaction` it opens
   * no savepoint: inside a savepoint SQLite first copies every page the work changes to a statement
   * journal (a temporary file), which on the group commit's path was one more write per changed
   * page of every commit.
   */
  atomically<T>(work: () => T): T {
    return this.#handle.inTransaction ? work() : this.transaction(work);
  }

  /**
   * Sets the log's checkpoint threshold for the commits that follow (the group commit calls it
   * before each one). A checkpoint copies every page the log holds into the file and flushes the
   * file, inside the commit that crosses the threshold, on the event loop. Under a burst SQLite's
   * 1 000 pages (~4 MB) came every few commits, each copying pages the next commits dirtied again:
   * 4 000 pages measured 15 % less CPU per uplink on the SQLite part. Between bursts the larger
   * log only made each checkpoint's stall four times as long, and it is what a state waits for
   * when it arrives during one (docs/architecture.md, "Group commit").
   */
  checkpointForBurst(burst: boolean): void {
    const pages = burst ? WAL_CHECKPOINT_PAGES.burst : WAL_CHECKPOINT_PAGES.steady;
    if (pages === this.#checkpointPages) return;
    // A pragma that sets this returns the new value: `get`, not `run`.
    this.statement(`PRAGMA wal_autocheckpoint = ${pages}`).get();
    this.#checkpointPages = pages;
  }

  /**
   * Like `transaction`, but its commit does not wait for the disk: the caller must await `syncLog()`
   * before acknowledging anything it wrote (the group commit, src/ingest/state-writer.ts). With
   * `synchronous` FULL a commit writes its pages to the log and then flushes the log (fdatasync)
   * while the event loop waits, which on an SD card is most of the commit; here the commit runs
   * with NORMAL (the log is written, not flushed; checkpoints still flush) and the flush runs on
   * the thread pool. What is acknowledged is on the disk either way (docs/architecture.md, "Group
   * commit"). Inside another transaction it is simply a savepoint of it.
   */
  transactionSyncedLater<T>(work: () => T): T {
    if (!this.#flushLater || this.#handle.inTransaction) return this.transaction(work);
    this.statement('PRAGMA synchronous = NORMAL').run();
    try {
      return this.transaction(work);
    } finally {
      this.statement('PRAGMA synchronous = FULL').run();
    }
  }

  /** Settles once every commit made so far is on the disk (at once when commits wait for the disk themselves, or with `synchronous` NORMAL, which promises no more). */
  syncLog(): Promise<void> {
    return this.#flushLater ? this.#walSync.request() : Promise.resolve();
  }

  get open(): boolean {
    return this.#handle.open;
  }

  close(): void {
    this.#walSync.close();
    if (this.#handle.open) this.#handle.close();
  }

  /** Caps the database file (0: no cap); also used by a config reload. */
  setMaxBytes(maxBytes: number): void {
    const pageSize = this.#handle.pragma('page_size', { simple: true }) as number;
    // 4294967294 is SQLite's own largest page count, i.e. no cap.
    const pages = maxBytes > 0 ? Math.max(1, Math.floor(maxBytes / pageSize)) : 4294967294;
    this.#handle.pragma(`max_page_count = ${pages}`);
    this.health.setMaxBytes(maxBytes);
  }

  /** Changes whenever another connection (the CLI) commits: the daemon's cue to drop its caches. */
  dataVersion(): number {
    return this.statement('PRAGMA data_version').pluck().get() as number;
  }

  /** The schema version the migrations brought the file to. */
  schemaVersion(): number {
    return this.#handle.pragma('user_version', { simple: true }) as number;
  }

  /** Reads from the file; throws if the connection cannot (the watchdog's liveness probe). */
  ping(): void {
    this.statement('SELECT 1').get();
  }

  /** Moves the write-ahead log into the database file and empties the log. */
  checkpoint(): void {
    this.#handle.pragma('wal_checkpoint(TRUNCATE)');
  }

  /** Bytes on disk: the database file plus its write-ahead log. */
  sizeBytes(): number {
    let size = 0;
    for (const suffix of ['', '-wal']) {
      try {
        size += statSync(this.path + suffix).size;
      } catch {
        // a missing WAL file is simply empty
      }
    }
    return size;
  }
}
