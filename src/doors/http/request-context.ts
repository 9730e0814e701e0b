import type { IncomingMessage, ServerResponse } from 'node:http';
import { ServiceError } from '../../core/errors.js';
import type { Principal } from '../../core/access.js';
import type { RateLimiter } from '../../core/rate-limit.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import { decodeBody, mediaKind, readBody, type MediaKind } from './body.js';
import type { RequestContext } from './router.js';

export interface RequestContextOptions {
  catalog: Catalog;
  rateLimiter: RateLimiter;
  clock: Clock;
  /** Read per request: a config reload may change it (the daemon passes a live getter). */
  readonly bodyLimit: number;
  jsonDepth: number;
}

/** The bearer token's principal (401 without a live one), charged to its rate limit (429). */
function authenticate(req: IncomingMessage, options: RequestContextOptions): Principal {
  const header = req.headers.authorization ?? '';
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new ServiceError('UNAUTHORIZED', 'missing "Authorization: Bearer <token>" header');
  const found = options.catalog.principalForSecret(m[1]!);
  if (!found) throw new ServiceError('UNAUTHORIZED', 'unknown or revoked token');
  const wait = options.rateLimiter.take(found.tokenId, options.clock.now());
  if (wait > 0) throw new ServiceError('RATE_LIMITED', 'this token is over its rate limit', { retryAfter: wait });
  return found;
}

/**
 * What a handler sees of its request: the principal, authenticated once on first ask, and the
 * body, read within the limit and decoded as JSON or CBOR — the one place either happens.
 * `bodyRead()` tells whether a handler read the body (an unread one must be drained).
 */
export function requestContext(
  req: IncomingMessage,
  res: ServerResponse,
  params: Record<string, string>,
  query: URLSearchParams,
  options: RequestContextOptions,
): { ctx: RequestContext; bodyRead: () => boolean } {
  let principal: Principal | undefined;
  let bodyRead = false;
  const readRaw = async (accepted: readonly MediaKind[]) => {
    bodyRead = true;
    const declaredEmpty = req.headers['content-length'] === '0' || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined);
    // A request without a body is not refused for its Content-Type header (docs/api.md).
    if (declaredEmpty) return { bytes: Buffer.alloc(0), kind: 'json' as const };
    const kind = mediaKind(req.headers['content-type'], accepted);
    const bytes = await readBody(req, options.bodyLimit);
    return { bytes, kind };
  };
  const ctx: RequestContext = {
    req,
    res,
    params,
    query,
    principal: () => (principal ??= authenticate(req, options)),
    async body(accepted = ['json', 'cbor']) {
      const { bytes, kind } = await readRaw(accepted);
      return decodeBody(bytes, kind as 'json' | 'cbor', options.jsonDepth);
    },
    rawBody: readRaw,
  };
  return { ctx, bodyRead: () => bodyRead };
}
