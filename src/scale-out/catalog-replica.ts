import pg from 'pg';
import { ServiceError } from '../core/errors.js';
import type { Logger } from '../ops/logger.js';
import type { CatalogWrites } from '../registry/catalog-writes.js';
import type { Catalog } from '../store/catalog.js';
import { ReplicaLog, type CatalogRow, type ReplicaChange } from '../store/replica-log.js';
import type { Store } from '../store/store.js';
import type { CentralDatabase } from './postgres.js';
import { ChannelListener } from './channel-listener.js';

/** NOTIFY channel: a node committed catalog rows (payload: its node id). */
export const CATALOG_CHANNEL = 'outpost_catalog';
/**
 * pg_advisory_xact_lock key taken by every catalog write of the cluster: the writes are decided
 * one at a time against the whole catalog, and `seq` commits in the order it is handed out (so a
 * reader that sees a sequence number sees every lower one).
 */
const CATALOG_LOCK = 0x6f757471;
/** How long a write waits for the catalog lock, and how long a stalled holder keeps it. */
const LOCK_WAIT = '10s';
const LOCK_IDLE = '10s';
/** SQLSTATE of a lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';
/** Rows read per query while catching up. */
const PAGE = 5000;

export interface ReplicaFigures {
  /** Rows this node committed to PostgreSQL. */
  written: number;
  /** Rows this node applied to its cache (its own and other nodes'). */
  pulled: number;
  /** Catalog writes refused while PostgreSQL did not answer. */
  refused: number;
  lastPullAt: number | null;
}

/**
 * PostgreSQL is the record of the central's catalog, each node's SQLite a cache of it
 * (docs/scale-out.md, "How the nodes share"):
 * - a write (`run`) takes the cluster's catalog lock in a PostgreSQL transaction, brings the cache
 *   up to PostgreSQL, tries the change on the cache and rolls it back (the registry's rules decide
 *   against the whole cluster's catalog: an id or a name taken on another node is taken here),
 *   writes the rows it changed to `catalog_rows`, commits, NOTIFYs, and only then applies those
 *   rows to the cache. PostgreSQL away: the write is refused (503) and the cache is as it was;
 * - following (`start`): on a notification (and every second) the rows committed since the
 *   cache's cursor are applied, through a connection of its own, so the daemon's catalog sees a
 *   commit from another connection and reloads as it does for the CLI: new devices and tokens
 *   work, revoked tokens' sessions close, managed devices are re-sent;
 * - a node whose SQLite file is new (a wiped data directory) starts from cursor 0 and gets the
 *   whole catalog before it serves.
 */
export class CatalogReplica implements CatalogWrites {
  readonly #log: ReplicaLog;
  readonly #pg: CentralDatabase;
  readonly #logger: Logger;
  readonly #store: Pick<Store, 'dryRunCatalogWrite'>;
  readonly #catalog: Pick<Catalog, 'syncWithDisk'> | undefined;
  readonly node: string;
  #timers: NodeJS.Timeout[] = [];
  readonly #listener: ChannelListener;
  #pulling: Promise<void> | undefined;
  #pullAgain = false;
  #stopped = false;
  /** One write of this node at a time: the others wait here, not on a pooled connection. */
  #writing: Promise<unknown> = Promise.resolve();
  readonly figures: ReplicaFigures = { written: 0, pulled: 0, refused: 0, lastPullAt: null };

