import pg from 'pg';
import type { Logger } from '../ops/logger.js';
import { ReplicaLog, type ReplicaChange } from '../store/replica-log.js';
import type { CentralDatabase } from './postgres.js';

/** NOTIFY channel: a node pushed catalog rows (payload: its node id). */
export const CATALOG_CHANNEL = 'outpost_catalog';
/** pg_advisory_xact_lock key serialising catalog pushes, so `seq` commits in the order it is handed out. */
const PUSH_LOCK = 0x6f757471;

export interface ReplicaFigures {
  pushed: number;
  pulled: number;
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
 *   new devices and tokens work, revoked tokens' sessions close, managed devices are re-sent.
 * States are not copied: every node reads history and latest states from PostgreSQL itself.
 */
export class CatalogReplica {
  readonly #log: ReplicaLog;
  readonly #pg: CentralDatabase;
  readonly #logger: Logger;
  readonly node: string;
  #timers: NodeJS.Timeout[] = [];
  #listener: pg.Client | undefined;
  #pushing: Promise<void> | undefined;
  #pulling: Promise<void> | undefined;
  #pullAgain = false;
  #stopped = false;
  readonly figures: ReplicaFigures = { pushed: 0, pulled: 0, pendingPush: 0, lastPullAt: null };

  constructor(deps: { path: string; pg: CentralDatabase; logger: Logger }) {
    this.#pg = deps.pg;
    this.#logger = deps.logger;
    this.#log = new ReplicaLog(deps.path);
    this.node = this.#log.node;
  }

  /** Every row of the catalog logged for pushing (`outpost migrate --copy`: an existing SQLite central). */
  logEverything(): number {
    return this.#log.logEverything();
  }

  /** Catches up with the cluster before the node serves, then keeps following it. */
  async start(): Promise<void> {
    await this.push();
    await this.pull();
    await this.#listen();
    this.#timers.push(setInterval(() => void this.push().catch(() => {}), 50).unref());
    this.#timers.push(setInterval(() => this.#schedulePull(), 1000).unref());
    // A listener lost with its connection (PostgreSQL restarted) comes back; meanwhile the
    // one-second poll carries the changes.
    this.#timers.push(setInterval(() => void (this.#listener ? undefined : this.#listen()), 5000).unref());
  }

  /** LISTEN on a connection of its own: other nodes' pushes are pulled at once. */
  async #listen(): Promise<void> {
    if (this.#stopped) return;
    const listener = new pg.Client({ connectionString: this.#pg.url });
    const lost = (err?: Error) => {
      if (this.#listener !== listener) return;
      this.#listener = undefined;
      if (err) this.#logger.warn({ err: err.message }, 'postgres notification connection lost; catalog changes are polled until it is back');
    };
    listener.on('error', lost);
    listener.on('end', () => lost());
    listener.on('notification', (n) => {
      if (n.channel === CATALOG_CHANNEL && n.payload !== this.node) this.#schedulePull();
    });
    try {
      await listener.connect();
      await listener.query(`LISTEN ${CATALOG_CHANNEL}`);
      this.#listener = listener;
    } catch (err) {
      this.#logger.debug({ err: (err as Error).message }, 'postgres LISTEN failed; retried');
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
    this.#log.close();
  }

  /**
   * Settles once every change committed before the call is in PostgreSQL: the push under way may
   * have read the log before it, so a second one follows. Tried again every second while
   * PostgreSQL is away (the caller's PUBACK waits); rejects only when the node stops.
   */
  async pushedThrough(): Promise<void> {
    for (;;) {
      try {
        await this.push();
        await this.push();
        return;
      } catch (err) {
        if (this.#stopped) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1000).unref());
      }
    }
  }

  /** Copies logged changes to PostgreSQL; one at a time. */
  push(): Promise<void> {
    if (this.#pushing) return this.#pushing;
    this.#pushing = this.#push().finally(() => (this.#pushing = undefined));
    return this.#pushing;
  }

  async #push(): Promise<void> {
    for (;;) {
      const { changes: items, upTo, logged } = this.#log.pendingChanges(500);
      this.figures.pendingPush = logged;
      if (logged === 0) return;
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
      this.#log.dropChanges(upTo);
      this.figures.pushed += items.length;
    }
  }

  /** Applies what other nodes pushed since this node's cursor. */
  pull(): Promise<void> {
    if (this.#pulling) return this.#pulling;
    this.#pulling = (async () => {
      do {
        this.#pullAgain = false;
        await this.#pullCatalog();
        this.figures.lastPullAt = Date.now();
      } while (this.#pullAgain && !this.#stopped);
    })().finally(() => (this.#pulling = undefined));
    return this.#pulling;
  }

  async #pullCatalog(): Promise<void> {
    for (;;) {
      const cursor = this.#log.cursor('catalog_cursor');
      const r = await this.#pg.query<ReplicaChange & { seq: string }>('SELECT tbl, pk, row, seq FROM catalog_rows WHERE seq > $1 AND node <> $2 ORDER BY seq LIMIT 1000', [cursor, this.node]);
      if (r.rows.length === 0) return;
      const last = Number(r.rows[r.rows.length - 1]!.seq);
      try {
        this.#log.apply(r.rows, last);
      } catch (err) {
        // One row that cannot be applied (its parent was deleted meanwhile) must not stop the node
        // following the cluster: row by row, skipping what fails.
        this.#logger.warn({ err: (err as Error).message }, 'catalog rows applied one by one');
        for (const row of r.rows) {
          try {
            this.#log.apply([row], Number(row.seq));
          } catch (rowErr) {
            this.#logger.warn({ table: row.tbl, key: row.pk, err: (rowErr as Error).message }, 'catalog row from another node not applied');
            this.#log.setCursor('catalog_cursor', Number(row.seq));
          }
        }
      }
      this.figures.pulled += r.rows.length;
      if (r.rows.length < 1000) return;
    }
  }
}
