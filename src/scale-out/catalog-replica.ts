import { randomBytes } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';
import type { Logger } from '../ops/logger.js';
import type { StateStore, StoredState } from '../store/states.js';
import type { CentralDatabase } from './postgres.js';

/**
 * Catalog tables every node of a central serves from its own SQLite file (docs/scale-out.md),
 * in the order a new node applies them. The node's HTTP API, MQTT authentication and fleet code
 * read and write them as on one machine; this module carries each committed change through
 * PostgreSQL to the other nodes.
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

/** NOTIFY channel: a node pushed catalog rows (payload: its node id). */
export const CATALOG_CHANNEL = 'outpost_catalog';
/** pg_advisory_xact_lock key serialising catalog pushes, so `seq` commits in the order it is handed out. */
const PUSH_LOCK = 0x6f757471;
/** Other nodes' states are read again for this long: a lower id may commit after a higher one. */
const STATES_OVERLAP_MS = 2000;

type Row = Record<string, unknown>;

/** BLOB columns (LoRaWAN keys) travel as {"$base64": …} in the JSON row. */
function encodeRow(row: Row): Row {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) out[k] = Buffer.isBuffer(v) ? { $base64: v.toString('base64') } : v;
  return out;
}

function decodeValue(v: unknown): unknown {
  if (v && typeof v === 'object' && '$base64' in v) return Buffer.from(String((v as { $base64: string }).$base64), 'base64');
  if (typeof v === 'boolean') return v ? 1 : 0;
  return v;
}

export interface ReplicaFigures {
  pushed: number;
  pulled: number;
  statesPulled: number;
  pendingPush: number;
  lastPullAt: number | null;
}

/**
 * One node's replica of the central's catalog (docs/scale-out.md, "How the nodes share"):
 * - push: triggers on the catalog tables log each changed key in `replica_changes` inside the
 *   change's own SQLite transaction (so a node killed right after an HTTP 201 still pushes it at
 *   its next start); a loop copies the rows' current content to PostgreSQL `catalog_rows` with a
 *   sequence number and NOTIFYs the other nodes;
 * - pull: on that notification (and every second) a node applies the rows other nodes pushed
 *   since its cursor, through its own connection to its SQLite file, so the daemon's catalog sees
 *   a commit from another connection (SQLite's data_version) and reloads as it does for the CLI:
 *   new devices and tokens work, revoked tokens' sessions close, managed devices are re-sent;
 * - states other nodes stored in PostgreSQL are copied into this node's history and latest
 *   states, so every node's HTTP API answers the same.
 * The node's own states reach its SQLite through the writer after PostgreSQL committed them.
 */
export class CatalogReplica {
  readonly #sqlite: BetterSqlite3.Database;
  readonly #pg: CentralDatabase;
  readonly #states: StateStore;
  readonly #logger: Logger;
  readonly node: string;
  readonly #columns = new Map<string, string[]>();
  #timers: NodeJS.Timeout[] = [];
  #listener: import('pg').Client | undefined;
  #pushing: Promise<void> | undefined;
  #pulling: Promise<void> | undefined;
  #pullAgain = false;
  #stopped = false;
  /** [when, highest state id seen then]: the cursor persisted is the one older than the overlap. */
  #stateMarks: Array<[number, number]> = [];
  #statesSeen = 0;
  readonly figures: ReplicaFigures = { pushed: 0, pulled: 0, statesPulled: 0, pendingPush: 0, lastPullAt: null };

  constructor(deps: { path: string; pg: CentralDatabase; states: StateStore; logger: Logger }) {
    this.#pg = deps.pg;
    this.#states = deps.states;
    this.#logger = deps.logger;
    this.#sqlite = new BetterSqlite3(deps.path);
    this.#sqlite.pragma('journal_mode = WAL');
    this.#sqlite.pragma('busy_timeout = 5000');
    this.#sqlite.pragma('foreign_keys = ON');
    this.node = this.#install();
    this.#statesSeen = this.#cursor('states_cursor');
  }

  /** The change log, the triggers and this node's id (kept in the file: a restarted node is the same node). */
  #install(): string {
    const db = this.#sqlite;
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

