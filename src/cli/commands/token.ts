import { tokenView } from '../../registry/views.js';
import { managementArgs, requireArg, runVerb, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { withCatalogWrites, withRegistry } from '../open.js';
import { formatTable } from '../table.js';

/** `outpost token create|list|revoke`: application tokens (and revoking any token). */
export const command: CliCommand = {
  usage: ['  token create --name N --scopes read,command,admin [--json]', '  token list [--json]', '  token revoke <TokenID>'].join('\n'),
  run: (args, argv, out) => runVerb(managementArgs(args, argv, out), { create: createToken, list: listTokens, revoke: revokeToken }),
};

function createToken({ config, values, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry) => {
    const { token, secret } = await registry.write(() => registry.createAppToken({ name: values.name, scopes: values.scopes }));
    show({ id: token.id, token: secret }, () => `token ${token.id} created with scopes ${token.scopes.join(',')}\ntoken: ${secret}\n(the token is shown only now; keep it)`);
    return 0;
  });
}

function listTokens({ config, show }: ManagementArgs): number {
  return withRegistry(config, (_r, store) => {
    const tokens = store.tokens.list().map(tokenView);
    show(tokens, () => formatTable(['ID', 'KIND', 'NAME', 'DEVICE', 'SCOPES', 'REVOKED'], tokens.map((t) => [t.id, t.kind, t.name, t.deviceId, t.scopes.join(','), t.revokedOn])));
    return 0;
  });
}

function revokeToken({ config, positionals, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry) => {
    const id = requireArg(positionals, 1, '<TokenID>');
    await registry.write(() => registry.revokeToken(id));
    show({ revoked: id }, () => `token ${id} revoked`);
    return 0;
  });
}
