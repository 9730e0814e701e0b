import type { Server } from 'node:http';
import type { Door } from '../door.js';
import { listen } from '../listen.js';
import { createHttpServer, type HttpServerOptions } from './server.js';

export interface HttpDoorOptions extends HttpServerOptions {
  /** The live config section: host and port are read when the door opens. */
  http: { host: string; port: number };
  /**
   * Connections that never end by themselves (the console's live event streams): ended first on
   * stop, so closing the server does not wait on a browser that keeps a stream open.
   */
  endStreams?: () => void;
}

/** Requests still running this long after stop are cut off rather than holding shutdown forever. */
const DRAIN_MS = 10_000;

/** The HTTP API (and the console's routes) as a door: see server.ts for what it serves. */
export class HttpDoor implements Door {
  readonly name = 'http';
  readonly #server: Server;
  readonly #options: HttpDoorOptions;

  constructor(options: HttpDoorOptions) {
    this.#options = options;
    this.#server = createHttpServer(options);
  }

  async start(): Promise<Record<string, number>> {
    const { host, port } = this.#options.http;
    return { http: await listen(this.#server, port, host, { host: 'http.host', port: 'http.port' }) };
  }

  async stop(): Promise<void> {
    const server = this.#server;
    if (!server.listening) return;
    this.#options.endStreams?.();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const deadline = setTimeout(() => server.closeAllConnections(), DRAIN_MS).unref();
    await closed;
    clearTimeout(deadline);
  }
}
