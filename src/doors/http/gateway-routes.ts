import { ServiceError } from '../../core/errors.js';
import { isJsonObject, memberIgnoringCase } from '../../core/json.js';
import type { GatewayRegistry } from '../../sync/central/gateway-registry.js';
import { gatewayView } from '../../sync/central/gateway-registry.js';
import type { FleetConfig } from '../../sync/central/fleet-config.js';
import { readDeviceWithAssetsView } from '../../registry/views.js';
import type { Store } from '../../store/store.js';
import type { StateReads } from '../../store/state-reads.js';
import type { Route } from './router.js';
import { requireAdmin } from './access.js';

/**
 * The central's gateways (docs/sync.md): `GET/POST /gateways`, `GET/DELETE /gateway/<id>`, and
 * `PUT /device/<id>/gateway` (a managed device's gateway, or none); admin scope.
 */
export function gatewayRoutes(
  gateways: GatewayRegistry,
  connected: (gatewayId: string) => boolean,
  fleet: FleetConfig,
  { store, states }: { store: Store; states: StateReads },
  deleted: (gatewayId: string) => void = () => {},
): Route[] {
  const view = async (id: string) => {
    const gateway = gateways.require(id);
    return gatewayView(gateway, gateways.store.deviceIds(id), connected(id), await fleet.summary(id));
  };
  return [
    {
      pattern: '/gateways',
      methods: {
        GET: async (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: await Promise.all(gateways.store.list().map((g) => view(g.id))) };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const body = await ctx.body();
          const { gateway, token, tokenId } = await gateways.write(() => gateways.create(body));
          return { status: 201, body: { ...(await view(gateway.id)), token, tokenId }, headers: { location: `/gateway/${gateway.id}` } };
        },
      },
    },
    {
      pattern: '/gateway/:gatewayId',
      methods: {
        GET: async (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: await view(ctx.params.gatewayId!) };
        },
        DELETE: async (ctx) => {
          requireAdmin(ctx);
          await gateways.write(() => gateways.delete(ctx.params.gatewayId!));
          deleted(ctx.params.gatewayId!);
          return { status: 204 };
        },
      },
    },
    {
      pattern: '/device/:deviceId/gateway',
      methods: {
        PUT: async (ctx) => {
          requireAdmin(ctx);
          const body = await ctx.body();
          const gateway = isJsonObject(body) ? memberIgnoringCase(body, 'gateway') : undefined;
          if (gateway !== null && typeof gateway !== 'string') throw new ServiceError('INVALID_BODY', 'body must be {"gateway": "<GatewayID>"} or {"gateway": null}');
          await fleet.assign(ctx.params.deviceId!, gateway);
          const device = store.devices.get(ctx.params.deviceId!)!;
          return { status: 200, body: await readDeviceWithAssetsView(device, store, states) };
        },
      },
    },
  ];
}