  #cursor(name: 'catalog_cursor' | 'states_cursor'): number {
    return this.#sqlite.prepare(`SELECT ${name} FROM replica_state`).pluck().get() as number;
  }

  /** Every row of the catalog logged for pushing (`outpost migrate --copy`: an existing SQLite central). */
  logEverything(): number {
    let count = 0;
    this.#sqlite.transaction(() => {
      for (const { table, key } of REPLICATED) {
        count += this.#sqlite.prepare(`INSERT INTO replica_changes (tbl, pk) SELECT '${table}', json_array(${key.join(', ')}) FROM ${table}`).run().changes;
      }
    })();
    return count;
  }

  /** Catches up with the cluster before the node serves, then keeps following it. */
  async start(): Promise<void> {
    await this.push();
    await this.pull();
    const listener = new (await import('pg')).default.Client({ connectionString: this.#pg.url });
    listener.on('error', (err) => this.#logger.warn({ err: err.message }, 'postgres notification connection lost'));
    listener.on('notification', (n) => {
      if (n.channel === CATALOG_CHANNEL && n.payload !== this.node) this.#schedulePull();
    });
    try {
      await listener.connect();
      await listener.query(`LISTEN ${CATALOG_CHANNEL}`);
      this.#listener = listener;
    } catch (err) {
      // Polling still carries the changes (within a second); the listener is retried by the timer.
      this.#logger.warn({ err: (err as Error).message }, 'postgres LISTEN failed; catalog changes are polled');
      listener.end().catch(() => {});
    }
    this.#timers.push(setInterval(() => void this.push().catch(() => {}), 50).unref());
    this.#timers.push(setInterval(() => this.#schedulePull(), 1000).unref());
    this.#timers.push(setInterval(() => void this.#relisten(), 5000).unref());
  }

  async #relisten(): Promise<void> {
    if (this.#stopped) return;
    const current = this.#listener as unknown as { _ending?: boolean; _connected?: boolean } | undefined;
    if (current && current._connected && !current._ending) return;
    this.#listener = undefined;
    const listener = new (await import('pg')).default.Client({ connectionString: this.#pg.url });
    listener.on('error', () => {});
    listener.on('notification', (n) => {
      if (n.channel === CATALOG_CHANNEL && n.payload !== this.node) this.#schedulePull();
    });
    try {
      await listener.connect();
      await listener.query(`LISTEN ${CATALOG_CHANNEL}`);
      this.#listener = listener;
    } catch {
      listener.end().catch(() => {});
    }
  }

  #schedulePull(): void {
    if (this.#stopped) return;
    if (this.#pulling) {
      this.#pullAgain = true;
      return;
    }
    void this.pull().catch((err) => this.#logger.debug({ err: (err as Error).message }, 'catalog pull failed; retried'));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    await this.#pushing?.catch(() => {});
    await this.#pulling?.catch(() => {});
    await this.push().catch(() => {});
    await this.#listener?.end().catch(() => {});
    this.#sqlite.close();
  }

  /** Copies logged changes to PostgreSQL; one at a time. */
  push(): Promise<void> {
    if (this.#pushing) return this.#pushing;
    this.#pushing = this.#push().finally(() => (this.#pushing = undefined));
    return this.#pushing;
  }

  async #push(): Promise<void> {
    for (;;) {
      const changes = this.#sqlite.prepare('SELECT id, tbl, pk FROM replica_changes ORDER BY id LIMIT 500').all() as Array<{ id: number; tbl: string; pk: string }>;
      this.figures.pendingPush = changes.length;
      if (changes.length === 0) return;
      // The current content of each changed key, once: a key changed twice is sent as it is now.
      const latest = new Map<string, { tbl: string; pk: string; row: Row | null }>();
      for (const c of changes) {
        const key = REPLICATED.find((r) => r.table === c.tbl)!.key;
        const values = JSON.parse(c.pk) as unknown[];
        const row = this.#sqlite.prepare(`SELECT * FROM ${c.tbl} WHERE ${key.map((k) => `${k} = ?`).join(' AND ')}`).get(...values) as Row | undefined;
        latest.delete(`${c.tbl}\u0000${c.pk}`);
        latest.set(`${c.tbl}\u0000${c.pk}`, { tbl: c.tbl, pk: c.pk, row: row ? encodeRow(row) : null });
      }
      const items = [...latest.values()];
      await this.#pg.transaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [PUSH_LOCK]);
        await client.query(
          `INSERT INTO catalog_rows (tbl, pk, row, seq, node)
           SELECT t, p, r, nextval('catalog_seq'), $4 FROM unnest($1::text[], $2::text[], $3::jsonb[]) WITH ORDINALITY AS u(t, p, r, n) ORDER BY n
           ON CONFLICT (tbl, pk) DO UPDATE SET row = excluded.row, seq = excluded.seq, node = excluded.node`,
          [items.map((i) => i.tbl), items.map((i) => i.pk), items.map((i) => (i.row === null ? null : JSON.stringify(i.row))), this.node],
        );
        await client.query('SELECT pg_notify($1, $2)', [CATALOG_CHANNEL, this.node]);
      });
      this.#sqlite.prepare('DELETE FROM replica_changes WHERE id <= ?').run(changes[changes.length - 1]!.id);
      this.figures.pushed += items.length;
    }
  }

  /** Applies what other nodes pushed since this node's cursor, then their new states. */
  pull(): Promise<void> {
    if (this.#pulling) return this.#pulling;
    this.#pulling = (async () => {
      do {
        this.#pullAgain = false;
        await this.#pullCatalog();
        await this.#pullStates();
        this.figures.lastPullAt = Date.now();
      } while (this.#pullAgain && !this.#stopped);
    })().finally(() => (this.#pulling = undefined));
    return this.#pulling;
  }

  async #pullCatalog(): Promise<void> {
    for (;;) {
      const cursor = this.#cursor('catalog_cursor');
      const r = await this.#pg.query<{ tbl: string; pk: string; row: Row | null; seq: string }>(
        'SELECT tbl, pk, row, seq FROM catalog_rows WHERE seq > $1 AND node <> $2 ORDER BY seq LIMIT 1000',
        [cursor, this.node],
      );
      if (r.rows.length === 0) return;
      const last = Number(r.rows[r.rows.length - 1]!.seq);
      try {
        this.#apply(r.rows, last);
      } catch (err) {
        // One row that cannot be applied (its parent was deleted meanwhile) must not stop the node
        // following the cluster: row by row, skipping what fails.
        this.#logger.warn({ err: (err as Error).message }, 'catalog rows applied one by one');
        for (const row of r.rows) {
          try {
            this.#apply([row], Number(row.seq));
          } catch (rowErr) {
            this.#logger.warn({ table: row.tbl, key: row.pk, err: (rowErr as Error).message }, 'catalog row from another node not applied');
            this.#sqlite.prepare('UPDATE replica_state SET catalog_cursor = ?').run(Number(row.seq));
          }
        }
      }
      this.figures.pulled += r.rows.length;
      if (r.rows.length < 1000) return;
    }
  }

  #apply(rows: ReadonlyArray<{ tbl: string; pk: string; row: Row | null }>, cursor: number): void {
    const db = this.#sqlite;
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

  /**
   * Other nodes' states since the cursor, into this node's history (duplicates skipped by their
   * (asset, at, value)); states of assets this node does not hold yet are picked up again while
   * they are within the overlap window.
   */
  async #pullStates(): Promise<void> {
    const now = Date.now();
    const settled = this.#stateMarks.filter(([t]) => now - t >= STATES_OVERLAP_MS).pop()?.[1];
    if (settled !== undefined) {
      this.#stateMarks = this.#stateMarks.filter(([t]) => now - t < STATES_OVERLAP_MS);
      this.#sqlite.prepare('UPDATE replica_state SET states_cursor = ?').run(settled);
    }
    const from = this.#cursor('states_cursor');
    let highest = this.#statesSeen;
    for (let after = from; ; ) {
      const r = await this.#pg.query<{ id: string; asset_id: string; at: string; value: string; received_at: string; codec: string | null }>(
        'SELECT id, asset_id, at, value, received_at, codec FROM states WHERE id > $1 AND node <> $2 ORDER BY id LIMIT 5000',
        [after, this.node],
      );
      if (r.rows.length === 0) break;
      const known = this.#sqlite.prepare('SELECT 1 FROM assets WHERE id = ?').pluck();
      const states: StoredState[] = [];
      for (const row of r.rows) {
        if (known.get(row.asset_id) === undefined) continue;
        states.push({ assetId: row.asset_id, at: Number(row.at), valueJson: row.value, receivedAt: Number(row.received_at), codec: row.codec ?? undefined, dedupe: true });
      }
      // Through the daemon's own connection: history, not a catalog change (no reload on every batch).
      if (states.length > 0) this.#states.write(states);
      this.figures.statesPulled += states.filter((s) => !s.duplicate).length;
      after = Number(r.rows[r.rows.length - 1]!.id);
      highest = Math.max(highest, after);
      if (r.rows.length < 5000) break;
    }
    this.#statesSeen = highest;
    this.#stateMarks.push([now, highest]);
  }
}
