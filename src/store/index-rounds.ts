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
 * The slice (1…16) the rows of `owner` wait in: the value of their `slice` column. By the first
 * character of the id: random ids make the slices even, and each slice is one run of the index's
 * key order, so the index pages a turn writes are not written again by the next turns (pages
 * shared by neighbouring owners stay in one slice). Stable across processes and versions, which
 * the readers rely on; any other id gets a slice too.
 */
export function sliceOf(owner: string): number {
  const code = owner.charCodeAt(0) || 0; // NaN for an empty id
  return code < 128 ? SLICE_BY_CODE[code]! : (code % SLICES) + 1;
}

/**
 * The tables filled in rounds: the column naming each row's owner, the table that indexes them by
 * owner (`<table>_by_<owner>`, keyed by the owner and the order columns, then seq), and what in a
 * filter names those order columns (see `onIndex`). Which rows still wait for that index is told by
 * `rounds_watermarks` (see `IndexRounds`); triggers (src/store/migrations.ts, schema 16) follow
 * deletions.
 */
const ROUNDS_TABLES = {
  states: { owner: 'asset_id', byOwner: 'states_by_asset', key: 'asset_id, at, seq', ordered: /(?<![@.\w])(at|seq)\b/g },
  raw_uplinks: { owner: 'device_id', byOwner: 'raw_uplinks_by_device', key: 'device_id, seq', ordered: /(?<![@.\w])(seq)\b/g },
} as const;
export type RoundsTable = keyof typeof ROUNDS_TABLES;

/**
 * A filter on the rows of an owner, in two parts: `ordered` names only the columns the index by
 * owner holds besides the owner (for states `at` and `seq`, for raw uplinks `seq`), so it narrows
 * that index's range; `row` names only the table's other columns and is checked on each row.
 * Either may use parameters of its own beside `@owner`, `@slice` (see `ownerParameters`) and `@limit`.
 */
export interface OwnerFilter {
  ordered?: string;
  row?: string;
}

/** `sql` with the index's own columns read from the index by owner, aliased `o`. */
function onIndex(table: RoundsTable, sql: string): string {
  return sql.replace(ROUNDS_TABLES[table].ordered, 'o.$1');
}

const and = (...conditions: Array<string | undefined>) => conditions.filter(Boolean).map((c) => ` AND ${c}`).join('');

/**
 * The condition on a row of `table` (aliased `alias`, of slice `slice`: a column or a parameter)
 * that it still waits for the index: it was written with a slice, after that slice's last round.
 */
function waitingIn(table: RoundsTable, slice: string, alias: string = table): string {
  return `${alias}.seq > (SELECT seq FROM rounds_watermarks WHERE tbl = '${table}' AND slice = ${slice}) AND ${alias}.slice = ${slice}`;
}

/**
 * The SQL of one owner's rows through both parts of a table filled in rounds: those in its index by
 * owner (read in its order, each row joined by seq) and those still waiting for it (the rows of the
 * owner's slice above its watermark: the table's newest, read by seq, at most one round of rows of
 * every slice). Each part is ordered by `orderBy` (columns of the index by owner) and limited to
 * `@limit` on its own, so neither reads more.
 */
export function ownerRows(table: RoundsTable, columns: string, filter: OwnerFilter, orderBy: string): string {
  const { owner, byOwner } = ROUNDS_TABLES[table];
  const fromRows = columns
    .split(',')
    .map((c) => `t.${c.trim()} AS ${c.trim()}`)
    .join(', ');
  return `SELECT ${columns} FROM (SELECT ${fromRows} FROM ${byOwner} o JOIN ${table} t ON t.seq = o.seq WHERE o.${owner} = @owner${and(filter.ordered && onIndex(table, filter.ordered), filter.row)} ORDER BY ${onIndex(table, orderBy)} LIMIT @limit)
    UNION ALL
    SELECT ${columns} FROM (SELECT ${columns} FROM ${table} WHERE ${waitingIn(table, '@slice')} AND ${owner} = @owner${and(filter.ordered, filter.row)} ORDER BY ${orderBy} LIMIT @limit)
    ORDER BY ${orderBy} LIMIT @limit`;
}

/** The SQL counting one owner's rows that match `filter` in both parts of the table. */
export function ownerCount(table: RoundsTable, filter: OwnerFilter = {}): string {
  const { owner, byOwner } = ROUNDS_TABLES[table];
  const indexed = filter.row
    ? `SELECT count(*) FROM ${byOwner} o JOIN ${table} t ON t.seq = o.seq WHERE o.${owner} = @owner${and(filter.ordered && onIndex(table, filter.ordered), filter.row)}`
    : `SELECT count(*) FROM ${byOwner} o WHERE o.${owner} = @owner${and(filter.ordered && onIndex(table, filter.ordered))}`;
  return `SELECT (${indexed})
    + (SELECT count(*) FROM ${table} WHERE ${waitingIn(table, '@slice')} AND ${owner} = @owner${and(filter.ordered, filter.row)})`;
}

