import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ServiceError, isServiceError } from '../../core/errors.js';
import type { RateLimiter } from '../../core/rate-limit.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { StoreHealth } from '../../store/health.js';
import type { Logger } from '../../ops/logger.js';
import { Counter } from '../../ops/metrics.js';
import { requestContext } from './request-context.js';
import { Router, type Method, type Reply, type Route } from '../../doors/http/router.js';

export interface HttpServerOptions {
  routes: Route[];
  catalog: Catalog;
  /** Where a storage failure (damaged file, no space) is recorded and turned into its refusal. */
  storeHealth: StoreHealth;
  rateLimiter: RateLimiter;
  clock: Clock;
  logger: Logger;
  bodyLimit: number;
  /** Deepest nesting of a JSON body (`limits.jsonDepth`). */
  jsonDepth: number;
  requestsByStatus: Counter;
  /**
   * Why writes are refused right now (a central node without its PostgreSQL, docs/scale-out.md):
   * every request but GET is answered with it; undefined when writes go through.
   */
  writesRefused?: () => ServiceError | undefined;
}

const METHODS: readonly string[] = ['GET', 'POST', 'PUT', 'DELETE'];

function send(res: ServerResponse, reply: Reply): void {
  if (reply.written) return;
  const headers: Record<string, string | number> = { ...reply.headers };
  let payload: string | undefined;
  if (reply.body !== undefined) {
    payload = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
    headers['content-type'] ??= 'application/json; charset=utf-8';
    headers['content-length'] = Buffer.byteLength(payload);
  } else if (reply.status !== 204) {
    headers['content-length'] = 0;
  }
  res.writeHead(reply.status, headers);
  res.end(payload);
}

export function errorReply(err: ServiceError): Reply {
  const headers: Record<string, string> = {};
  if (err.retryAfter !== undefined) headers['retry-after'] = String(err.retryAfter);
  if (err.status === 401) headers['www-authenticate'] = 'Bearer';
  return { status: err.status, headers, body: { status: err.status, error: err.message, code: err.code, ...err.details } };
}

/**
 * The HTTP door: plain node:http (faster to start and lighter on a Pi than a framework for this
 * route set). It authenticates, reads bodies within the limit and maps ServiceErrors to
 * `{status, error, code}`; every rule lives in the pipeline behind it.
 */
export function createHttpServer(options: HttpServerOptions): Server {
  const router = new Router(options.routes);
  const { catalog, storeHealth, logger, requestsByStatus } = options;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<Reply> {
    // Split by hand: WHATWG URL parsing costs more than the rest of routing on this hot path.
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const pathname = q < 0 ? target : target.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : target.slice(q + 1));
    const matched = router.match(pathname);
    if (!matched) throw new ServiceError('NOT_FOUND', `no such path: ${pathname}`);
    const allowed = Object.keys(matched.route.methods);
    const handler = METHODS.includes(req.method ?? '') ? matched.route.methods[req.method as Method] : undefined;
    if (!handler) {
      const err = new ServiceError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${pathname}; allowed: ${allowed.join(', ')}`);
      const reply = errorReply(err);
      reply.headers!.allow = allowed.join(', ');
      return reply;
    }
    const { ctx, bodyRead } = requestContext(req, res, matched.params, query, options);
    if (!matched.route.public) ctx.principal();
    if (req.method !== 'GET' && options.writesRefused) {
      const refusal = options.writesRefused();
      if (refusal) throw refusal;
    }
    try {
      return await handler(ctx);
    } finally {
      // A handler that refused before reading the body leaves it unread; drain it so keep-alive continues.
      if (!bodyRead()) req.resume();
    }
  }

  const statusKeys = new Map<number, string>();
  const statusKey = (status: number) => {
    let key = statusKeys.get(status);
    if (!key) statusKeys.set(status, (key = Counter.key({ status: String(status) })));
    return key;
  };

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    handle(req, res)
      .then((reply) => send(res, reply))
      .catch((err: unknown) => {
        const refusal = isServiceError(err) ? err : storeHealth.observe(err);
        if (refusal) {
          // The rest of an oversize body is not worth reading: answer and close the connection.
          if (refusal.status === 413) res.setHeader('connection', 'close');
          send(res, errorReply(refusal));
          return;
        }
        logger.error({ err, method: req.method, path: req.url?.split('?')[0] }, 'request failed');
        send(res, errorReply(new ServiceError('INTERNAL', 'internal error; see the gateway log')));
      })
      .finally(() => requestsByStatus.incKey(statusKey(res.statusCode)));
  });
  return server;
}
