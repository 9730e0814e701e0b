import { canReadAny } from '../../../core/access.js';
import type { DeviceRecord } from '../../../core/model.js';
import { deviceView, eachDeviceAssetView, readDeviceWithAssetsView } from '../../../registry/views.js';
import { streamJson } from '../json-stream.js';
import { forbid, requireAdmin } from '../access.js';
import type { RequestContext, Route } from '../router.js';
import { iso, readableDevice, type ApiDeps } from './deps.js';

/** `/devices`, `/device/<id>` and `/device/<id>/token` (docs/api.md, "Paths"). */
export function deviceRoutes(deps: ApiDeps): Route[] {
  const { registry } = deps;
  const store = deps.store;
  return [
    { pattern: '/devices', methods: { GET: (ctx) => listDevices(deps, ctx), POST: (ctx) => createDevice(deps, ctx) } },
    {
      pattern: '/device/:deviceId',
      methods: {
        GET: async (ctx) => {
          const device = readableDevice(deps, ctx);
          // The device, then its assets streamed one by one: their latest values may be large (see streamJson).
          const head = JSON.stringify({ ...deviceView(device), link: deviceLinks(deps).of(device), managed: managedState(deps, device.id) });
          await streamJson(ctx.res, `${head.slice(0, -1)},"assets":[`, eachDeviceAssetView(device.id, store, deps.states), ']}');
          return { status: 200, written: true };
        },
        PUT: async (ctx) => {
          requireAdmin(ctx);
          const body = await ctx.body();
          return { status: 200, body: await readDeviceWithAssetsView(await registry.write(() => registry.updateDevice(ctx.params.deviceId!, body)), store, deps.states) };
        },
        DELETE: async (ctx) => {
          requireAdmin(ctx);
          await registry.write(() => registry.deleteDevice(ctx.params.deviceId!));
          return { status: 204 };
        },
      },
    },
    {
      pattern: '/device/:deviceId/token',
      methods: {
        POST: async (ctx) => {
          requireAdmin(ctx);
          const { tokenId, token } = await registry.write(() => registry.rotateDeviceToken(ctx.params.deviceId!));
          return { status: 201, body: { id: tokenId, token } };
        },
      },
    },
  ];
}

async function listDevices(deps: ApiDeps, ctx: RequestContext) {
  if (!canReadAny(ctx.principal())) forbid('listing devices needs an application token with the "read" scope');
  const store = deps.store;
  const lastSeen = await deps.states.lastSeenByDevice((assetId) => deps.catalog.assetById(assetId)?.deviceId);
  const links = deviceLinks(deps);
  return { status: 200, body: store.devices.list().map((d) => ({ ...deviceView(d), lastSeen: lastSeen.has(d.id) ? iso(lastSeen.get(d.id)!) : null, link: links.of(d) })) };
}

/**
 * How each device reaches this instance (docs/api.md, "Paths"): by radio (`lorawan`, with its last
 * uplink's signal), through a gateway (central role: `gateway`, with the gateway's name so a
 * reader need not be allowed to list gateways), or over IP. Read once per request.
 */
function deviceLinks(deps: ApiDeps) {
  const radioLinks = deps.lorawan?.links() ?? new Map<string, unknown>();
  const gatewayNames = new Map<string, string>();
  const gatewayName = (id: string) => {
    if (!gatewayNames.has(id)) gatewayNames.set(id, deps.store.gateways.get(id)?.name ?? id);
    return gatewayNames.get(id)!;
  };
  return {
    // Behind a gateway first: a central runs no radio, so a managed LoRaWAN device's settings there say nothing of how it is heard.
    of: (d: DeviceRecord) => (d.gatewayId ? { type: 'gateway', gatewayId: d.gatewayId, gatewayName: gatewayName(d.gatewayId) } : (radioLinks.get(d.id) ?? { type: 'ip' })),
  };
}

/**
 * Whether the device is managed from a central (docs/sync.md "Manage a fleet from the central"), for
 * its page: at a central the definition's newest revision, the one its gateway applied and when
 * (null before the first); at a gateway the revision it applied. Null when not managed.
 */
function managedState(deps: ApiDeps, deviceId: string) {
  const atCentral = deps.store.fleet.live(deviceId);
  if (atCentral) return { revision: atCentral.revision, appliedRevision: atCentral.appliedRevision, appliedAt: atCentral.appliedAt === null ? null : iso(atCentral.appliedAt) };
  const here = deps.store.managedHere.get(deviceId);
  return here && !here.deleted ? { revision: here.revision } : null;
}

async function createDevice(deps: ApiDeps, ctx: RequestContext) {
  requireAdmin(ctx);
  const body = await ctx.body();
  const { device, token, tokenId } = await deps.registry.write(() => deps.registry.createDevice(body));
  return { status: 201, body: { ...(await readDeviceWithAssetsView(device, deps.store, deps.states)), token, tokenId }, headers: { location: `/device/${device.id}` } };
}