/**
 * The SQL of the rows of `table` (aliased `alias`) that wait for the index, of any owner: those
 * above the lowest watermark (read by seq) that are above their own slice's. For the rare readers
 * across owners (what a re-decode cannot reach).
 */
export function waitingRows(table: RoundsTable, alias: string): string {
  return `${alias}.seq > (SELECT min(seq) FROM rounds_watermarks WHERE tbl = '${table}') AND ${waitingIn(table, `${alias}.slice`, alias)}`;
}

/**
 * Puts a row just inserted without a slice straight into the index by owner: `key` are the values
 * of the index's columns (the owner, the order columns, seq). Every writer of a table filled in
 * rounds lists its rows itself, here or with `IndexRounds.waits` (docs/architecture.md, "History index").
 */
export function indexRowNow(db: Database, table: RoundsTable, ...key: Array<string | number | bigint>): void {
  db.statement(INDEX_ROW[table]).run(...key);
}

/** The SQL of `indexRowNow`, made once: the statement cache is keyed by the text. */
const INDEX_ROW = Object.fromEntries(
  Object.entries(ROUNDS_TABLES).map(([table, { byOwner, key }]) => [table, `INSERT INTO ${byOwner} (${key}) VALUES (${key.split(', ').map(() => '?').join(', ')})`]),
) as Record<RoundsTable, string>;

/** The `@owner` and `@slice` of the queries that read both parts of an owner's rows. */
export function ownerParameters(ownerId: string): { owner: string; slice: number } {
  return { owner: ownerId, slice: sliceOf(ownerId) };
}

/** The SQL texts of one table's rounds, made once: the statement cache is keyed by the text. */
function roundsSql(table: RoundsTable) {
  const { key, byOwner } = ROUNDS_TABLES[table];
  const fromRow = key
    .split(', ')
    .map((c) => `t.${c}`)
    .join(', ');
  // OR IGNORE: a statement of many rows that could fail halfway on a constraint makes SQLite copy
  // every page it changes to a statement journal first; no row can be there twice (seq is unique).
  const into = `INSERT OR IGNORE INTO ${byOwner} (${key}) SELECT ${fromRow} FROM ${table} t`;
  // In the index's order: each insert lands beside the one before instead of anywhere in the index
  // (store microbenchmark: ~1 µs an uplink less than in the order written).
  const inOrder = `ORDER BY ${fromRow}`;
  return {
    /** The listed rows (a JSON array of seqs) of one slice (`@slice`), or of every slice (NULL). */
    listed: `${into} WHERE t.seq IN (SELECT value FROM json_each(@seqs)) AND t.slice = coalesce(@slice, t.slice) ${inOrder}`,
    /** Every row written with a slice above the lowest watermark (what an earlier run left). */
    above: `${into} WHERE t.seq > (SELECT min(seq) FROM rounds_watermarks WHERE tbl = '${table}') AND t.slice IS NOT NULL ${inOrder}`,
    /** A reused seq (see `waits`): into the index, out of its slice. */
    reused: `${into} WHERE t.seq = ?`,
    unslice: `UPDATE ${table} SET slice = NULL WHERE seq = ?`,
    top: `SELECT coalesce(max(seq), 0) FROM ${table}`,
    marks: `SELECT slice, seq FROM rounds_watermarks WHERE tbl = '${table}'`,
    mark: `UPDATE rounds_watermarks SET seq = ? WHERE tbl = '${table}' AND slice BETWEEN ? AND ?`,
  };
}

/**
 * An index filled in rounds (docs/architecture.md, "History index"): a row is written with `slice`
 * set to its owner's slice and listed here, in memory, instead of in the index by owner. Every turn
 * a write moves the listed rows of the next slice into the index, so each index page the turn
 * changes is written to the log once per ~500 ms instead of once per commit; the rows themselves
 * are never touched again. The table's writer calls `beforeWrite` inside its transaction, so the
 * turn commits with its rows.
 *
 * What other processes and a restart know of the waiting rows is each slice's **watermark** in
 * `rounds_watermarks`: the table's largest seq when the slice last had its round. Every row of the
 * slice at or below it is in the index; the rows above it wait (readers take them from the table's
 * end, by seq). That holds because only the process that runs the rounds writes rows with a slice
 * (the daemon, holding the data directory's lock; every other writer indexes its rows at once with
 * `indexRowNow`), the lists follow rollbacks (`Database.onRollback`), and a seq SQLite hands out
 * again at or below a watermark (after the newest rows were deleted) goes into the index at once.
 * After a restart the first write indexes every row above the lowest watermark: what the lists of
 * the run before held.
 */
