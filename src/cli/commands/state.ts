import { managementArgs, requireArg, runVerb, UsageError, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { withRegistry } from '../open.js';
import { latestStates } from '../states-source.js';

/** `outpost state get`: an asset's latest state. */
export const command: CliCommand = {
  usage: '  state get <DeviceID> <AssetName> [--json]',
  run: (args, argv, out) => runVerb(managementArgs(args, argv, out), { get: getState }),
};

async function getState({ config, positionals, show }: ManagementArgs): Promise<number> {
  const deviceId = requireArg(positionals, 1, '<DeviceID>');
  const name = requireArg(positionals, 2, '<AssetName>');
  const { asset, local } = withRegistry(config, (registry, store) => {
    registry.requireDevice(deviceId);
    const asset = store.assets.byName(deviceId, name);
    if (!asset) throw new UsageError(`asset "${name}" not found on device ${deviceId}`);
    return { asset, local: store.states.latestOf([asset.id]) };
  });
  const latest = (await latestStates(config, [asset.id], local)).get(asset.id);
  const state = latest ? { value: JSON.parse(latest.valueJson) as unknown, at: new Date(latest.at).toISOString() } : null;
  show({ id: asset.id, state }, () => (state ? `${name} = ${JSON.stringify(state.value)}  at ${state.at}` : `${name} has no state yet`));
  return 0;
}
