import type { Database } from './database.js';

/**
 * The characters of an id in the order SQLite sorts them (src/core/ids.ts: ids are 24 random
 * characters of these). A slice is the rows whose owner's id starts with one of a run of them.
 */
const ID_CHARACTERS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/**
 * Few enough that a commit adds to the end of only a few runs of the waiting rows' index (each
 * slice is one run of it, and a commit writes every page it touched), many enough that a turn's
 * share of the work stays small (at 10 000 uplinks/s, ~600 uplinks' rows: about 2 ms).
 */
const SLICES = 16;
const SLICE_BY_CODE = new Uint8Array(128).map((_, code) => {
  const rank = ID_CHARACTERS.indexOf(String.fromCharCode(code));
  return rank >= 0 ? Math.floor((rank * SLICES) / ID_CHARACTERS.length) + 1 : (code % SLICES) + 1;
});
/**
 * How long a turn lasts: each slice is indexed once every SLICES × TURN_MS (~500 ms) while writes
 * come. The longer that, the more rows of one owner share the index pages a turn writes (an asset
 * that sends every 100 ms: five); the cost is what a reader scans besides the index (the rows of
 * its own slice, at most ~500 ms of them).
 */
const TURN_MS = 31;

/**
 * The slice (1…16) the rows of `owner` wait in: the value of their `unindexed` column. By the first
 * character of the id: random ids make the slices even, and each slice is one run of the index's
 * key order, so the index pages a turn writes are not written again by the next turns (pages
 * shared by neighbouring owners stay in one slice). Stable across processes and versions, which
 * the readers rely on; any other id gets a slice too.
 */
export function sliceOf(owner: string): number {
  const code = owner.charCodeAt(0) || 0; // NaN for an empty id
  return code < 128 ? SLICE_BY_CODE[code]! : (code % SLICES) + 1;
}

/** The tables filled in rounds, and the column naming each row's owner (the key of its partial index). */
const OWNER_COLUMN = { states: 'asset_id', raw_uplinks: 'device_id' } as const;
export type RoundsTable = keyof typeof OWNER_COLUMN;

/**
 * The SQL of one owner's rows through both parts of a table filled in rounds: those in its index by
 * owner and those still waiting for it (in `<table>_unindexed` under the owner's slice: at most one
 * round of rows). Each part is ordered by `orderBy` and limited to `@limit` on its own, so neither
 * reads more; `where` may use its own parameters beside `@owner`, `@slice` (see `ownerParameters`)
 * and `@limit`.
 */
export function ownerRows(table: RoundsTable, columns: string, where: string, orderBy: string): string {
  const filter = where ? ` AND ${where}` : '';
  const owner = OWNER_COLUMN[table];
  return `SELECT ${columns} FROM (SELECT ${columns} FROM ${table} WHERE ${owner} = @owner AND unindexed IS NULL${filter} ORDER BY ${orderBy} LIMIT @limit)
    UNION ALL
    SELECT ${columns} FROM (SELECT ${columns} FROM ${table} INDEXED BY ${table}_unindexed WHERE unindexed = @slice AND ${owner} = @owner${filter} ORDER BY ${orderBy} LIMIT @limit)
    ORDER BY ${orderBy} LIMIT @limit`;
}

/** The SQL counting one owner's rows that match `where` (parameters as for `ownerRows`) in both parts of the table. */
export function ownerCount(table: RoundsTable, where = ''): string {
  const filter = where ? ` AND ${where}` : '';
  const owner = OWNER_COLUMN[table];
  return `SELECT (SELECT count(*) FROM ${table} WHERE ${owner} = @owner AND unindexed IS NULL${filter})
    + (SELECT count(*) FROM ${table} INDEXED BY ${table}_unindexed WHERE unindexed = @slice AND ${owner} = @owner${filter})`;
}

/** The `@owner` and `@slice` of the queries that read both parts of an owner's rows. */
export function ownerParameters(ownerId: string): { owner: string; slice: number } {
  return { owner: ownerId, slice: sliceOf(ownerId) };
}

/**
 * An index filled in rounds (docs/architecture.md, "History index"): a row is written with
 * `unindexed` set to its owner's slice, which keeps it out of the table's partial index by owner
 * and puts it in `<table>_unindexed` (slice, seq), where each slice only grows at its end. Every
 * turn a write puts the rows of the next slice into the index with one statement, so each index
 * page the turn changes is written to the log once per ~500 ms instead of once per commit. The
 * table's writer calls `beforeWrite` inside its transaction, so the turn commits with its rows.
 */
export class IndexRounds {
  readonly #db: Database;
  readonly #table: string;
  /** The last turn whose slice was indexed; undefined after opening: the first write indexes whatever an earlier run left. */
  #lastTurn: number | undefined;

  /** `table` has an `unindexed` column and the index `<table>_unindexed` on (unindexed, seq) of the rows that have it set. */
  constructor(db: Database, table: RoundsTable) {
    this.#db = db;
    this.#table = table;
  }

  /** Indexes the slices whose turn came since the last write; inside the writer's transaction. */
  beforeWrite(now: number): void {
    const turn = Math.floor(now / TURN_MS);
    const last = this.#lastTurn;
    if (last === turn) return;
    this.#lastTurn = turn;
    if (last === undefined || turn - last >= SLICES) {
      this.#all();
      return;
    }
    const slice = this.#db.statement(`UPDATE ${this.#table} INDEXED BY ${this.#table}_unindexed SET unindexed = NULL WHERE unindexed = ?`);
    for (let t = last + 1; t <= turn; t++) slice.run((t % SLICES) + 1);
  }

  /** Puts every waiting row into the index now (a reader that counts through the index, a writer that compares with every row). */
  runNow(): void {
    this.#db.atomically(() => this.#all());
  }

  #all(): void {
    this.#db.statement(`UPDATE ${this.#table} INDEXED BY ${this.#table}_unindexed SET unindexed = NULL WHERE unindexed IS NOT NULL`).run();
  }
}
