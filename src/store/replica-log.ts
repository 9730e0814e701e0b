import { randomBytes } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from './database.js';

/**
 * The catalog tables a central node on PostgreSQL keeps as a cache of PostgreSQL's `catalog_rows`
 * (docs/scale-out.md, "How the nodes share"), with their keys. `commanded_values` is not among
 * them: it is the node's own radio state, like a LoRaWAN session's counters.
 */
const CATALOG_TABLES: ReadonlyArray<{ table: string; key: readonly string[] }> = [
  { table: 'gateways', key: ['id'] },
  { table: 'devices', key: ['id'] },
  { table: 'assets', key: ['id'] },
  { table: 'tokens', key: ['id'] },
  { table: 'lorawan_devices', key: ['device_id'] },
  { table: 'managed_devices', key: ['gateway_id', 'device_id'] },
  { table: 'fleet_revision', key: ['id'] },
];

const specOf = (table: string) => CATALOG_TABLES.find((t) => t.table === table);

export type ReplicaRow = Record<string, unknown>;

/** One changed key with its content (null: deleted). */
export interface ReplicaChange {
  tbl: string;
  /** The key's values as a JSON array. */
  pk: string;
  row: ReplicaRow | null;
}

/** A row as PostgreSQL holds it: the change and the sequence number it was committed at. */
export interface CatalogRow extends ReplicaChange {
  seq: number | string;
}

/** BLOB columns (LoRaWAN keys) travel as {"$base64": …} in the JSON row. */
function encodeRow(row: ReplicaRow): ReplicaRow {
  const out: ReplicaRow = {};
  for (const [k, v] of Object.entries(row)) out[k] = Buffer.isBuffer(v) ? { $base64: v.toString('base64') } : v;
  return out;
}

function decodeValue(v: unknown): unknown {
  if (v && typeof v === 'object' && '$base64' in v) return Buffer.from(String((v as { $base64: string }).$base64), 'base64');
  if (typeof v === 'boolean') return v ? 1 : 0;
  return v;
}

/** Thrown to roll a dry run back; never leaves `CatalogCapture.dryRun`. */
const ROLL_BACK = Symbol('roll back the dry run');

/**
 * A catalog write tried on the daemon's own connection and rolled back (docs/scale-out.md, "How
 * the nodes share"): the rules of the registry (ids taken, names taken, limits) run against the
 * node's cache as on one machine, and what they would change is read out as rows for PostgreSQL.
 * Temporary triggers (this connection only, created once) note every changed key while the
 * capture flag is on; the flag, the notes and the change itself all go with the rollback, so the
 * cache is changed only later, from what PostgreSQL committed. Cascades (a device's assets and
 * tokens going with it) fire the triggers too, so they are rows of their own.
 */
export class CatalogCapture {
  readonly #db: Database;
  #installed = false;

  constructor(db: Database) {
    this.#db = db;
  }

  #install(): void {
    if (this.#installed) return;
    const run = (sql: string) => this.#db.statement(sql).run();
    run('CREATE TEMP TABLE IF NOT EXISTS catalog_capture (id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, pk TEXT NOT NULL)');
    run('CREATE TEMP TABLE IF NOT EXISTS catalog_capture_on (id INTEGER PRIMARY KEY CHECK (id = 1), capturing INTEGER NOT NULL)');
    run('INSERT OR IGNORE INTO temp.catalog_capture_on VALUES (1, 0)');
    for (const { table, key } of CATALOG_TABLES) {
      for (const [op, ref] of [['INSERT', 'NEW'], ['UPDATE', 'NEW'], ['DELETE', 'OLD']] as const) {
        run(`CREATE TEMP TRIGGER IF NOT EXISTS capture_${table}_${op.toLowerCase()} AFTER ${op} ON main.${table}
          WHEN (SELECT capturing FROM temp.catalog_capture_on) = 1
          BEGIN INSERT INTO temp.catalog_capture (tbl, pk) VALUES ('${table}', json_array(${key.map((k) => `${ref}.${k}`).join(', ')})); END`);
      }
    }
    this.#installed = true;
  }

  /**
   * Runs `work` in a transaction, reads the rows it changed (each key once, as it is after the
   * work), and rolls everything back. A throw from `work` is rethrown (nothing was changed).
   */
  dryRun<T>(work: () => T): { result: T; changes: ReplicaChange[] } {
    this.#install();
    let out: { result: T; changes: ReplicaChange[] } | undefined;
    try {
      this.#db.transaction(() => {
        this.#db.statement('UPDATE temp.catalog_capture_on SET capturing = 1').run();
        const result = work();
        const noted = this.#db.statement('SELECT tbl, pk FROM temp.catalog_capture ORDER BY id').all() as Array<{ tbl: string; pk: string }>;
        const latest = new Map<string, ReplicaChange>();
        for (const { tbl, pk } of noted) {
          const { key } = specOf(tbl)!;
          const row = this.#db.statement(`SELECT * FROM ${tbl} WHERE ${key.map((k) => `${k} = ?`).join(' AND ')}`).get(...(JSON.parse(pk) as unknown[])) as ReplicaRow | undefined;
          latest.set(`${tbl}\u0000${pk}`, { tbl, pk, row: row ? encodeRow(row) : null });
        }
        out = { result, changes: [...latest.values()] };
        throw ROLL_BACK;
      });
    } catch (err) {
      if (err !== ROLL_BACK) throw err;
    }
    return out!;
  }
}

