import { tokenView } from '../../../registry/views.js';
import { requireAdmin } from '../access.js';
import type { Route } from '../router.js';
import type { ApiDeps } from './deps.js';

/** Application tokens: `GET/POST /tokens`, `DELETE /tokens/<id>` (admin; docs/api.md, "Paths"). */
export function tokenRoutes(deps: ApiDeps): Route[] {
  const { registry } = deps;
  return [
    {
      pattern: '/tokens',
      methods: {
        GET: (ctx) => {
          requireAdmin(ctx);
          return { status: 200, body: deps.store.tokens.list().map(tokenView) };
        },
        POST: async (ctx) => {
          requireAdmin(ctx);
          const body = await ctx.body();
          const { token, secret } = await registry.write(() => registry.createAppToken(body));
          return { status: 201, body: { ...tokenView(token), token: secret } };
        },
      },
    },
    {
      pattern: '/tokens/:tokenId',
      methods: {
        DELETE: async (ctx) => {
          requireAdmin(ctx);
          await registry.write(() => registry.revokeToken(ctx.params.tokenId!));
          return { status: 204 };
        },
      },
    },
  ];
}
