import { ServiceError } from '../core/errors.js';
import { canReadDevice } from '../core/access.js';
import type { RequestContext, Route } from '../doors/http/router.js';
import { forbid } from '../doors/http/access.js';
import { chooseEncoding, loadConsoleFiles } from './static-files.js';
import { LIVE_KINDS, type LiveEvents, type LiveKind } from './live-events.js';
import type { RecentRadio } from './recent-radio.js';

/** What `GET /device/<id>/radio` needs besides the live events: the remembered radio events and the device lookup (404 `DEVICE_NOT_FOUND`). */
export interface RadioRouteDeps {
  recentRadio: RecentRadio;
  requireDevice: (deviceId: string) => unknown;
}

function parseKinds(raw: string | null): Set<LiveKind> {
  if (raw === null || raw === '') return new Set(LIVE_KINDS);
  const kinds = new Set<LiveKind>();
  for (const k of raw.split(',')) {
    if (!LIVE_KINDS.includes(k as LiveKind)) throw new ServiceError('INVALID_QUERY', `query "kinds" takes a comma-separated list of ${LIVE_KINDS.join(', ')}; "${k}" is not one`);
    kinds.add(k as LiveKind);
  }
  return kinds;
}

/**
 * The web console (static files under /console/), the live event stream `GET /events` it reads and
 * a device's recent radio events `GET /device/<id>/radio`; the rest it asks of the device API
 * (`GET /whoami`, `POST /codec/decode`, …).
 */
export function consoleRoutes(live: LiveEvents, radio: RadioRouteDeps): Route[] {
  const files = loadConsoleFiles();

  const serveFile = (ctx: RequestContext, name: string) => {
    const file = files.get(name);
    if (!file) throw new ServiceError('NOT_FOUND', `no such console file: ${name}`);
    const { req, res } = ctx;
    // index.html is re-validated on every load so an upgrade shows at once; the rest by ETag as well (small, local).
    const headers: Record<string, string> = { 'content-type': file.type, etag: file.etag, 'cache-control': 'no-cache', vary: 'accept-encoding' };
    if (name === 'index.html') {
      headers['content-security-policy'] = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'";
      headers['x-content-type-options'] = 'nosniff';
    }
    if (req.headers['if-none-match'] === file.etag) {
      res.writeHead(304, headers);
      res.end();
      return { status: 304, written: true };
    }
    const encoding = chooseEncoding(req.headers['accept-encoding']);
    const body = encoding === 'br' ? file.brotli : encoding === 'gzip' ? file.gzip : file.identity;
    if (encoding !== 'identity') headers['content-encoding'] = encoding;
    headers['content-length'] = String(body.length);
    res.writeHead(200, headers);
    res.end(body);
    return { status: 200, written: true };
  };

  return [
    {
      pattern: '/console',
      public: true,
      methods: {
        // Without the trailing slash the page's relative URLs would resolve outside /console/.
        GET: (ctx) => ((ctx.req.url ?? '').split('?')[0]!.endsWith('/') ? serveFile(ctx, 'index.html') : { status: 301, headers: { location: '/console/' } }),
      },
    },
    { pattern: '/console/:file', public: true, methods: { GET: (ctx) => serveFile(ctx, ctx.params.file!) } },
    { pattern: '/console/:dir/:file', public: true, methods: { GET: (ctx) => serveFile(ctx, `${ctx.params.dir}/${ctx.params.file}`) } },
    {
      pattern: '/events',
      methods: {
        GET: (ctx) => {
          const principal = ctx.principal();
          const device = ctx.query.get('device');
          const kinds = parseKinds(ctx.query.get('kinds'));
          if (device !== null && !canReadDevice(principal, device)) forbid(`this token may not read device ${device}`);
          if (device === null && principal.kind === 'device') forbid('a device token reads the events of its own device: add ?device=<its id>');
          const opened = live.open(ctx.res, principal, { device, kinds });
          if (opened !== true) throw new ServiceError('RATE_LIMITED', `${opened}; try again later`, { retryAfter: 5 });
          return { status: 200, written: true };
        },
      },
    },
    radioRoute(radio),
  ];
}

/** The device's last uplink metadata and downlink outcomes (docs/api.md), for its page at a gateway or a central. */
function radioRoute({ recentRadio, requireDevice }: RadioRouteDeps): Route {
  return {
    pattern: '/device/:deviceId/radio',
    methods: {
      GET: (ctx) => {
        const deviceId = ctx.params.deviceId!;
        requireDevice(deviceId);
        if (!canReadDevice(ctx.principal(), deviceId)) forbid(`this token may not read device ${deviceId}`);
        return { status: 200, body: recentRadio.of(deviceId) };
      },
    },
  };
}
