import { eachDeviceAssetView, readAssetView } from '../../../registry/views.js';
import { streamJson } from '../json-stream.js';
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
        GET: async (ctx) => {
          const device = readableDevice(deps, ctx);
          // Streamed: up to 1 024 latest values of up to 64 KiB each (docs/api.md, "Pages").
          await streamJson(ctx.res, '[', eachDeviceAssetView(device.id, store, deps.states), ']');
          return { status: 200, written: true };
        },
        POST: async (ctx) => {
          const device = manageableDevice(deps, ctx);
          const body = await ctx.body();
          const asset = await registry.write(() => registry.createAsset(device.id, body));
          return {
            status: 201,
            body: await readAssetView(asset, deps.states),
            headers: { location: `/device/${device.id}/asset/${encodeURIComponent(asset.name)}` },
          };
        },
      },
    },
    {
      pattern: '/device/:deviceId/asset/:name',
      methods: {
        GET: async (ctx) => ({ status: 200, body: await readAssetView(readableAsset(deps, ctx), deps.states) }),
        PUT: async (ctx) => {
          const device = manageableDevice(deps, ctx);
          const body = await ctx.body();
          const { asset, created } = await registry.write(() => registry.upsertAsset(device.id, ctx.params.name!, body));
          return { status: created ? 201 : 200, body: await readAssetView(asset, deps.states) };
        },
        DELETE: async (ctx) => {
          const device = manageableDevice(deps, ctx);
          await registry.write(() => registry.deleteAsset(device.id, ctx.params.name!));
          return { status: 204 };
        },
      },
    },
    { pattern: '/asset/:assetId', methods: { GET: async (ctx) => ({ status: 200, body: await readAssetView(readableAsset(deps, ctx), deps.states) }) } },
  ];
}
