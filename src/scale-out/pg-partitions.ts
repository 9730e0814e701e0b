import type pg from 'pg';
import type { CentralDatabase } from './postgres.js';

/** pg_advisory_xact_lock key: one node at a time creates or drops partitions of `states`. */
const PARTITION_LOCK = 0x6f757473;
/**
 * Dropping a month takes a lock on `states` that queues every reader and writer behind it while it
 * waits: a node does not wait longer than this (the next retention run tries again). Creating one
 * takes a lock that lets them go on (see create) and may wait longer.
 */
const DROP_LOCK_TIMEOUT = '2s';
const CREATE_LOCK_TIMEOUT = '10s';

/** One calendar month (UTC) of `at` values: `[start, end)` in ms. */
export interface Month {
  start: number;
  end: number;
  name: string;
}

/** The month (UTC) holding `at`, and the name of its partition of `states`. */
export function monthOf(at: number): Month {
  const d = new Date(at);
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth();
  const start = monthStart(year, month) ?? -8.64e15;
  // The last month of the Date range ends past it.
  const end = monthStart(year, month + 1) ?? 8.64e15 + 1;
  // Years before 0 or after 9999 are valid `at` values (within the Date range) and need a name too.
  const y = year < 0 ? `bc${-year}` : String(year).padStart(4, '0');
  return { start, end, name: `states_${y}_${String(month + 1).padStart(2, '0')}` };
}

/** setUTCFullYear, not Date.UTC, which reads years 0 to 99 as 1900 to 1999; undefined outside the Date range. */
function monthStart(year: number, month: number): number | undefined {
  const d = new Date(0);
  const ms = d.setUTCFullYear(year, month, 1);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The monthly partitions of PostgreSQL's `states` (docs/scale-out.md, "History in PostgreSQL"): a
 * history page touches the months its range covers, and retention drops whole months instead of
 * deleting row by row. The current and next month are created ahead (start, each retention run);
 * a state for a month that has none (an old or future `at`) gets its partition created before
 * its batch is inserted. There is no DEFAULT partition: a month's partition could then no longer
 * be created once the default held a row of that month.
 */
export class StatePartitions {
  readonly #db: CentralDatabase;
  /** Month starts known to have a partition. A partition another node dropped shows up as an insert error (see PostgresStates). */
  #known: Set<number> | undefined;

  constructor(db: CentralDatabase) {
    this.#db = db;
  }

  /** Every partition, oldest first, read from the catalog. */
  async list(): Promise<Month[]> {
    const r = await this.#db.query<{ bound: string }>(
      `SELECT pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = 'states'::regclass`,
    );
    const months: Month[] = [];
    for (const { bound } of r.rows) {
      const m = /FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)/.exec(bound);
      if (m) months.push(monthOf(Number(m[1])));
    }
    return months.sort((a, b) => a.start - b.start);
  }

  /** Makes sure each `at` has its month's partition. */
  async ensureFor(ats: Iterable<number>): Promise<void> {
    const known = (this.#known ??= new Set((await this.list()).map((m) => m.start)));
    const missing = new Map<number, Month>();
    for (const at of ats) {
      const month = monthOf(at);
      if (!known.has(month.start)) missing.set(month.start, month);
    }
    if (missing.size === 0) return;
    await this.#locked(CREATE_LOCK_TIMEOUT, async (client) => {
      for (const month of missing.values()) await create(client, month);
    });
    for (const start of missing.keys()) known.add(start);
  }

  /** The current month's and the next one's, so writers never wait on a creation at a month's turn. */
  async ensureAhead(now: number): Promise<void> {
    const current = monthOf(now);
    await this.ensureFor([current.start, current.end]);
  }

  /** After an insert found no partition for a row: the cache is read again from the catalog. */
  forget(): void {
    this.#known = undefined;
  }

  /** Drops every partition whose whole month is before `before`; returns their names. */
  async dropBefore(before: number): Promise<string[]> {
    const old = (await this.list()).filter((m) => m.end <= before);
    if (old.length === 0) return [];
    await this.#locked(DROP_LOCK_TIMEOUT, async (client) => {
      for (const month of old) await client.query(`DROP TABLE IF EXISTS ${month.name}`);
    });
    this.forget();
    return old.map((m) => m.name);
  }

  async #locked(lockTimeout: string, work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    await this.#db.transaction(async (client) => {
      await client.query(`SET LOCAL lock_timeout = '${lockTimeout}'`);
      await client.query('SELECT pg_advisory_xact_lock($1)', [PARTITION_LOCK]);
      await work(client);
    });
  }
}

/**
 * Creates a month's partition unless it exists (a node that held the lock before may have made
 * it). Created on its own, then attached: ATTACH PARTITION locks `states` only against schema
 * changes, where CREATE TABLE … PARTITION OF would hold every reader and writer until it commits;
 * checking the new, empty table against its range and building its indexes is immediate.
 */
export async function create(client: pg.ClientBase, month: Month): Promise<void> {
  const exists = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [month.name]);
  if (exists.rows[0]?.t) return;
  await client.query(`CREATE TABLE ${month.name} (LIKE states INCLUDING DEFAULTS)`);
  await client.query(`ALTER TABLE states ATTACH PARTITION ${month.name} FOR VALUES FROM (${month.start}) TO (${month.end})`);
}
