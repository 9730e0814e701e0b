import { assetView, deviceAssetsView } from '../../registry/views.js';
import { managementArgs, requireArg, runVerb, UsageError, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { withCatalogWrites, withRegistry } from '../open.js';
import { latestStates } from '../states-source.js';
import { formatTable } from '../table.js';

/** `outpost asset create|list`: a device's assets. */
export const command: CliCommand = {
  usage: [
    "  asset create <DeviceID> --name N --is sensor|actuator|virtual|config --profile '<json>' [--json]",
    '  asset list <DeviceID> [--json]',
  ].join('\n'),
  run: (args, argv, out) => runVerb(managementArgs(args, argv, out), { create: createAsset, list: listAssets }),
};

function createAsset({ config, positionals, values, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry) => {
    const deviceId = requireArg(positionals, 1, '<DeviceID>');
    if (!values.profile) throw new UsageError('missing --profile');
    let profile: unknown;
    try {
      profile = JSON.parse(values.profile);
    } catch {
      throw new UsageError('--profile must be JSON, e.g. \'{"type":"integer"}\'');
    }
    const asset = await registry.write(() => registry.createAsset(deviceId, { name: values.name, is: values.is ?? 'sensor', profile, title: values.title }));
    show(assetView(asset, undefined), () => `asset ${asset.name} (${asset.id}) created on device ${deviceId}`);
    return 0;
  });
}

async function listAssets({ config, positionals, show }: ManagementArgs): Promise<number> {
  const { records, local } = withRegistry(config, (registry, store) => {
    const device = registry.requireDevice(requireArg(positionals, 1, '<DeviceID>'));
    return { records: store.assets.list(device.id), local: store.states.latestOfDevice(device.id) };
  });
  const assets = deviceAssetsView(records, await latestStates(config, records.map((a) => a.id), local));
  show(assets, () => formatTable(['ID', 'NAME', 'IS', 'PROFILE'], assets.map((a) => [a.id, a.name, a.is, JSON.stringify(a.profile)])));
  return 0;
}
