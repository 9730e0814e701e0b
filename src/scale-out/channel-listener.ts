import pg from 'pg';
import type { Logger } from '../ops/logger.js';

/** How often a lost LISTEN connection is tried again. */
const RELISTEN_MS = 5000;

/**
 * One PostgreSQL `LISTEN` on a connection of its own (a pooled one would drop it when released),
 * brought back when PostgreSQL restarts. Notifications are only a shortcut: every user also polls,
 * so while the connection is lost the node is slower to hear of changes, never wrong.
 */
export class ChannelListener {
  readonly #o: { url: string; channel: string; onNotify: (payload: string) => void; logger: Logger; what: string };
  #client: pg.Client | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The connection attempt in progress, if any: one at a time, and `stop` waits for it. */
  #attempt: Promise<void> | undefined;

  constructor(options: { url: string; channel: string; onNotify: (payload: string) => void; logger: Logger; what: string }) {
    this.#o = options;
  }

  /** Listens now if it can; either way keeps trying while the connection is missing. */
  async start(): Promise<void> {
    await this.#tryListen();
    this.#timer = setInterval(() => void (this.#client ? undefined : this.#tryListen()), RELISTEN_MS).unref();
  }

  /**
   * Waits for an attempt in progress before closing: a connection it opened after `stop` would
   * otherwise stay open, and its socket alone kept a stopped daemon's process from exiting.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#attempt;
    await this.#client?.end().catch(() => {});
  }

  #tryListen(): Promise<void> {
    this.#attempt ??= this.#listen().finally(() => (this.#attempt = undefined));
    return this.#attempt;
  }

  async #listen(): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({ connectionString: this.#o.url });
    const lost = (err?: Error) => {
      if (this.#client !== client) return;
      this.#client = undefined;
      if (err) this.#o.logger.warn({ err: err.message, channel: this.#o.channel }, `postgres notification connection lost; ${this.#o.what} are polled until it is back`);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (n) => {
      if (n.channel === this.#o.channel) this.#o.onNotify(n.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.#o.channel}`);
      if (this.#stopped) {
        await client.end().catch(() => {});
        return;
      }
      this.#client = client;
    } catch (err) {
      this.#o.logger.debug({ err: (err as Error).message, channel: this.#o.channel }, 'postgres LISTEN failed; retried');
      client.end().catch(() => {});
    }
  }
}
