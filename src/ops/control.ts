import { createServer, request, type Server } from 'node:http';
import { connect } from 'node:net';
import { chmodSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from './logger.js';

/**
 * The control socket: a small HTTP server on a unix socket inside the data directory
 * (`<dataDir>/outpost.sock`, mode 0600), used by `outpost status`, `doctor`, `backup` and `restore`
 * to find and ask the daemon of that data directory (docs/operations.md, "status").
 *
 * Why a unix socket and not a route on the HTTP port: it needs no token and no open port, it works
 * when the HTTP door is off or bound to another interface, and who may ask is decided by file
 * permissions: exactly those who may read the database itself (root and the outpost user).
 */
export const CONTROL_SOCKET = 'outpost.sock';

// sun_path holds 108 bytes on Linux, including the terminating NUL.
const MAX_SOCKET_PATH = 107;

export function controlSocketPath(dataDir: string): string {
  return join(dataDir, CONTROL_SOCKET);
}

export type ControlRoutes = Record<string, () => unknown | Promise<unknown>>;

export class ControlServer {
  readonly #server: Server;
  readonly #path: string;

  private constructor(server: Server, path: string) {
    this.#server = server;
    this.#path = path;
  }

  /** Listens on the data dir's socket; resolves undefined (with a warning) when that cannot be done. */
  static async start(dataDir: string, routes: ControlRoutes, logger: Logger): Promise<ControlServer | undefined> {
    const path = controlSocketPath(dataDir);
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
      logger.warn({ path }, 'data directory path too long for the control socket: outpost status and doctor cannot reach this daemon');
      return undefined;
    }
    // A socket file left by a daemon that was killed answers nothing: remove it. One that answers
    // belongs to a live daemon, which the data dir lock already keeps out; never take it over.
    if (await answers(path)) {
      logger.warn({ path }, 'another process answers on the control socket; not replacing it');
      return undefined;
    }
    rmSync(path, { force: true });
    const server = createServer((req, res) => {
      const route = req.method === 'GET' ? routes[req.url ?? ''] : undefined;
      if (!route) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `no such path: ${req.method} ${req.url}` }));
        return;
      }
      Promise.resolve()
        .then(route)
        .then(
          (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
          (err: unknown) => res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: (err as Error).message })),
        );
    });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(path, () => {
          server.off('error', reject);
          resolve();
        });
      });
      chmodSync(path, 0o600);
    } catch (err) {
      logger.warn({ path, err: (err as Error).message }, 'control socket not available: outpost status and doctor cannot reach this daemon');
      server.close();
      return undefined;
    }
    server.unref();
    return new ControlServer(server, path);
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    rmSync(this.#path, { force: true });
  }
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Asks the daemon of a data directory. Resolves undefined when no daemon listens there (no socket,
 * or a stale one); rejects when one listens but fails to answer in time.
 */
export function askDaemon<T = Record<string, unknown>>(dataDir: string, path: string, timeoutMs = 5000): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: controlSocketPath(dataDir), path, method: 'GET', timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        try {
          const body = JSON.parse(text) as T & { error?: string };
          if (res.statusCode !== 200) reject(new Error(`daemon answered ${res.statusCode}: ${body.error ?? text}`));
          else resolve(body);
        } catch {
          reject(new Error(`daemon answered ${res.statusCode} with something that is not JSON`));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`the daemon did not answer on its control socket within ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (['ENOENT', 'ECONNREFUSED', 'ENOTSOCK'].includes(err.code ?? '')) resolve(undefined);
      else reject(err);
    });
    req.end();
  });
}
