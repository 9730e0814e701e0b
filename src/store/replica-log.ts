import { randomBytes } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';

/**
 * Catalog tables every node of a central serves from its own SQLite file (docs/scale-out.md),
 * in the order a new node applies them.
 */
const REPLICATED: ReadonlyArray<{ table: string; key: readonly string[] }> = [
  { table: 'gateways', key: ['id'] },
  { table: 'devices', key: ['id'] },
  { table: 'assets', key: ['id'] },
  { table: 'tokens', key: ['id'] },
  { table: 'lorawan_devices', key: ['device_id'] },
  { table: 'commanded_values', key: ['device_id'] },
  { table: 'managed_devices', key: ['gateway_id', 'device_id'] },
  { table: 'fleet_revision', key: ['id'] },
];

export type ReplicaRow = Record<string, unknown>;

/** One changed key with its current content (null: deleted). */
export interface ReplicaChange {
  tbl: string;
  /** The key's values as a JSON array. */
  pk: string;
  row: ReplicaRow | null;
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

/**
 * The SQLite side of a central node's replica (docs/scale-out.md, "How the nodes share"), on a
 * connection of its own to the node's database file:
 * - triggers on the catalog tables log each changed key in `replica_changes` inside the change's
 *   own transaction, whichever connection (the daemon, the CLI) made it;
 * - rows other nodes changed are applied here with the triggers held off (`applying`), and since
 *   they arrive through another connection than the daemon's, the daemon's catalog sees SQLite's
 *   data_version change and reloads as it does after a CLI command;
 * - the node's id and its cursors in the shared feeds live in `replica_state`, so a restarted node
 *   is the same node and goes on where it stopped.
 * The tables and triggers are created only on a node configured for PostgreSQL.
 */
export class ReplicaLog {
  readonly #db: BetterSqlite3.Database;
  readonly #columns = new Map<string, string[]>();
  readonly node: string;

  constructor(path: string) {
    this.#db = new BetterSqlite3(path);
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('busy_timeout = 5000');
    this.#db.pragma('foreign_keys = ON');
    this.node = this.#install();
  }

  #install(): string {
    const db = this.#db;
    db.transaction(() => {
      db.exec(`
        CREATE TABLE IF NOT EXISTS replica_changes (id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, pk TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS replica_state (
          id INTEGER PRIMARY KEY CHECK (id = 1), node TEXT NOT NULL, applying INTEGER NOT NULL,
          catalog_cursor INTEGER NOT NULL, states_cursor INTEGER NOT NULL);
      `);
      db.prepare('INSERT OR IGNORE INTO replica_state VALUES (1, ?, 0, 0, 0)').run(randomBytes(6).toString('hex'));
      for (const { table, key } of REPLICATED) {
        const columns = (db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name);
        this.#columns.set(table, columns);
        for (const [op, ref] of [['INSERT', 'NEW'], ['UPDATE', 'NEW'], ['DELETE', 'OLD']] as const) {
          db.exec(`CREATE TRIGGER IF NOT EXISTS replica_${table}_${op.toLowerCase()} AFTER ${op} ON ${table}
            WHEN (SELECT applying FROM replica_state) = 0
            BEGIN INSERT INTO replica_changes (tbl, pk) VALUES ('${table}', json_array(${key.map((k) => `${ref}.${k}`).join(', ')})); END`);
        }
      }
    })();
    return db.prepare('SELECT node FROM replica_state').pluck().get() as string;
  }

  cursor(name: 'catalog_cursor' | 'states_cursor'): number {
    return this.#db.prepare(`SELECT ${name} FROM replica_state`).pluck().get() as number;
  }

  setCursor(name: 'catalog_cursor' | 'states_cursor', value: number): void {
    this.#db.prepare(`UPDATE replica_state SET ${name} = ?`).run(value);
  }

  /** Every row of the catalog logged for pushing (`outpost migrate --copy`). */
  logEverything(): number {
    let count = 0;
    this.#db.transaction(() => {
      for (const { table, key } of REPLICATED) {
        count += this.#db.prepare(`INSERT INTO replica_changes (tbl, pk) SELECT '${table}', json_array(${key.join(', ')}) FROM ${table}`).run().changes;
      }
    })();
    return count;
  }

  /**
   * The oldest logged changes with each key's current content, once per key (a key changed twice is
   * sent as it is now); `upTo` is what `dropChanges` takes once they were sent.
   */
  pendingChanges(limit: number): { changes: ReplicaChange[]; upTo: number; logged: number } {
    const logged = this.#db.prepare('SELECT id, tbl, pk FROM replica_changes ORDER BY id LIMIT ?').all(limit) as Array<{ id: number; tbl: string; pk: string }>;
    const latest = new Map<string, ReplicaChange>();
    for (const c of logged) {
      const key = REPLICATED.find((r) => r.table === c.tbl)!.key;
      const row = this.#db.prepare(`SELECT * FROM ${c.tbl} WHERE ${key.map((k) => `${k} = ?`).join(' AND ')}`).get(...(JSON.parse(c.pk) as unknown[])) as ReplicaRow | undefined;
      latest.delete(`${c.tbl}\u0000${c.pk}`);
      latest.set(`${c.tbl}\u0000${c.pk}`, { tbl: c.tbl, pk: c.pk, row: row ? encodeRow(row) : null });
    }
    return { changes: [...latest.values()], upTo: logged.length > 0 ? logged[logged.length - 1]!.id : 0, logged: logged.length };
  }

  dropChanges(upTo: number): void {
    this.#db.prepare('DELETE FROM replica_changes WHERE id <= ?').run(upTo);
  }

  /**
   * Other nodes' rows, in one transaction with the triggers held off and foreign keys checked at
   * commit (a batch may bring an asset before its device); the cursor moves in the same commit.
   */
  apply(rows: ReadonlyArray<ReplicaChange>, cursor: number): void {
    const db = this.#db;
    db.transaction(() => {
      db.prepare('UPDATE replica_state SET applying = 1').run();
      db.pragma('defer_foreign_keys = ON');
      for (const { tbl, pk, row } of rows) {
        const spec = REPLICATED.find((r) => r.table === tbl);
        if (!spec) continue;
        const where = spec.key.map((k) => `${k} = ?`).join(' AND ');
        if (row === null) {
          db.prepare(`DELETE FROM ${tbl} WHERE ${where}`).run(...(JSON.parse(pk) as unknown[]));
          continue;
        }
        // Columns both sides know: a node one schema step behind ignores a newer column.
        const columns = this.#columns.get(tbl)!.filter((c) => c in row);
        const update = columns.filter((c) => !spec.key.includes(c));
        db.prepare(
          `INSERT INTO ${tbl} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})
           ON CONFLICT (${spec.key.join(', ')}) DO ${update.length ? `UPDATE SET ${update.map((c) => `${c} = excluded.${c}`).join(', ')}` : 'NOTHING'}`,
        ).run(...columns.map((c) => decodeValue(row[c])));
      }
      db.prepare('UPDATE replica_state SET applying = 0, catalog_cursor = ?').run(cursor);
    })();
  }

  assetExists(id: string): boolean {
    return this.#db.prepare('SELECT 1 FROM assets WHERE id = ?').pluck().get(id) !== undefined;
  }

  close(): void {
    this.#db.close();
  }
}
