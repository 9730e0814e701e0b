import { systemClock } from '../../core/time.js';
import { GatewayRegistry, gatewayView } from '../../sync/central/gateway-registry.js';
import { managementArgs, runVerb, UsageError, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { withCatalogWrites } from '../open.js';
import { formatTable } from '../table.js';
import type { FleetStore } from '../../store/fleet.js';

/**
 * `outpost gateway create|list|delete` (docs/sync.md): works on any data directory and while the
 * daemon runs; only a daemon with role "central" lets gateways connect.
 */
export const command: CliCommand = {
  usage: [
    '  gateway create --name N [--json]                  (central) a gateway and its token (shown once)',
    '  gateway list [--json]                             (central)',
    '  gateway delete <GatewayID>                        (central) revokes its token; its devices stay',
  ].join('\n'),
  run(args, argv, out) {
    const a = managementArgs(args, argv, out);
    return withCatalogWrites(a.config, (registry, store, catalog) => {
      const gateways = new GatewayRegistry(catalog, registry, store.gateways, systemClock);
      const verbs = {
        create: () => createGateway(a, gateways),
        list: () => listGateways(a, gateways, store.fleet),
        delete: () => deleteGateway(a, gateways),
      };
      return runVerb(a, verbs, `unknown command: gateway ${a.sub ?? ''}`);
    });
  },
};

async function createGateway({ values, show }: ManagementArgs, gateways: GatewayRegistry): Promise<number> {
  const { gateway, token } = await gateways.write(() => gateways.create({ name: values.name ?? 'gateway' }));
  show({ id: gateway.id, token }, () => `gateway ${gateway.id} created\ntoken: ${token}\n(the token is shown only now; put both in the gateway's upstream config)`);
  return 0;
}

function listGateways({ show }: ManagementArgs, gateways: GatewayRegistry, fleet: FleetStore): number {
  // Whether a gateway is connected only the running daemon knows (GET /gateways); lastSeen is on disk.
  const list = gateways.store.list().map((g) => gatewayView(g, gateways.store.deviceIds(g.id), false, fleet.summary(g.id)));
  show(
    list.map(({ connected: _c, ...rest }) => rest),
    () => formatTable(['ID', 'NAME', 'DEVICES', 'LAST SEEN'], list.map((g) => [g.id, g.name, g.devices.length, g.lastSeen])),
  );
  return 0;
}

async function deleteGateway({ positionals, show }: ManagementArgs, gateways: GatewayRegistry): Promise<number> {
  const id = positionals[1];
  if (!id) throw new UsageError('missing <GatewayID>');
  await gateways.write(() => gateways.delete(id));
  show({ deleted: id }, () => `gateway ${id} deleted (its token is revoked; its devices stay)`);
  return 0;
}
