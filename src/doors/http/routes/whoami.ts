import type { Principal } from '../../../core/access.js';
import type { Route } from '../router.js';

/** What `GET /whoami` shows: enough for a client to know what its token may do, never a secret. */
export function whoamiView(p: Principal) {
  return { tokenId: p.tokenId, kind: p.kind, deviceId: p.deviceId, scopes: p.scopes };
}

/** `GET /whoami`: any valid token (the console asks it first). */
export function whoamiRoutes(): Route[] {
  return [{ pattern: '/whoami', methods: { GET: (ctx) => ({ status: 200, body: whoamiView(ctx.principal()) }) } }];
}
