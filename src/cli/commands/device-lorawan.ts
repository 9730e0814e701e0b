// `outpost device lorawan <id> abp|otaa|show|delete`: a device's LoRaWAN settings (docs/lpwan.md).
import { systemClock } from '../../core/time.js';
import { regionByName } from '../../lpwan/lorawan/regions.js';
import { LorawanProvisioning } from '../../lpwan/provisioning.js';
import { requireArg, UsageError, type ManagementArgs, type ManagementValues } from '../args.js';
import { withCatalogWrites } from '../open.js';

export const DEVICE_LORAWAN_USAGE = [
  '  device lorawan <DeviceID> abp --devaddr H --nwkskey H --appskey H [--fcnt-up N] [--fcnt-down N] [--deveui H] [--port N]',
  '  device lorawan <DeviceID> otaa --deveui H --joineui H --appkey H [--port N]',
  '  device lorawan <DeviceID> show|delete            LoRaWAN settings (see docs/lpwan.md)',
].join('\n');

type LorawanView = ReturnType<LorawanProvisioning['get']>;

function describe(deviceId: string, v: LorawanView): string {
  return [
    `device ${deviceId}: LoRaWAN ${v.activation.toUpperCase()}, class ${v.class}, ${v.joined ? `DevAddr ${v.devAddr}` : 'not joined yet'}`,
    `  DevEUI ${v.devEui ?? '-'}  JoinEUI ${v.joinEui ?? '-'}  FPort ${v.fPort}  FCntUp ${v.fCntUp}  FCntDown ${v.fCntDown}  queued ${v.queued}`,
    v.lastUplink ? `  last uplink ${v.lastUplink.at} fCnt ${v.lastUplink.fCnt} via ${v.lastUplink.source}` : '  no uplink yet',
  ].join('\n');
}

function integerOption(values: ManagementValues, name: 'fcnt-up' | 'fcnt-down' | 'port'): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) throw new UsageError(`--${name} must be a non-negative integer`);
  return Number(raw);
}

/** The body PUT /device/<id>/lorawan takes, from the options; options not given are left out. */
function activationBody(action: 'abp' | 'otaa', values: ManagementValues): Record<string, unknown> {
  const body: Record<string, unknown> =
    action === 'abp'
      ? { activation: 'abp', devAddr: values.devaddr, nwkSKey: values.nwkskey, appSKey: values.appskey, fCntUp: integerOption(values, 'fcnt-up'), fCntDown: integerOption(values, 'fcnt-down'), devEui: values.deveui }
      : { activation: 'otaa', devEui: values.deveui, joinEui: values.joineui, appKey: values.appkey };
  const port = integerOption(values, 'port');
  if (port !== undefined) body.fPort = port;
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return body;
}

export function deviceLorawan({ config, positionals, values, show }: ManagementArgs): Promise<number> {
  return withCatalogWrites(config, async (registry, store) => {
    const device = registry.requireDevice(requireArg(positionals, 1, '<DeviceID>'));
    const action = requireArg(positionals, 2, 'abp, otaa, show or delete');
    if (action !== 'show') registry.assertLocallyEditable(device.id);
    const provisioning = new LorawanProvisioning(store.lorawanDevices, store.downlinks, systemClock, regionByName(config.radio.region));
    switch (action) {
      case 'abp':
      case 'otaa': {
        const view = await registry.write(() => provisioning.put(device.id, activationBody(action, values)));
        show(view, () => describe(device.id, view));
        return 0;
      }
      case 'show': {
        const view = provisioning.get(device.id);
        show(view, () => describe(device.id, view));
        return 0;
      }
      case 'delete':
        await registry.write(() => provisioning.delete(device.id));
        show({ deleted: device.id }, () => `LoRaWAN settings, session and downlink queue of device ${device.id} deleted`);
        return 0;
      default:
        throw new UsageError(`unknown lorawan action "${action}": use abp, otaa, show or delete`);
    }
  });
}
