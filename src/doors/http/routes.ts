import { ErrorCodes, ServiceError, type ErrorCode } from '../../core/errors.js';
import { canManageAssets, canReadAny, canReadDevice, isAdmin, type Principal } from '../../core/access.js';
import { parseTimestamp } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { DeviceRecord } from '../../core/model.js';
import { decodeHistoryCursor } from '../../store/states.js';
import type { AssetTarget, StatePipeline } from '../../ingest/ingest.js';
import type { CommandRouter } from '../../commands/router.js';
import type { Registry } from '../../registry/registry.js';
import { stateFromMessage } from '../../ingest/messages.js';
import { assetView, deviceView, deviceWithAssetsView, tokenView } from '../../registry/views.js';
import type { DeviceStateDecoder } from '../../ingest/decoders.js';
import { codecSettingsView, setDeviceCodec, type DeviceCodecs } from '../../device-codecs/device-codecs.js';
import type { Clock } from '../../core/time.js';
import { parseTryBody, tryCodec } from '../../device-codecs/codec-try.js';
import { parseRedecodeBody, redecodeView, type RedecodeRunner } from '../../device-codecs/redecode.js';
import type { LorawanProvisioning } from '../../lpwan/provisioning.js';
import type { RequestContext, Route } from '../../doors/http/router.js';
import { decodeBody } from '../../doors/http/body.js';

export interface ApiDeps {
  catalog: Catalog;
  registry: Registry;
  pipeline: StatePipeline;
  commands: CommandRouter;
  decoders: DeviceStateDecoder;
  codecs: DeviceCodecs;
  redecode: RedecodeRunner;
  lorawan?: LorawanProvisioning;
  clock: Clock;
  health: () => { status: 'ok' | 'degraded' | 'failing' } & Record<string, unknown>;
  metricsText: () => string;
}

function forbid(message: string): never {
  throw new ServiceError('FORBIDDEN', message);
}

const iso = (ms: number) => new Date(ms).toISOString();

function deviceTarget(ctx: RequestContext): AssetTarget {
  return ctx.params.assetId !== undefined ? { assetId: ctx.params.assetId } : { deviceId: ctx.params.deviceId!, assetName: ctx.params.name! };
}

function queryTime(query: URLSearchParams, key: string): number | undefined {
  const raw = query.get(key);
  if (raw === null) return undefined;
  const ms = parseTimestamp(raw);
  if (ms === undefined) throw new ServiceError('INVALID_QUERY', `query "${key}" must be an ISO 8601 timestamp with a zone`);
  return ms;
}

function queryLimit(query: URLSearchParams, fallback: number, max: number): number {
  const raw = query.get('limit');
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new ServiceError('INVALID_QUERY', `query "limit" must be an integer from 1 to ${max}`);
  return n;
}

function queryFlag(query: URLSearchParams, key: string): boolean {
  const raw = query.get(key);
  if (raw === null || raw === '0' || raw === 'false') return false;
  if (raw === '' || raw === '1' || raw === 'true') return true;
  throw new ServiceError('INVALID_QUERY', `query "${key}" must be 1 or 0`);
}

