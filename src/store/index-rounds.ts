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
 * filter names those order columns (see `onIndex`). The rows waiting for that index are listed in
 * `<table>_waiting` (slice, seq). Writers list each row they insert (`IndexRounds.waits`,
 * `indexRowNow`); triggers (src/store/migrations.ts, schema 14) follow deletions.
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
 * The SQL of one owner's rows through both parts of a table filled in rounds: those in its index by
 * owner (read in its order, each row joined by seq) and those still waiting for it (listed under the
 * owner's slice: at most one round of rows). Each part is ordered by `orderBy` (columns of the index
 * by owner) and limited to `@limit` on its own, so neither reads more.
 */
export function ownerRows(table: RoundsTable, columns: string, filter: OwnerFilter, orderBy: string): string {
  const { owner, byOwner } = ROUNDS_TABLES[table];
  const fromRows = columns
    .split(',')
    .map((c) => `t.${c.trim()} AS ${c.trim()}`)
    .join(', ');
  return `SELECT ${columns} FROM (SELECT ${fromRows} FROM ${byOwner} o JOIN ${table} t ON t.seq = o.seq WHERE o.${owner} = @owner${and(filter.ordered && onIndex(table, filter.ordered), filter.row)} ORDER BY ${onIndex(table, orderBy)} LIMIT @limit)
    UNION ALL
    SELECT ${columns} FROM (SELECT ${columns} FROM ${table} WHERE seq IN (SELECT seq FROM ${table}_waiting WHERE slice = @slice) AND ${owner} = @owner${and(filter.ordered, filter.row)} ORDER BY ${orderBy} LIMIT @limit)
    ORDER BY ${orderBy} LIMIT @limit`;
}

/** The SQL counting one owner's rows that match `filter` in both parts of the table. */
export function ownerCount(table: RoundsTable, filter: OwnerFilter = {}): string {
  const { owner, byOwner } = ROUNDS_TABLES[table];
  const indexed = filter.row
    ? `SELECT count(*) FROM ${byOwner} o JOIN ${table} t ON t.seq = o.seq WHERE o.${owner} = @owner${and(filter.ordered && onIndex(table, filter.ordered), filter.row)}`
    : `SELECT count(*) FROM ${byOwner} o WHERE o.${owner} = @owner${and(filter.ordered && onIndex(table, filter.ordered))}`;
  return `SELECT (${indexed})
    + (SELECT count(*) FROM ${table} WHERE seq IN (SELECT seq FROM ${table}_waiting WHERE slice = @slice) AND ${owner} = @owner${and(filter.ordered, filter.row)})`;
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

/**
 * An index filled in rounds (docs/architecture.md, "History index"): a row is written with `slice`
 * set to its owner's slice, which lists it in `<table>_waiting` (slice, seq), where each slice only
 * grows at its end, instead of in the index by owner. Every turn a write moves the rows of the next
 * slice into the index, so each index page the turn changes is written to the log once per ~500 ms
 * instead of once per commit; the rows themselves are never touched again. The table's writer
 * calls `beforeWrite` inside its transaction, so the turn commits with its rows.
 */
export class IndexRounds {
  readonly #db: Database;
  readonly #table: RoundsTable;
  /** The last turn whose slice was indexed; undefined after opening: the first write indexes whatever an earlier run left. */
  #lastTurn: number | undefined;

  /** Made once: the statement cache is keyed by the text, and this runs for every row written. */
  readonly #waitsSql: string;

  constructor(db: Database, table: RoundsTable) {
    this.#db = db;
    this.#table = table;
    this.#waitsSql = `INSERT INTO ${table}_waiting (slice, seq) VALUES (?, ?)`;
  }

  /** Lists a row just inserted with `slice` set as waiting for the index by owner. */
  waits(slice: number, seq: number | bigint): void {
    this.#db.statement(this.#waitsSql).run(slice, seq);
  }

  /** Indexes the slices whose turn came since the last write; inside the writer's transaction. */
  beforeWrite(now: number): void {
    const turn = Math.floor(now / TURN_MS);
    const last = this.#lastTurn;
    if (last === turn) return;
    this.#lastTurn = turn;
    if (last === undefined || turn - last >= SLICES) {
      this.#index();
      return;
    }
    for (let t = last + 1; t <= turn; t++) this.#index((t % SLICES) + 1);
  }

  /** Puts every waiting row into the index now (a reader that counts through the index, a writer that compares with every row). */
  runNow(): void {
    this.#db.atomically(() => this.#index());
  }

  /** Moves the rows waiting in `slice` (in every slice: undefined) into the index by owner. */
  #index(slice?: number): void {
    const table = this.#table;
    const { key, byOwner } = ROUNDS_TABLES[table];
    const fromRow = key.split(', ').map((c) => `t.${c}`).join(', ');
    const [inSlice, only] = slice === undefined ? ['', ''] : [' WHERE w.slice = ?', ' WHERE slice = ?'];
    const parameters = slice === undefined ? [] : [slice];
    // OR IGNORE: a statement of many rows that could fail halfway on a constraint makes SQLite copy
    // every page it changes to a statement journal first; no row can be there twice (seq is unique).
    this.#db.statement(`INSERT OR IGNORE INTO ${byOwner} (${key}) SELECT ${fromRow} FROM ${table}_waiting w JOIN ${table} t ON t.seq = w.seq${inSlice}`).run(...parameters);
    this.#db.statement(`DELETE FROM ${table}_waiting${only}`).run(...parameters);
  }
}
