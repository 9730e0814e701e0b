import { ServiceError } from '../core/errors.js';
import { isAdmin } from '../core/access.js';
import { hexToBytes } from '../codec/hex.js';
import { parseCodecSettings, type DeviceCodecs } from '../device-codecs/device-codecs.js';
import { isPlainObject, member } from '../ingest/messages.js';
import type { Route } from '../doors/http/router.js';

/**
 * `POST /codec/decode` (admin): compiles a codec that is not saved anywhere and decodes one hex
 * payload with it, in the same sandbox and limits as a device's live codec. It is `outpost codec
 * decode` over HTTP, for trying a codec from the console before setting it on a device.
 */
export function codecTrialRoute(codecs: DeviceCodecs): Route {
  return {
    pattern: '/codec/decode',
    methods: {
      POST: async (ctx) => {
        if (!isAdmin(ctx.principal())) throw new ServiceError('FORBIDDEN', 'trying a codec needs an application token with the "admin" scope');
        const body = await ctx.body(['json']);
        if (!isPlainObject(body)) throw new ServiceError('INVALID_BODY', 'body must be {"uplink": {...}, "payload": "<hex>", "port"?}');
        const hex = member(body, 'payload');
        const bytes = typeof hex === 'string' ? hexToBytes(hex.replace(/\s+/g, '')) : undefined;
        if (!bytes) throw new ServiceError('INVALID_BODY', '"payload" must be hex digits in pairs (e.g. "0A1B")');
        const port = member(body, 'port');
        if (port !== undefined && port !== null && (!Number.isInteger(port) || (port as number) < 0 || (port as number) > 255)) {
          throw new ServiceError('INVALID_BODY', '"port" must be an integer from 0 to 255');
        }
        const { codec, warnings } = await codecs.compile(parseCodecSettings({ uplink: member(body, 'uplink') }));
        try {
          const result = codec.decodeUplink(bytes, { fPort: (port as number | undefined) ?? undefined, receivedAt: new Date() });
          return { status: 200, body: { states: result.states, warnings: [...warnings, ...result.warnings], errors: result.errors } };
        } finally {
          codec.dispose();
        }
      },
    },
  };
}
