import { ServiceError } from '../../../core/errors.js';
import type { LorawanProvisioning } from '../../../lpwan/provisioning.js';
import { requireAdmin } from '../access.js';
import type { Route } from '../router.js';
import { adminDevice, type ApiDeps } from './deps.js';

/**
 * A device's LoRaWAN settings and downlink queue (admin; docs/lpwan.md); 404 where the radio side
 * is not running. Each method checks rights, radio and device in the order it always has.
 */
export function lorawanRoutes(deps: ApiDeps): Route[] {
  const requireLorawan = (): LorawanProvisioning => {
    if (!deps.lorawan) throw new ServiceError('NOT_FOUND', 'the radio side is not running in this instance');
    return deps.lorawan;
  };
  return [
    {
      pattern: '/device/:deviceId/lorawan',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: requireLorawan().get(deps.registry.requireDevice(ctx.params.deviceId!).id) };
        },
        PUT: async (ctx) => {
          const device = adminDevice(deps, ctx);
          deps.registry.assertLocallyEditable(device.id);
          const body = await ctx.body(['json']);
          const lorawan = requireLorawan();
          return { status: 200, body: await deps.registry.write(() => lorawan.put(device.id, body)) };
        },
        DELETE: async (ctx) => {
          requireAdmin(ctx);
          const device = deps.registry.requireDevice(ctx.params.deviceId!);
          deps.registry.assertLocallyEditable(device.id);
          const lorawan = requireLorawan();
          await deps.registry.write(() => lorawan.delete(device.id));
          return { status: 204 };
        },
      },
    },
    {
      pattern: '/device/:deviceId/downlinks',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: requireLorawan().downlinks(deps.registry.requireDevice(ctx.params.deviceId!).id) };
        },
      },
    },
  ];
}
