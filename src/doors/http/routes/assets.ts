import { assetView, deviceAssetsView } from '../../../registry/views.js';
import type { Route } from '../router.js';
import { manageableDevice, readableAsset, readableDevice, type ApiDeps } from './deps.js';

/** A device's assets: `/device/<id>/assets`, `/device/<id>/asset/<name>`, `/asset/<assetId>` (docs/api.md, "Paths"). */
export function assetRoutes(deps: ApiDeps): Route[] {
  const { registry } = deps;
  const store = deps.store;
  return [
    {
      pattern: '/device/:deviceId/assets',
      methods: {
        GET: (ctx) => {
          const device = readableDevice(deps, ctx);
          return { status: 200, body: deviceAssetsView(device.id, store) };
        },
        POST: async (ctx) => {
          const device = manageableDevice(deps, ctx);
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
        GET: (ctx) => ({ status: 200, body: assetView(readableAsset(deps, ctx), store) }),
        PUT: async (ctx) => {
          const device = manageableDevice(deps, ctx);
          const { asset, created } = registry.upsertAsset(device.id, ctx.params.name!, await ctx.body());
          return { status: created ? 201 : 200, body: assetView(asset, store) };
        },
        DELETE: (ctx) => {
          const device = manageableDevice(deps, ctx);
          registry.deleteAsset(device.id, ctx.params.name!);
          return { status: 204 };
        },
      },
    },
    { pattern: '/asset/:assetId', methods: { GET: (ctx) => ({ status: 200, body: assetView(readableAsset(deps, ctx), store) }) } },
  ];
}