/**
 * Whether this database file is the catalog cache of a central node on PostgreSQL (a node
 * started there with central.postgres): its catalog is changed through PostgreSQL only.
 */
export function isCatalogCache(path: string): boolean {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  try {
    return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'replica_state'").get() !== undefined;
  } finally {
    db.close();
  }
}

/**
 * The node's cache of the catalog, written from PostgreSQL on a connection of its own
 * (docs/scale-out.md): rows are applied in one transaction together with the cursor (the highest
 * sequence number applied), and a row at or below the cursor is skipped, so the daemon, its
 * catching up before a write and the CLI may all apply the same rows in any order. Because the
 * rows arrive through another connection than the daemon's, the daemon's catalog sees SQLite's
 * data_version change and reloads as it does after a CLI command. Foreign keys are off on this
 * connection: PostgreSQL holds every row a cascade removed as a row of its own, and a page of
 * rows may bring an asset before its device.
 */
export class ReplicaLog {
  readonly #db: BetterSqlite3.Database;
  readonly #columns = new Map<string, string[]>();
  readonly node: string;

  constructor(path: string) {
    this.#db = new BetterSqlite3(path);
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('busy_timeout = 5000');
    this.#db.pragma('foreign_keys = OFF');
    this.node = this.#install();
  }

  #install(): string {
    const db = this.#db;
    db.transaction(() => {
      // `applying` and `states_cursor` are no longer used (kept: older files have them).
      db.exec(`
        CREATE TABLE IF NOT EXISTS replica_state (
          id INTEGER PRIMARY KEY CHECK (id = 1), node TEXT NOT NULL, applying INTEGER NOT NULL,
          catalog_cursor INTEGER NOT NULL, states_cursor INTEGER NOT NULL);
      `);
      db.prepare('INSERT OR IGNORE INTO replica_state VALUES (1, ?, 0, 0, 0)').run(randomBytes(6).toString('hex'));
    })();
    for (const { table } of CATALOG_TABLES) {
      this.#columns.set(table, (db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name));
    }
    return db.prepare('SELECT node FROM replica_state').pluck().get() as string;
  }

  /** The highest sequence number of PostgreSQL's catalog this cache holds. */
  cursor(): number {
    return this.#db.prepare('SELECT catalog_cursor FROM replica_state').pluck().get() as number;
  }

  /** Every row of the catalog tables (`outpost migrate --copy` of a SQLite central). */
  everyRow(): ReplicaChange[] {
    const out: ReplicaChange[] = [];
    for (const { table, key } of CATALOG_TABLES) {
      for (const row of this.#db.prepare(`SELECT * FROM ${table}`).all() as ReplicaRow[]) {
        out.push({ tbl: table, pk: JSON.stringify(key.map((k) => row[k])), row: encodeRow(row) });
      }
    }
    return out;
  }

  /**
   * Rows PostgreSQL committed, in sequence order: those above the cursor are written (a null row
   * deletes), the cursor moves to the highest. Returns how many were written.
   */
  apply(rows: ReadonlyArray<CatalogRow>): number {
    const db = this.#db;
    return db.transaction(() => {
      const cursor = this.cursor();
      let highest = cursor;
      let applied = 0;
      for (const { tbl, pk, row, seq } of rows) {
        const n = Number(seq);
        if (n <= cursor) continue;
        highest = Math.max(highest, n);
        const spec = specOf(tbl);
        if (!spec) continue;
        try {
          // A savepoint per row: one row the cache cannot take (a unique value another row still
          // holds here) is reported and skipped, not a reason to stop following PostgreSQL.
          db.transaction(() => this.#write(spec, tbl, pk, row))();
          applied++;
        } catch (err) {
          this.skipped.push({ tbl, pk, error: (err as Error).message });
        }
      }
      if (highest > cursor) db.prepare('UPDATE replica_state SET catalog_cursor = ?').run(highest);
      return applied;
    }).immediate();
  }

  /** Rows `apply` could not write (for the log); emptied by whoever reports them. */
  readonly skipped: Array<{ tbl: string; pk: string; error: string }> = [];

  #write(spec: { key: readonly string[] }, tbl: string, pk: string, row: ReplicaRow | null): void {
    const where = spec.key.map((k) => `${k} = ?`).join(' AND ');
    if (row === null) {
      this.#db.prepare(`DELETE FROM ${tbl} WHERE ${where}`).run(...(JSON.parse(pk) as unknown[]));
      return;
    }
    // Columns both sides know: a node one schema step behind ignores a newer column.
    const columns = this.#columns.get(tbl)!.filter((c) => c in row);
    const update = columns.filter((c) => !spec.key.includes(c));
    this.#db
      .prepare(
        `INSERT INTO ${tbl} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})
         ON CONFLICT (${spec.key.join(', ')}) DO ${update.length ? `UPDATE SET ${update.map((c) => `${c} = excluded.${c}`).join(', ')}` : 'NOTHING'}`,
      )
      .run(...columns.map((c) => decodeValue(row[c])));
  }

  close(): void {
    this.#db.close();
  }
}
