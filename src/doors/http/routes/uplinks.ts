import { queryCursor, queryLimit } from '../query.js';
import type { RequestContext, Route } from '../router.js';
import { iso, readableDevice, type ApiDeps } from './deps.js';

/**
 * `GET /device/<id>/uplinks`: the kept raw uplinks, newest first, a page at a time, each page
 * within `http.pageBytes` (docs/api.md, "Pages"; docs/codecs.md).
 */
export function uplinkRoutes(deps: ApiDeps): Route[] {
  return [{ pattern: '/device/:deviceId/uplinks', methods: { GET: (ctx) => listUplinks(deps, ctx) } }];
}

/** The cursor is the `id` (sequence number) the page ends at. */
const decodeUplinkCursor = (text: string) => (/^\d+$/.test(text) ? Number(text) : undefined);

function listUplinks(deps: ApiDeps, ctx: RequestContext) {
  const device = readableDevice(deps, ctx);
  const cursor = queryCursor(ctx.query, decodeUplinkCursor);
  // Each uplink's share of the answer: its payload in hex, its error text, and the members around them.
  const page = deps.store.uplinks.list(device.id, queryLimit(ctx.query, 20, 1000), cursor, {
    maxBytes: deps.pageBytes(),
    sizeOf: (u) => 2 * u.payload.length + 2 * (u.error?.length ?? 0) + 160,
  });
  return {
    status: 200,
    body: {
      data: page.data.map((u) => ({
        id: u.seq,
        at: iso(u.at),
        payload: u.payload.toString('hex').toUpperCase(),
        ...(u.port === null ? {} : { port: u.port }),
        source: u.source,
        decoded: u.decoded,
        ...(u.error === null ? {} : { error: u.error }),
        ...(u.codec === null ? {} : { codec: u.codec }),
      })),
      next: page.next,
    },
  };
}
