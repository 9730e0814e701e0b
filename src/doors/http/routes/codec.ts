import { ServiceError } from '../../../core/errors.js';
import { hexToBytes } from '../../../codec/hex.js';
import { codecSettingsView, parseCodecSettings } from '../../../device-codecs/device-codecs.js';
import { parseTryBody, tryCodec, TryCancelled } from '../../../device-codecs/codec-try.js';
import { requireAdmin } from '../access.js';
import type { RequestContext, Route } from '../router.js';
import { adminDevice, readableDevice, type ApiDeps } from './deps.js';
import { isJsonObject, memberIgnoringCase } from '../../../core/json.js';

/**
 * Codecs (docs/codecs.md): a device's settings (`/device/<id>/codec`), trying a candidate on its
 * kept uplinks (`…/codec/try`), and decoding one payload with an unsaved codec (`/codec/decode`).
 */
export function codecRoutes(deps: ApiDeps): Route[] {
  return [
    {
      pattern: '/device/:deviceId/codec',
      methods: {
        GET: (ctx) => getCodecSettings(deps, ctx),
        PUT: async (ctx) => {
          const device = adminDevice(deps, ctx);
          const body = await ctx.body(['json']);
          return { status: 200, body: await deps.registry.setDeviceCodec(deps.codecs, device, body) };
        },
      },
    },
    {
      pattern: '/device/:deviceId/codec/try',
      methods: {
        POST: async (ctx) => {
          const device = adminDevice(deps, ctx);
          const request = parseTryBody(await ctx.body(['json']));
          // A try takes a while with a slow codec (it runs in slices); a client that left stops it.
          let gone = false;
          ctx.res.once('close', () => (gone = true));
          try {
            const report = await tryCodec(deps.catalog, deps.store.redecodeJobs, deps.codecs, device, request, { maxBytes: deps.pageBytes(), cancelled: () => gone });
            return { status: 200, body: report };
          } catch (err) {
            if (err instanceof TryCancelled) return { status: 200, written: true };
            throw err;
          }
        },
      },
    },
    { pattern: '/codec/decode', methods: { POST: (ctx) => decodeWithUnsavedCodec(deps, ctx) } },
  ];
}

function getCodecSettings(deps: ApiDeps, ctx: RequestContext) {
  const device = readableDevice(deps, ctx);
  const active = deps.codecs.get(device);
  // A JS codec that kept failing on its limits is disabled until its settings are set again.
  // Stored settings that did not load at start (a file gone bad) leave the device without one.
  const failed = active ? undefined : deps.codecs.failure(device);
  const disabled = active?.disabled
    ? { disabled: active.disabledReason ?? 'disabled after repeated resource failures' }
    : failed
      ? { disabled: `stored codec settings do not load: ${failed}` }
      : {};
  return { status: 200, body: { ...codecSettingsView(device), warnings: [], ...disabled } };
}

/**
 * `POST /codec/decode` (admin): compiles a codec that is not saved anywhere and decodes one hex
 * payload with it, in the same sandbox and limits as a device's live codec. It is `outpost codec
 * decode` over HTTP, for trying a codec from the console before setting it on a device.
 */
async function decodeWithUnsavedCodec(deps: ApiDeps, ctx: RequestContext) {
  requireAdmin(ctx, 'trying a codec needs an application token with the "admin" scope');
  const body = await ctx.body(['json']);
  if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', 'body must be {"uplink": {...}, "payload": "<hex>", "port"?}');
  const hex = memberIgnoringCase(body, 'payload');
  const bytes = typeof hex === 'string' ? hexToBytes(hex.replace(/\s+/g, '')) : undefined;
  if (!bytes) throw new ServiceError('INVALID_BODY', '"payload" must be hex digits in pairs (e.g. "0A1B")');
  const port = memberIgnoringCase(body, 'port');
  if (port !== undefined && port !== null && (!Number.isInteger(port) || (port as number) < 0 || (port as number) > 255)) {
    throw new ServiceError('INVALID_BODY', '"port" must be an integer from 0 to 255');
  }
  const { codec, warnings } = await deps.codecs.compile(parseCodecSettings({ uplink: memberIgnoringCase(body, 'uplink') }));
  try {
    const result = codec.decodeUplink(bytes, { fPort: (port as number | undefined) ?? undefined, receivedAt: new Date() });
    return { status: 200, body: { states: result.states, warnings: [...warnings, ...result.warnings], errors: result.errors } };
  } finally {
    codec.dispose();
  }
}
