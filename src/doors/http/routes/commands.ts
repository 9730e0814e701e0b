import { queryJson } from '../query.js';
import type { RequestContext, Route } from '../router.js';
import { assetTarget, type ApiDeps } from './deps.js';

/** Commands to an actuator (`…/asset/<name>/command`, `/asset/<id>/command`) or to a device (docs/api.md, "Paths"). */
export function commandRoutes(deps: ApiDeps): Route[] {
  const { commands } = deps;
  const putAssetCommand = async (ctx: RequestContext) => {
    const principal = ctx.principal();
    const body = await ctx.body();
    return { status: 202, body: commands.sendAssetCommand({ principal, via: 'http', target: assetTarget(ctx), body }) };
  };
  return [
    { pattern: '/device/:deviceId/asset/:name/command', methods: { PUT: putAssetCommand } },
    { pattern: '/asset/:assetId/command', methods: { PUT: putAssetCommand } },
    {
      pattern: '/device/:deviceId/command',
      methods: {
        PUT: async (ctx) => {
          const principal = ctx.principal();
          const body = await ctx.body();
          const meta = queryJson(ctx.query, 'meta');
          return { status: 202, body: commands.sendDeviceCommand({ principal, via: 'http', deviceId: ctx.params.deviceId!, body, meta }) };
        },
      },
    },
  ];
}