  constructor(deps: { store: Pick<Store, 'path' | 'dryRunCatalogWrite'>; pg: CentralDatabase; logger: Logger; catalog?: Pick<Catalog, 'syncWithDisk'> }) {
    this.#pg = deps.pg;
    this.#logger = deps.logger;
    this.#store = deps.store;
    this.#catalog = deps.catalog;
    this.#log = new ReplicaLog(deps.store.path);
    this.node = this.#log.node;
    this.#listener = new ChannelListener({
      url: deps.pg.url,
      channel: CATALOG_CHANNEL,
      onNotify: (node) => node !== this.node && this.#schedulePull(),
      logger: deps.logger,
      what: 'catalog changes',
    });
  }

  /** Catches up with PostgreSQL before the node serves, then keeps following it. */
  async start(): Promise<void> {
    await this.pull();
    // Other nodes' writes are pulled at once; the one-second poll carries them while the listener is lost.
    await this.#listener.start();
    this.#timers.push(setInterval(() => this.#schedulePull(), 1000).unref());
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    await this.#pulling?.catch(() => {});
    await this.#writing.catch(() => {});
    await this.#listener.stop();
    this.#log.close();
  }

  /**
   * A catalog write, answered once PostgreSQL committed it (see the class). `work` is synchronous
   * and changes the node's SQLite as on one machine; a ServiceError it throws is the answer, and
   * nothing is written anywhere.
   */
  run<T>(work: () => T): Promise<T> {
    const next = this.#writing.then(() => this.#write(work));
    this.#writing = next.catch(() => {});
    return next;
  }

  async #write<T>(work: () => T): Promise<T> {
    let outcome: { result: T; committed: CatalogRow[] };
    try {
      outcome = await this.#pg.transaction(async (client) => {
        // Bounds on the cluster's one catalog lock: a write waits for it at most LOCK_WAIT, and a
        // node that stalls while holding it (stopped, swapped out) loses its session after
        // LOCK_IDLE instead of holding every other node's writes.
        await client.query(`SET LOCAL lock_timeout = '${LOCK_WAIT}'; SET LOCAL idle_in_transaction_session_timeout = '${LOCK_IDLE}'`);
        await client.query('SELECT pg_advisory_xact_lock($1)', [CATALOG_LOCK]);
        // Under the lock nobody else commits catalog rows: after this the cache is the record.
        await this.#catchUp(client as unknown as { query: CentralDatabase['query'] });
        const { result, changes } = this.#store.dryRunCatalogWrite(work);
        if (changes.length === 0) return { result, committed: [] };
        const committed = await this.#insert(client, changes);
        await client.query('SELECT pg_notify($1, $2)', [CATALOG_CHANNEL, this.node]);
        return { result, committed };
      });
    } catch (err) {
      if ((err as { code?: string }).code === LOCK_NOT_AVAILABLE) {
        this.figures.refused++;
        throw new ServiceError('STORE_UNAVAILABLE', `store unavailable: the catalog lock was not free within ${LOCK_WAIT} (another node holds it)`, { retryAfter: 5 });
      }
      if ((err as { code?: string }).code === 'STORE_UNAVAILABLE') this.figures.refused++;
      throw err;
    }
    this.figures.written += outcome.committed.length;
    this.#applyRows(outcome.committed);
    return outcome.result;
  }

  async #insert(client: pg.PoolClient, items: ReadonlyArray<ReplicaChange>): Promise<CatalogRow[]> {
    const r = await client.query<CatalogRow>(
      `INSERT INTO catalog_rows (tbl, pk, row, seq, node)
       SELECT t, p, r, nextval('catalog_seq'), $4 FROM unnest($1::text[], $2::text[], $3::jsonb[]) WITH ORDINALITY AS u(t, p, r, n) ORDER BY n
       ON CONFLICT (tbl, pk) DO UPDATE SET row = excluded.row, seq = excluded.seq, node = excluded.node
       RETURNING tbl, pk, row, seq`,
      [items.map((i) => i.tbl), items.map((i) => i.pk), items.map((i) => (i.row === null ? null : JSON.stringify(i.row))), this.node],
    );
    return r.rows.sort((a, b) => Number(a.seq) - Number(b.seq));
  }

  /**
   * Every catalog row of this node's SQLite file into PostgreSQL (`outpost migrate --copy` of a
   * SQLite central), under the catalog lock like any write.
   */
  async copyAll(): Promise<number> {
    const rows = this.#log.everyRow();
    await this.#pg.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [CATALOG_LOCK]);
      for (let i = 0; i < rows.length; i += PAGE) await this.#insert(client, rows.slice(i, i + PAGE));
      await client.query('SELECT pg_notify($1, $2)', [CATALOG_CHANNEL, this.node]);
    });
    return rows.length;
  }

  /** Applies what was committed since the cache's cursor; one pull at a time. */
  pull(): Promise<void> {
    if (this.#pulling) return this.#pulling;
    this.#pulling = (async () => {
      do {
        this.#pullAgain = false;
        await this.#catchUp(this.#pg);
        this.figures.lastPullAt = Date.now();
      } while (this.#pullAgain && !this.#stopped);
    })().finally(() => (this.#pulling = undefined));
    return this.#pulling;
  }

  async #catchUp(db: { query: CentralDatabase['query'] }): Promise<void> {
    for (;;) {
      const r = await db.query<CatalogRow>('SELECT tbl, pk, row, seq FROM catalog_rows WHERE seq > $1 ORDER BY seq LIMIT $2', [this.#log.cursor(), PAGE]);
      this.#applyRows(r.rows);
      if (r.rows.length < PAGE) return;
    }
  }

  #applyRows(rows: ReadonlyArray<CatalogRow>): void {
    if (rows.length === 0) return;
    this.figures.pulled += this.#log.apply(rows);
    for (const s of this.#log.skipped.splice(0)) this.#logger.warn({ table: s.tbl, key: s.pk, err: s.error }, 'catalog row from PostgreSQL not applied to this node\'s cache');
    // The daemon's caches drop what they hold at once (not at its next look at data_version).
    this.#catalog?.syncWithDisk();
  }

  #schedulePull(): void {
    if (this.#stopped) return;
    if (this.#pulling) {
      this.#pullAgain = true;
      return;
    }
    void this.pull().catch((err) => this.#logger.debug({ err: (err as Error).message }, 'catalog pull failed; retried'));
  }
}
