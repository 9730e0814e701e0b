import pg from 'pg';
import { ServiceError } from '../core/errors.js';

/**
 * The central's PostgreSQL (docs/scale-out.md): one pool per node, and whether the database
 * answers now. A node that loses it refuses writes with 503 STORE_UNAVAILABLE (MQTT: no PUBACK)
 * and serves again as soon as a query succeeds: no restart.
 */
export class CentralDatabase {
  readonly pool: pg.Pool;
  readonly url: string;
  #failing: string | null = null;
  #failingSince: number | null = null;
  #queries = 0;

  constructor(url: string, options: { max?: number } = {}) {
    this.url = url;
    // Short connect timeout: a write waiting on a dead database holds a PUBACK and an HTTP reply.
    this.pool = new pg.Pool({ connectionString: url, max: options.max ?? 8, connectionTimeoutMillis: 3000, idleTimeoutMillis: 30_000 });
    // An idle client losing its connection (PostgreSQL restarted) must not crash the node.
    this.pool.on('error', (err) => this.#failed(err));
  }

  /** `ok` or `failing` with the last error, for /healthz. */
  health(): { status: 'ok' | 'failing'; error?: string; since?: string } {
    if (this.#failing === null) return { status: 'ok' };
    return { status: 'failing', error: this.#failing, since: new Date(this.#failingSince!).toISOString() };
  }

  get failing(): boolean {
    return this.#failing !== null;
  }

  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      const result = await this.pool.query<R>(text, values);
      this.#succeeded();
      return result;
    } catch (err) {
      throw this.#refusal(err);
    }
  }

  /** Runs `work` in one transaction on one connection; any failure rolls back and is thrown as a refusal when the database is at fault. */
  async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.#refusal(err);
    }
    let broken = false;
    // A connection lost between two queries of the transaction is emitted as an 'error' event of
    // the client, which ends the process when nobody listens (pg-pool listens only while it idles).
    const onError = (err: Error) => {
      broken = true;
      this.#failed(err);
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      this.#succeeded();
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
      throw this.#refusal(err);
    } finally {
      client.off('error', onError);
      // A connection that could not even roll back is dropped, not handed to the next writer.
      client.release(broken);
    }
  }

  /** Counts queries for tests and metrics. */
  get queries(): number {
    return this.#queries;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  #succeeded(): void {
    this.#queries++;
    this.#failing = null;
    this.#failingSince = null;
  }

  #failed(err: unknown): void {
    if (this.#failing === null) this.#failingSince = Date.now();
    this.#failing = (err as Error)?.message ?? String(err);
  }

  /**
   * A failure of the database itself (connection refused or lost, shutting down, out of space) is
   * a 503 STORE_UNAVAILABLE; an error in what was asked (a constraint, a bug) stays itself.
   */
  #refusal(err: unknown): unknown {
    if (!isConnectionFailure(err)) return err;
    this.#failed(err);
    return new ServiceError('STORE_UNAVAILABLE', `store unavailable: PostgreSQL does not answer (${(err as Error).message})`, { retryAfter: 5 });
  }
}

/** SQLSTATE classes 08 (connection), 53 (resources), 57 (operator intervention: shutdown), or a socket error. */
export function isConnectionFailure(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && /^(08|53|57)/.test(code)) return true;
  if (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND)$/.test(code)) return true;
  const message = (err as Error)?.message ?? '';
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended/i.test(message);
}
