import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Principal } from '../../core/access.js';
import { ServiceError } from '../../core/errors.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Resolves the bearer token (401 without one), applies the rate limit (429). */
  principal(): Principal;
  /** Reads and decodes the body as one of the accepted media kinds (413, 415, 400). */
  body(accepted?: ReadonlyArray<'json' | 'cbor'>): Promise<unknown>;
  /** The raw body with its media kind, for device states that may be custom binary. */
  rawBody(accepted: ReadonlyArray<'json' | 'cbor' | 'binary'>): Promise<{ bytes: Buffer; kind: 'json' | 'cbor' | 'binary' }>;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** The handler wrote the response itself (a file, an event stream): nothing more is sent. */
  written?: boolean;
}

export type Handler = (ctx: RequestContext) => Reply | Promise<Reply>;

export interface Route {
  pattern: string;
  /** Authentication-free routes (health and metrics). */
  public?: boolean;
  methods: Partial<Record<Method, Handler>>;
}

interface CompiledRoute extends Route {
  segments: string[];
}

/** Whether some path matches both: as long, and each segment a capture in one or the same literal. */
function overlap(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((seg, i) => seg.startsWith(':') || b[i]!.startsWith(':') || seg === b[i]);
}

/**
 * Matches paths segment by segment; a `:name` segment captures one decoded segment. No two
 * patterns may match the same path (checked here, at start-up), so the route modules can be
 * listed in any order.
 */
export class Router {
  readonly #routes: CompiledRoute[];

  constructor(routes: Route[]) {
    this.#routes = routes.map((r) => ({ ...r, segments: r.pattern.split('/').filter(Boolean) }));
    this.#routes.forEach((a, i) => {
      const clash = this.#routes.slice(i + 1).find((b) => overlap(a.segments, b.segments));
      if (clash) throw new Error(`routes ${a.pattern} and ${clash.pattern} match the same paths`);
    });
  }

  /** Throws 400 INVALID_NAME when a captured segment is not percent-encoded UTF-8 (e.g. `%ED%A0%80`, a surrogate). */
  match(path: string): { route: Route; params: Record<string, string> } | undefined {
    const parts = path.split('/').filter(Boolean);
    for (const route of this.#routes) {
      if (route.segments.length !== parts.length) continue;
      if (!route.segments.every((seg, i) => seg.startsWith(':') || seg === parts[i])) continue;
      const params: Record<string, string> = {};
      for (let i = 0; i < parts.length; i++) {
        const seg = route.segments[i]!;
        if (!seg.startsWith(':')) continue;
        try {
          params[seg.slice(1)] = decodeURIComponent(parts[i]!);
        } catch {
          throw new ServiceError('INVALID_NAME', `path segment ${i + 1} (${seg.slice(1)}) is not valid percent-encoded UTF-8`);
        }
      }
      return { route, params };
    }
    return undefined;
  }
}
