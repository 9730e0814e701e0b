import { ErrorCodes, ServiceError, type ErrorCode } from '../../../core/errors.js';
import { authorizeDeviceState } from '../../../ingest/uplinks.js';
import type { RequestContext, Route } from '../router.js';
import { iso, type ApiDeps } from './deps.js';

/** `PUT /device/<id>/state`: several assets in one message, or the device's own binary payload (docs/api.md, "Device states"). */
export function deviceStateRoutes(deps: ApiDeps): Route[] {
  return [{ pattern: '/device/:deviceId/state', methods: { PUT: (ctx) => putDeviceState(deps, ctx) } }];
}

async function putDeviceState(deps: ApiDeps, ctx: RequestContext) {
  const principal = ctx.principal();
  const { bytes, kind } = await ctx.rawBody(['json', 'cbor', 'binary']);
  const deviceId = ctx.params.deviceId!;
  authorizeDeviceState(deps.catalog, principal, deviceId);
  const outcome = await deps.pipeline.ingest({
    deviceId,
    via: 'http',
    // application/octet-stream: the device's codec reads it.
    payload: { bytes, format: kind === 'binary' ? 'codec' : kind },
    label: 'body',
    topic: `PUT /device/${deviceId}/state`,
    resent: principal.kind === 'gateway',
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
}
