import { deviceWithAssetsView } from '../../registry/views.js';
import { managementArgs, requireArg, runVerb, UsageError, type ManagementArgs } from '../args.js';
import { FleetConfig } from '../../sync/central/fleet-config.js';
import { SqliteManagedRevisions } from '../../sync/central/ports.js';
import { systemClock } from '../../core/time.js';
import { createLogger } from '../../ops/logger.js';
import type { CliCommand } from '../command.js';
import { withCatalogWrites, withRegistry } from '../open.js';
import { deleteDeviceStates, latestStates } from '../states-source.js';
import { formatTable } from '../table.js';
import { deviceCodec, DEVICE_CODEC_USAGE } from './device-codec.js';
import { deviceRedecode, DEVICE_REDECODE_USAGE } from './device-redecode.js';
import { deviceLorawan, DEVICE_LORAWAN_USAGE } from './device-lorawan.js';

/** `outpost device …`: register, list, show, delete devices; their token, codec, history and radio settings. */
export const command: CliCommand = {
  usage: [
    '  device create --name N [--title T] [--id ID] [--gateway GatewayID] [--json]',
    '                                                    register a device; prints its ID and token (once)',
    '  device list [--json]',
    '  device show <DeviceID> [--json]',
    '  device delete <DeviceID>',
    '  device token <DeviceID> [--json]                  issue a new device token, revoking the old one',
    '  device assign <DeviceID> <GatewayID> | --none     (central) manage the device from here on that gateway, or on none',
    DEVICE_CODEC_USAGE,
    DEVICE_REDECODE_USAGE,
    DEVICE_LORAWAN_USAGE,
  ].join('\n'),
  run: (args, argv, out) =>
    runVerb(managementArgs(args, argv, out), { create: createDevice, list: listDevices, show: showDevice, delete: deleteDevice, token: rotateToken, assign: assignDevice, codec: deviceCodec, redecode: deviceRedecode, lorawan: deviceLorawan }),
};

function createDevice({ config, values, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry) => {
    const { device, token } = await registry.write(() => registry.createDevice({ name: values.name ?? 'device', title: values.title, id: values.id, gateway: values.gateway }));
    show({ id: device.id, token }, () => `device ${device.id} created\ntoken: ${token}\n(the token is shown only now; keep it)`);
    return 0;
  });
}

async function listDevices({ config, show }: ManagementArgs): Promise<number> {
  const { devices, local } = withRegistry(config, (_r, store) => {
    const devices = store.devices.list().map((device) => ({ device, assets: store.assets.list(device.id) }));
    return { devices, local: new Map(devices.flatMap(({ device }) => [...store.states.latestOfDevice(device.id)])) };
  });
  const latest = await latestStates(config, devices.flatMap(({ assets }) => assets.map((a) => a.id)), local);
  show(
    devices.map(({ device, assets }) => deviceWithAssetsView(device, assets, latest)),
    () => formatTable(['ID', 'NAME', 'ASSETS', 'CREATED'], devices.map(({ device, assets }) => [device.id, device.name, assets.length, new Date(device.createdOn).toISOString()])),
  );
  return 0;
}

async function showDevice({ config, positionals, show }: ManagementArgs): Promise<number> {
  const { device, assets, local } = withRegistry(config, (registry, store) => {
    const device = registry.requireDevice(requireArg(positionals, 1, '<DeviceID>'));
    return { device, assets: store.assets.list(device.id), local: store.states.latestOfDevice(device.id) };
  });
  const view = deviceWithAssetsView(device, assets, await latestStates(config, assets.map((a) => a.id), local));
  show(view, () =>
    [
      `device ${view.id}  name: ${view.name}  created: ${view.createdOn}`,
      '',
      formatTable(['ASSET', 'IS', 'TYPE', 'VALUE', 'AT'], view.assets.map((a) => [a.name, a.is, String(a.profile.type), a.state ? JSON.stringify(a.state.value) : null, a.state?.at])),
    ].join('\n'),
  );
  return 0;
}

function deleteDevice({ config, positionals, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry) => {
    const id = requireArg(positionals, 1, '<DeviceID>');
    await registry.write(() => registry.deleteDevice(id));
    await deleteDeviceStates(config, id);
    show({ deleted: id }, () => `device ${id} deleted`);
    return 0;
  });
}

/**
 * `outpost device assign` (central): the device's definition goes down to that gateway (docs/sync.md,
 * "Manage a fleet from the central"); the running daemon notices the change and sends it.
 */
async function assignDevice({ config, positionals, values, show }: ManagementArgs): Promise<number> {
  const id = requireArg(positionals, 1, '<DeviceID>');
  const gatewayId = values.none ? null : (positionals[2] ?? null);
  if (gatewayId === null && !values.none) throw new UsageError('device assign <DeviceID> <GatewayID>, or --none to manage it on no gateway');
  await withCatalogWrites(config, async (registry, store) => {
    const fleet = new FleetConfig({
      store,
      revisions: new SqliteManagedRevisions(store, (work) => registry.write(work)),
      clock: systemClock,
      logger: createLogger('silent'),
      limits: config.central,
      // The daemon sends it: this process has no link to any gateway.
      send: () => {},
      connected: () => false,
    });
    await fleet.assign(id, gatewayId);
  });
  show({ id, gateway: gatewayId }, () => (gatewayId ? `device ${id} is managed on gateway ${gatewayId}` : `device ${id} is on no gateway`));
  return 0;
}

function rotateToken({ config, positionals, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry) => {
    const id = requireArg(positionals, 1, '<DeviceID>');
    const result = await registry.write(() => registry.rotateDeviceToken(id));
    show({ id: result.tokenId, token: result.token }, () => `new device token: ${result.token}\n(previous device tokens are revoked)`);
    return 0;
  });
}
