import { ServiceError } from '../../../core/errors.js';
import { decodeHistoryCursor } from '../../../store/states.js';
import { authorizeAssetState } from '../../../ingest/uplinks.js';
import { queryCursor, queryFlag, queryLimit, queryTime } from '../query.js';
import type { RequestContext, Route } from '../router.js';
import { assetTarget, iso, readableAsset, type ApiDeps } from './deps.js';

/**
 * An asset's latest state (GET, PUT) and its history (docs/api.md, "Paths"), by device and name
 * or by asset ID.
 */
export function assetStateRoutes(deps: ApiDeps): Route[] {
  const state = { GET: (ctx: RequestContext) => getState(deps, ctx), PUT: (ctx: RequestContext) => putState(deps, ctx) };
  return [
    { pattern: '/device/:deviceId/asset/:name/state', methods: state },
    { pattern: '/asset/:assetId/state', methods: state },
    { pattern: '/device/:deviceId/asset/:name/states', methods: { GET: (ctx) => stateHistory(deps, ctx) } },
  ];
}

async function getState(deps: ApiDeps, ctx: RequestContext) {
  const asset = readableAsset(deps, ctx);
  const latest = await deps.states.latest(asset.id);
  if (!latest) throw new ServiceError('NO_STATE', `asset "${asset.name}" has no state yet`);
  return { status: 200, body: { id: asset.id, state: { value: JSON.parse(latest.valueJson), at: iso(latest.at) } } };
}

async function putState(deps: ApiDeps, ctx: RequestContext) {
  const principal = ctx.principal();
  const { bytes, kind } = await ctx.rawBody(['json', 'cbor']);
  const { deviceId, assetName } = authorizeAssetState(deps.catalog, principal, assetTarget(ctx));
  const path = ctx.req.url ?? '';
  // The body is read by the pipeline, so a malformed one is also reported on the device's errors topic.
  const outcome = await deps.pipeline.ingest({
    deviceId,
    via: 'http',
    payload: { asset: assetName, bytes, form: kind as 'json' | 'cbor' },
    label: 'body',
    topic: `PUT ${path.split('?')[0]}`,
    resent: principal.kind === 'gateway',
  });
  const state = outcome.states[assetName]!;
  return { status: 200, body: { id: state.assetId, state: { value: state.value, at: iso(state.at) } } };
}

async function stateHistory(deps: ApiDeps, ctx: RequestContext) {
  const asset = readableAsset(deps, ctx);
  const provenance = queryFlag(ctx.query, 'provenance');
  // An empty cursor has always meant the first page here.
  const cursor = queryCursor(ctx.query, decodeHistoryCursor, { emptyIsFirstPage: true });
  const page = await deps.states.history(asset.id, {
    from: queryTime(ctx.query, 'from'),
    to: queryTime(ctx.query, 'to'),
    limit: queryLimit(ctx.query, 100, 1000),
    cursor,
    // A state's share of the answer: its value as stored (the same JSON the answer carries), `at`, and provenance.
    budget: { maxBytes: deps.pageBytes(), sizeOf: (s) => Buffer.byteLength(s.valueJson) + 120 },
  });
  const data = page.data.map((s) => {
    const state: Record<string, unknown> = { value: JSON.parse(s.valueJson), at: iso(s.at) };
    // Which raw uplink (GET /device/<id>/uplinks `id`) and codec version a state was decoded from; null for states sent decoded.
    if (provenance) Object.assign(state, { uplink: s.uplinkSeq, codec: s.codec });
    return state;
  });
  return { status: 200, body: { data, next: page.next } };
}