/** Every path of docs/api.md. Handlers check rights themselves: the rules differ per path. */
export function apiRoutes(deps: ApiDeps): Route[] {
  const { catalog, registry, pipeline, commands } = deps;
  const store = catalog.store;

  const readableDevice = (ctx: RequestContext, p: Principal) => {
    const device = registry.requireDevice(ctx.params.deviceId!);
    if (!canReadDevice(p, device.id)) forbid(`this token may not read device ${device.id}`);
    return device;
  };
  const readableAsset = (ctx: RequestContext) => {
    const p = ctx.principal();
    const asset = pipeline.resolveAsset(deviceTarget(ctx));
    if (!canReadDevice(p, asset.deviceId)) forbid(`this token may not read device ${asset.deviceId}`);
    return asset;
  };
  const manageableDevice = (ctx: RequestContext) => {
    const p = ctx.principal();
    const device = registry.requireDevice(ctx.params.deviceId!);
    if (!canManageAssets(p, device.id)) forbid(`this token may not change the assets of device ${device.id}`);
    return device;
  };
  const requireLorawan = (): LorawanProvisioning => {
    if (!deps.lorawan) throw new ServiceError('NOT_FOUND', 'the radio side is not running in this instance');
    return deps.lorawan;
  };
  const requireAdmin = (ctx: RequestContext) => {
    if (!isAdmin(ctx.principal())) forbid('this needs an application token with the "admin" scope');
  };

  const getState = (ctx: RequestContext) => {
    const asset = readableAsset(ctx);
    const latest = store.states.latest(asset.id);
    if (!latest) throw new ServiceError('NO_STATE', `asset "${asset.name}" has no state yet`);
    return { status: 200, body: { id: asset.id, state: { value: JSON.parse(latest.valueJson), at: iso(latest.at) } } };
  };
  const putState = async (ctx: RequestContext) => {
    const principal = ctx.principal();
    const { bytes, kind } = await ctx.rawBody(['json', 'cbor']);
    const path = ctx.req.url ?? '';
    const event = await pipeline.publishAssetState({
      principal,
      target: deviceTarget(ctx),
      // Parsed inside the pipeline so a malformed body is also reported on the device's errors topic.
      parse: (_asset, limits) => stateFromMessage(decodeBody(bytes, kind as 'json' | 'cbor', limits.jsonDepth), false, 'body'),
      source: 'http',
      topic: `PUT ${path.split('?')[0]}`,
    });
    return { status: 200, body: { id: event.asset.id, state: { value: event.value, at: iso(event.at) } } };
  };
  const putCommand = async (ctx: RequestContext) => {
    const principal = ctx.principal();
    const body = await ctx.body();
    return { status: 202, body: commands.sendAssetCommand(principal, deviceTarget(ctx), body, 'http') };
  };

  return [
    {
      pattern: '/healthz',
      public: true,
      // 503 only when the gateway cannot do its job (a damaged store): monitors alert and load
      // balancers stop sending; `degraded` (e.g. a full store) still serves, so it stays 200.
      methods: { GET: () => { const body = deps.health(); return { status: body.status === 'failing' ? 503 : 200, body }; } },
    },
    {
      pattern: '/metrics',
      public: true,
      methods: { GET: () => ({ status: 200, body: deps.metricsText(), headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } }) },
    },
    {
      pattern: '/devices',
      methods: {
        GET: (ctx) => {
          if (!canReadAny(ctx.principal())) forbid('listing devices needs an application token with the "read" scope');
          const lastSeen = store.devices.lastStateAtByDevice();
          const radioLinks = deps.lorawan?.links() ?? new Map();
          // How each device reaches this instance: by radio, through a gateway (central role), or over IP.
          const link = (d: DeviceRecord) => radioLinks.get(d.id) ?? (d.gatewayId ? { type: 'gateway', gatewayId: d.gatewayId } : { type: 'ip' });
          return { status: 200, body: store.devices.list().map((d) => ({ ...deviceView(d), lastSeen: lastSeen.has(d.id) ? iso(lastSeen.get(d.id)!) : null, link: link(d) })) };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const { device, token, tokenId } = registry.createDevice(await ctx.body());
          return { status: 201, body: { ...deviceWithAssetsView(device, store), token, tokenId }, headers: { location: `/device/${device.id}` } };
        },
      },
    },
    {
      pattern: '/device/:deviceId',
      methods: {
        GET: (ctx) => ({ status: 200, body: deviceWithAssetsView(readableDevice(ctx, ctx.principal()), store) }),
        PUT: async (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: deviceWithAssetsView(registry.updateDevice(ctx.params.deviceId!, await ctx.body()), store) };
        },
        DELETE: (ctx) => {
          requireAdmin(ctx);
          registry.deleteDevice(ctx.params.deviceId!);
          return { status: 204 };
        },
      },
    },
    {
      pattern: '/device/:deviceId/token',
      methods: {
        POST: (ctx) => {
          requireAdmin(ctx);
          const { tokenId, token } = registry.rotateDeviceToken(ctx.params.deviceId!);
          return { status: 201, body: { id: tokenId, token } };
        },
      },
    },
    {
      pattern: '/device/:deviceId/assets',
      methods: {
        GET: (ctx) => {
          const device = readableDevice(ctx, ctx.principal());
          return { status: 200, body: store.assets.list(device.id).map((a) => assetView(a, store)) };
        },
        POST: async (ctx) => {
          const device = manageableDevice(ctx);
          const asset = registry.createAsset(device.id, await ctx.body());
          return {
            status: 201,
            body: assetView(asset, store),
            headers: { location: `/device/${device.id}/asset/${encodeURIComponent(asset.name)}` },
          };
        },
      },
    },
    {
      pattern: '/device/:deviceId/asset/:name',
      methods: {
        GET: (ctx) => ({ status: 200, body: assetView(readableAsset(ctx), store) }),
        PUT: async (ctx) => {
          const device = manageableDevice(ctx);
          const { asset, created } = registry.upsertAsset(device.id, ctx.params.name!, await ctx.body());
          return { status: created ? 201 : 200, body: assetView(asset, store) };
        },
        DELETE: (ctx) => {
          const device = manageableDevice(ctx);
          registry.deleteAsset(device.id, ctx.params.name!);
          return { status: 204 };
        },
      },
    },
    { pattern: '/device/:deviceId/asset/:name/state', methods: { GET: getState, PUT: putState } },
    {
      pattern: '/device/:deviceId/asset/:name/states',
      methods: {
        GET: (ctx) => {
          const asset = readableAsset(ctx);
          const cursorText = ctx.query.get('cursor') ?? ctx.query.get('next');
          const cursor = cursorText ? decodeHistoryCursor(cursorText) : undefined;
          if (cursorText && !cursor) throw new ServiceError('INVALID_QUERY', 'query "cursor" is not a cursor this service returned');
          const page = store.states.history(asset.id, {
            from: queryTime(ctx.query, 'from'),
            to: queryTime(ctx.query, 'to'),
            limit: queryLimit(ctx.query, 100, 1000),
            cursor,
          });
          const provenance = queryFlag(ctx.query, 'provenance');
          const data = page.data.map((s) => {
            const state: Record<string, unknown> = { value: JSON.parse(s.valueJson), at: iso(s.at) };
            // Which raw uplink (GET /device/<id>/uplinks `id`) and codec version a state was decoded from; null for states sent decoded.
            if (provenance) Object.assign(state, { uplink: s.uplinkSeq, codec: s.codec });
            return state;
          });
          return { status: 200, body: { data, next: page.next } };
        },
      },
    },
    { pattern: '/device/:deviceId/asset/:name/command', methods: { PUT: putCommand } },
    {
      pattern: '/device/:deviceId/state',
      methods: {
        PUT: async (ctx) => {
          const principal = ctx.principal();
          const { bytes, kind } = await ctx.rawBody(['json', 'cbor', 'binary']);
          const where = 'body';
          const outcome = await pipeline.publishDeviceState({
            principal,
            deviceId: ctx.params.deviceId!,
            decode: (device, receivedAt) => deps.decoders.decode(device, bytes, kind, where, 'http', receivedAt),
            source: 'http',
            topic: `PUT /device/${ctx.params.deviceId}/state`,
          });
          const states = Object.fromEntries(Object.entries(outcome.states).map(([name, s]) => [name, { value: s.value, at: iso(s.at) }]));
          if (outcome.refused.length > 0) {
            // Always 422: the message was understood, some of its assets were not acceptable (docs/api.md, "Device states").
            const first = outcome.refused[0]!.code;
            const shared = outcome.refused.every((r) => r.code === first) && ErrorCodes[first as ErrorCode] === 422;
            throw new ServiceError(shared ? (first as ErrorCode) : 'STATES_REFUSED', outcome.refused.map((r) => r.error).join('; '), {
              details: { states, refused: outcome.refused },
            });
          }
          return { status: 200, body: { states } };
        },
      },
    },
    {
      pattern: '/device/:deviceId/command',
      methods: {
        PUT: async (ctx) => {
          const principal = ctx.principal();
          const body = await ctx.body();
          const metaText = ctx.query.get('meta');
          let meta: unknown;
          if (metaText !== null) {
            try {
              meta = JSON.parse(metaText);
            } catch {
              throw new ServiceError('INVALID_QUERY', 'query "meta" must be a JSON object');
            }
          }
          return { status: 202, body: commands.sendDeviceCommand(principal, ctx.params.deviceId!, body, meta, 'http') };
        },
      },
    },
    {
      pattern: '/device/:deviceId/codec',
      methods: {
        GET: (ctx) => {
          const device = readableDevice(ctx, ctx.principal());
          const active = deps.codecs.get(device);
          // A JS codec that kept failing on its limits is disabled until its settings are set again.
          // Stored settings that did not load at start (a file gone bad) leave the device without one.
          const failed = active ? undefined : deps.codecs.failure(device);
          const disabled = active?.disabled
            ? { disabled: active.disabledReason ?? 'disabled after repeated resource failures' }
            : failed
              ? { disabled: `stored codec settings do not load: ${failed}` }
              : {};
          return { status: 200, body: { ...codecSettingsView(device), warnings: [], ...disabled } };
        },
        PUT: async (ctx) => {
          requireAdmin(ctx);
          const device = registry.requireDevice(ctx.params.deviceId!);
          const body = await ctx.body(['json']);
          const result = await setDeviceCodec(store, deps.codecs, deps.clock, device, body);
          catalog.invalidate();
          return { status: 200, body: result };
        },
      },
    },
    {
      pattern: '/device/:deviceId/codec/try',
      methods: {
        POST: async (ctx) => {
          requireAdmin(ctx);
          const device = registry.requireDevice(ctx.params.deviceId!);
          const request = parseTryBody(await ctx.body(['json']));
          return { status: 200, body: await tryCodec(catalog, deps.codecs, device, request) };
        },
      },
    },
    {
      pattern: '/device/:deviceId/redecode',
      methods: {
        GET: (ctx) => {
          const device = readableDevice(ctx, ctx.principal());
          const job = deps.redecode.jobs.get(device.id);
          if (!job) throw new ServiceError('NOT_FOUND', `no re-decode has run for device ${device.id}`);
          return { status: 200, body: redecodeView(job) };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const device = registry.requireDevice(ctx.params.deviceId!);
          const job = deps.redecode.start(device, parseRedecodeBody(await ctx.body(['json'])));
          return { status: 202, body: redecodeView(job), headers: { location: `/device/${device.id}/redecode` } };
        },
      },
    },
    {
      pattern: '/device/:deviceId/uplinks',
      methods: {
        GET: (ctx) => {
          const device = readableDevice(ctx, ctx.principal());
          const cursor = ctx.query.get('cursor') ?? ctx.query.get('next');
          if (cursor !== null && !/^\d+$/.test(cursor)) throw new ServiceError('INVALID_QUERY', 'query "cursor" is not a cursor this service returned');
          const page = store.uplinks.list(device.id, queryLimit(ctx.query, 20, 1000), cursor === null ? undefined : Number(cursor));
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
        },
      },
    },
    {
      pattern: '/device/:deviceId/lorawan',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: requireLorawan().get(registry.requireDevice(ctx.params.deviceId!).id) };
        },
        PUT: async (ctx) => {
          requireAdmin(ctx);
          const device = registry.requireDevice(ctx.params.deviceId!);
          return { status: 200, body: requireLorawan().put(device.id, await ctx.body(['json'])) };
        },
        DELETE: (ctx) => {
          requireAdmin(ctx);
          requireLorawan().delete(registry.requireDevice(ctx.params.deviceId!).id);
          return { status: 204 };
        },
      },
    },
    {
      pattern: '/device/:deviceId/downlinks',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: requireLorawan().downlinks(registry.requireDevice(ctx.params.deviceId!).id) };
        },
      },
    },
    { pattern: '/asset/:assetId', methods: { GET: (ctx) => ({ status: 200, body: assetView(readableAsset(ctx), store) }) } },
    { pattern: '/asset/:assetId/state', methods: { GET: getState, PUT: putState } },
    { pattern: '/asset/:assetId/command', methods: { PUT: putCommand } },
    {
      pattern: '/tokens',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: store.tokens.list().map(tokenView) };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const { token, secret } = registry.createAppToken(await ctx.body());
          return { status: 201, body: { ...tokenView(token), token: secret } };
        },
      },
    },
    {
      pattern: '/tokens/:tokenId',
      methods: {
        DELETE: (ctx) => {
          requireAdmin(ctx);
          registry.revokeToken(ctx.params.tokenId!);
          return { status: 204 };
        },
      },
    },
  ];
}
