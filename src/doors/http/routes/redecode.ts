import { ServiceError } from '../../../core/errors.js';
import { parseRedecodeBody, redecodeView } from '../../../device-codecs/redecode.js';
import type { Route } from '../router.js';
import { adminDevice, readableDevice, type ApiDeps } from './deps.js';

/** `/device/<id>/redecode`: start a re-decode of the kept raw uplinks (admin) and follow it (docs/codecs.md). */
export function redecodeRoutes(deps: ApiDeps): Route[] {
  return [
    {
      pattern: '/device/:deviceId/redecode',
      methods: {
        GET: (ctx) => {
          const device = readableDevice(deps, ctx);
          const job = deps.redecode.jobs.get(device.id);
          if (!job) throw new ServiceError('NOT_FOUND', `no re-decode has run for device ${device.id}`);
          return { status: 200, body: redecodeView(job) };
        },
        POST: async (ctx) => {
          const device = adminDevice(deps, ctx);
          const job = deps.redecode.start(device, parseRedecodeBody(await ctx.body(['json'])));
          return { status: 202, body: redecodeView(job), headers: { location: `/device/${device.id}/redecode` } };
        },
      },
    },
  ];
}