export class IndexRounds {
  readonly #db: Database;
  readonly #sql: ReturnType<typeof roundsSql>;
  /** The last turn whose slice was indexed; undefined after opening. */
  #lastTurn: number | undefined;
  /** Whether this process indexed what an earlier run left waiting (the lists start empty). */
  #caughtUp = false;
  /** The rows written with a slice since its last round, by slice (index 1…SLICES). */
  #listed: number[][] = Array.from({ length: SLICES + 1 }, () => []);
  /**
   * Each slice's watermark as this process last set it (index 1…SLICES), read once. After a
   * rollback it may be above the stored one, which only sends a few more rows into the index at once.
   */
  #marks: number[] | undefined;

  constructor(db: Database, table: RoundsTable) {
    this.#db = db;
    this.#sql = roundsSql(table);
  }

  /** Lists a row just inserted with `slice` set as waiting for the index by owner. */
  waits(slice: number, seq: number | bigint): void {
    const n = Number(seq);
    if (n > this.#watermarks()[slice]!) {
      this.#listed[slice]!.push(n);
      return;
    }
    // SQLite gives a new row the largest seq plus one: after the newest rows were deleted, a seq at
    // or below the watermark, where readers no longer look for waiting rows.
    this.#db.statement(this.#sql.reused).run(n);
    this.#db.statement(this.#sql.unslice).run(n);
  }

  /** Indexes the slices whose turn came since the last write; inside the writer's transaction. */
  beforeWrite(now: number): void {
    const turn = Math.floor(now / TURN_MS);
    const last = this.#lastTurn;
    if (last === turn && this.#caughtUp) return;
    this.#lastTurn = turn;
    if (!this.#caughtUp || last === undefined || turn - last >= SLICES) {
      this.#indexAll();
      return;
    }
    for (let t = last + 1; t <= turn; t++) this.#indexSlice((t % SLICES) + 1);
  }

  /** Puts every waiting row into the index now (a reader that counts through the index, a writer that compares with every row). */
  runNow(): void {
    this.#db.atomically(() => this.#indexAll());
  }

  #watermarks(): number[] {
    if (!this.#marks) {
      const marks = new Array<number>(SLICES + 1).fill(0);
      for (const { slice, seq } of this.#db.statement(this.#sql.marks).all() as Array<{ slice: number; seq: number }>) marks[slice] = seq;
      this.#marks = marks;
    }
    return this.#marks;
  }

  /** Takes the lists of slices `from`…`to` (put back if the transaction rolls back). */
  #take(from: number, to: number): number[] {
    const taken: number[][] = [];
    for (let k = from; k <= to; k++) {
      taken[k] = this.#listed[k]!;
      this.#listed[k] = [];
    }
    this.#db.onRollback(() => {
      for (let k = from; k <= to; k++) this.#listed[k] = taken[k]!.concat(this.#listed[k]!);
    });
    return taken.slice(from).flat();
  }

  /** Sets the watermark of slices `from`…`to` to the table's largest seq: their rows up to it are indexed. */
  #mark(from: number, to: number): void {
    const top = this.#db.statement(this.#sql.top).pluck().get() as number;
    this.#db.statement(this.#sql.mark).run(top, from, to);
    const marks = this.#watermarks();
    for (let k = from; k <= to; k++) marks[k] = Math.max(marks[k]!, top);
  }

  /** Moves the rows listed in `slice` into the index by owner. */
  #indexSlice(slice: number): void {
    const seqs = this.#take(slice, slice);
    if (seqs.length > 0) this.#db.statement(this.#sql.listed).run({ seqs: JSON.stringify(seqs), slice });
    this.#mark(slice, slice);
  }

  /** Moves every waiting row into the index: the listed ones, or (first after opening) every row above the lowest watermark. */
  #indexAll(): void {
    const seqs = this.#take(1, SLICES);
    if (!this.#caughtUp) {
      this.#db.statement(this.#sql.above).run();
      this.#caughtUp = true;
      this.#db.onRollback(() => (this.#caughtUp = false));
    } else if (seqs.length > 0) {
      this.#db.statement(this.#sql.listed).run({ seqs: JSON.stringify(seqs), slice: null });
    }
    this.#mark(1, SLICES);
  }
}
