import type { GatewayRegistry } from '../../sync/central/gateway-registry.js';
import { gatewayView } from '../../sync/central/gateway-registry.js';
import type { Route } from './router.js';
import { requireAdmin } from './access.js';

/** The central's gateways (docs/sync.md): `GET/POST /gateways`, `GET/DELETE /gateway/<id>`; admin scope. */
export function gatewayRoutes(gateways: GatewayRegistry, connected: (gatewayId: string) => boolean): Route[] {
  const view = (id: string) => {
    const gateway = gateways.require(id);
    return gatewayView(gateway, gateways.store.deviceIds(id), connected(id));
  };
  return [
    {
      pattern: '/gateways',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: gateways.store.list().map((g) => view(g.id)) };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const { gateway, token, tokenId } = gateways.create(await ctx.body());
          return { status: 201, body: { ...view(gateway.id), token, tokenId }, headers: { location: `/gateway/${gateway.id}` } };
        },
      },
    },
    {
      pattern: '/gateway/:gatewayId',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: view(ctx.params.gatewayId!) };
        },
        DELETE: (ctx) => {
          requireAdmin(ctx);
          gateways.delete(ctx.params.gatewayId!);
          return { status: 204 };
        },
      },
    },
  ];
}
