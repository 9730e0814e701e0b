import { requireAdmin } from '../access.js';
import type { Route } from '../router.js';
import type { StationRegistry } from '../../basic-station/registry.js';

/**
 * LoRa Basics Stations (admin scope; docs/api.md, docs/lpwan.md): `GET/POST /stations`,
 * `DELETE /station/<EUI>` (a connected station's socket is closed).
 */
export function stationRoutes(stations: StationRegistry): Route[] {
  return [
    {
      pattern: '/stations',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: stations.list() };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const { station, token } = stations.create(await ctx.body());
          return { status: 201, body: { ...station, token } };
        },
      },
    },
    {
      pattern: '/station/:eui',
      methods: {
        DELETE: (ctx) => {
          requireAdmin(ctx);
          stations.delete(ctx.params.eui!);
          return { status: 204 };
        },
      },
    },
  ];
}
