import type { Database } from './database.js';

/**
 * When a round runs: once the oldest row waiting has waited this long, or once this many wait.
 * The longer the round, the more rows of one asset (or device) share the index pages it writes (an
 * asset that sends every 100 ms: five a round); the cost is what a reader scans besides the index
 * (at most the rows of one round) and the round itself (about 1 µs a row, ~10 ms for 10 000 on the
 * development machine).
 */
const ROUND_MS = 500;
const ROUND_ROWS = 20_000;

/**
 * An index filled in rounds (docs/architecture.md, "History index"): rows are written with
 * `unindexed` set, outside the table's partial index by owner (asset or device) and inside a small
 * one by seq that only grows at its end, and a round puts every waiting row into the index with one
 * statement, so each index page it changes is written to the log once per round instead of once
 * per commit. The table's writer asks `beforeWrite` inside its transaction, so the round commits
 * with the rows written after it.
 */
export class IndexRounds {
  readonly #db: Database;
  readonly #round: string;
  /**
   * Rows this connection wrote outside the index since its last round, and when the first of them
   * was (performance.now()). Unknown after opening: the first write runs a round for whatever an
   * earlier run left waiting.
   */
  #waiting: { rows: number; since: number } | undefined;

  /** `table` has an `unindexed` column and the index `<table>_unindexed` on seq of the rows that have it set. */
  constructor(db: Database, table: 'states' | 'raw_uplinks') {
    this.#db = db;
    this.#round = `UPDATE ${table} INDEXED BY ${table}_unindexed SET unindexed = NULL WHERE unindexed IS NOT NULL`;
  }

  /** Runs the round when it is due; inside the writer's transaction. */
  beforeWrite(now: number): void {
    const w = this.#waiting;
    if (!w || w.rows >= ROUND_ROWS || (w.rows > 0 && now - w.since >= ROUND_MS)) this.#run(now);
  }

  /** Counts rows just written outside the index. */
  wrote(rows: number, now: number): void {
    const w = (this.#waiting ??= { rows: 0, since: now });
    if (w.rows === 0) w.since = now;
    w.rows += rows;
  }

  /** Runs a round now (a reader that counts through the index, a writer that compares with every row). */
  runNow(): void {
    this.#db.atomically(() => this.#run(performance.now()));
  }

  #run(now: number): void {
    this.#db.statement(this.#round).run();
    this.#waiting = { rows: 0, since: now };
  }
}
