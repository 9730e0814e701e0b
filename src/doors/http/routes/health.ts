import type { Route } from '../router.js';
import type { ApiDeps } from './deps.js';

/** `GET /healthz` and `GET /metrics`: public, for monitors and scrapers (docs/operations.md). */
export function healthRoutes(deps: ApiDeps): Route[] {
  return [
    {
      pattern: '/healthz',
      public: true,
      // 503 only when the gateway cannot do its job (a damaged store): monitors alert and load
      // balancers stop sending; `degraded` (e.g. a full store) still serves, so it stays 200.
      methods: {
        GET: () => {
          const body = deps.health();
          return { status: body.status === 'failing' ? 503 : 200, body };
        },
      },
    },
    {
      pattern: '/metrics',
      public: true,
      methods: { GET: () => ({ status: 200, body: deps.metricsText(), headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } }) },
    },
  ];
}
