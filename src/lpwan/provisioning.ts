import { ServiceError } from '../core/errors.js';
import type { Clock } from '../core/time.js';
import type { LorawanDeviceRecord, LorawanDeviceStore } from '../store/lorawan-devices.js';
import type { DownlinkQueueStore } from '../store/downlink-queue.js';
import { isJsonObject } from '../core/json.js';
import { dataRateName, EU868, type Region } from './lorawan/regions.js';
import { readMacState } from './mac/state.js';

/** A validated `PUT /device/<id>/lorawan` body (docs/lpwan.md, "Registering devices"). */
export interface LorawanSettings {
  activation: 'abp' | 'otaa';
  devEui: string | null;
  joinEui: string | null;
  appKey: Buffer | null;
  devAddr: string | null;
  nwkSKey: Buffer | null;
  appSKey: Buffer | null;
  fCntUp: number;
  fCntDown: number;
  fPort: number;
  deviceClass: 'A' | 'C';
  adr: boolean;
  usedDevNonces: number[];
}

const invalid = (message: string): never => {
  throw new ServiceError('LORAWAN_INVALID', message);
};

function hexField(body: Map<string, unknown>, name: string, bytes: number, required: boolean): string | null {
  const v = body.get(name.toLowerCase());
  if (v === undefined || v === null) {
    if (required) invalid(`"${name}" is required: ${bytes * 2} hex digits`);
    return null;
  }
  if (typeof v !== 'string') return invalid(`"${name}" must be a string of ${bytes * 2} hex digits`);
  const text = v.replace(/[\s:-]/g, '');
  if (!/^[0-9a-fA-F]*$/.test(text)) invalid(`"${name}" must be hexadecimal, got ${JSON.stringify(v)}`);
  if (text.length !== bytes * 2) invalid(`"${name}" must be ${bytes * 2} hex digits (${bytes} bytes), got ${text.length}`);
  return text.toUpperCase();
}

function counterField(body: Map<string, unknown>, name: string): number {
  const v = body.get(name.toLowerCase());
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) invalid(`"${name}" must be an integer from 0 to 4294967295 (a 32-bit frame counter)`);
  return v as number;
}

const ALLOWED = {
  abp: ['activation', 'devaddr', 'nwkskey', 'appskey', 'fcntup', 'fcntdown', 'deveui', 'fport', 'class', 'adr'],
  otaa: ['activation', 'deveui', 'joineui', 'appkey', 'usednonces', 'useddevnonces', 'fport', 'class', 'adr'],
};

export function parseLorawanSettings(raw: unknown): LorawanSettings {
  if (!isJsonObject(raw)) invalid('LoRaWAN settings must be a JSON object with "activation": "abp" or "otaa"');
  const body = new Map(Object.entries(raw as Record<string, unknown>).map(([k, v]) => [k.toLowerCase(), v]));
  const activation = typeof body.get('activation') === 'string' ? (body.get('activation') as string).toLowerCase() : undefined;
  if (activation !== 'abp' && activation !== 'otaa') return invalid('"activation" must be "abp" or "otaa"');
  for (const key of body.keys()) {
    if (!ALLOWED[activation].includes(key)) invalid(`"${key}" is not a setting of ${activation.toUpperCase()} devices (allowed: ${ALLOWED[activation].join(', ')})`);
  }
  const fPortRaw = body.get('fport');
  const fPort = fPortRaw === undefined || fPortRaw === null ? 1 : (fPortRaw as number);
  if (typeof fPort !== 'number' || !Number.isInteger(fPort) || fPort < 1 || fPort > 223) invalid('"fPort" must be an integer from 1 to 223');
  const cls = body.get('class');
  if (cls !== undefined && cls !== null && cls !== 'A' && cls !== 'C') invalid('"class" must be "A" or "C" (Class C devices get commands at once, docs/lpwan.md)');
  const deviceClass: 'A' | 'C' = cls === 'C' ? 'C' : 'A';
  const adrRaw = body.get('adr');
  if (adrRaw !== undefined && adrRaw !== null && typeof adrRaw !== 'boolean') invalid('"adr" must be true or false');
  const adr = adrRaw !== false;
  const key = (name: string, required: boolean) => {
    const h = hexField(body, name, 16, required);
    return h === null ? null : Buffer.from(h, 'hex');
  };
  if (activation === 'abp') {
    return {
      activation,
      devEui: hexField(body, 'devEui', 8, false),
      joinEui: null,
      appKey: null,
      devAddr: hexField(body, 'devAddr', 4, true),
      nwkSKey: key('nwkSKey', true),
      appSKey: key('appSKey', true),
      fCntUp: counterField(body, 'fCntUp'),
      fCntDown: counterField(body, 'fCntDown'),
      fPort,
      deviceClass,
      adr,
      usedDevNonces: [],
    };
  }
  const nonces = body.get('useddevnonces') ?? body.get('usednonces') ?? [];
  if (!Array.isArray(nonces) || nonces.some((n) => typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 0xffff)) {
    invalid('"usedDevNonces" must be an array of integers from 0 to 65535');
  }
  return {
    activation,
    devEui: hexField(body, 'devEui', 8, true),
    joinEui: hexField(body, 'joinEui', 8, true),
    appKey: key('appKey', true),
    devAddr: null,
    nwkSKey: null,
    appSKey: null,
    fCntUp: 0,
    fCntDown: 0,
    fPort,
    deviceClass,
    adr,
    usedDevNonces: nonces as number[],
  };
}

/**
 * What GET shows: never a key. After an OTAA join the session shown is the new one, even while the
 * device may still be using the old one (until its first uplink under the new).
 */
export function lorawanView(record: LorawanDeviceRecord, queued: number, region: Region = EU868) {
  const last = record.lastUplink;
  const next = record.nextSession;
  const mac = next ? readMacState(null, region) : readMacState(record.macState, region);
  const modulation = mac.dataRate === null ? undefined : region.dataRates[mac.dataRate];
  return {
    activation: record.activation,
    devEui: record.devEui,
    joinEui: record.joinEui,
    devAddr: next ? next.devAddr : record.devAddr,
    fCntUp: next ? 0 : record.fCntUp,
    fCntDown: next ? 0 : record.fCntDown,
    fPort: record.fPort,
    class: record.deviceClass,
    joined: record.activation === 'abp' || record.devAddr !== null || next !== null,
    adr: {
      enabled: record.adr,
      dataRate: modulation ? dataRateName(modulation) : null,
      txPower: mac.txPower,
      nbTrans: mac.nbTrans,
      uplinks: mac.history.length,
      pending: mac.adrPending !== null,
    },
    lastUplink: last
      ? {
          at: new Date(last.at).toISOString(),
          fCnt: last.fCnt,
          ...(last.fPort === undefined ? {} : { fPort: last.fPort }),
          ...(last.rssi === undefined ? {} : { rssi: last.rssi }),
          ...(last.snr === undefined ? {} : { snr: last.snr }),
          frequency: last.frequency,
          dataRate: last.dataRate,
          source: last.source,
        }
      : null,
    queued,
  };
}

/**
 * The LoRaWAN settings of devices (admin API and CLI): validation, uniqueness of DevEUIs, and the
 * views. Works on the store alone, so the CLI uses it without a running daemon; the daemon listens
 * to `onChange` to refresh its sessions.
 */
export class LorawanProvisioning {
  readonly #devices: LorawanDeviceStore;
  readonly #queue: DownlinkQueueStore;
  readonly #clock: Clock;
  readonly #region: Region;
  onChange: (deviceId: string) => void = () => {};

  constructor(devices: LorawanDeviceStore, queue: DownlinkQueueStore, clock: Clock, region: Region = EU868) {
    this.#devices = devices;
    this.#queue = queue;
    this.#clock = clock;
    this.#region = region;
  }

  put(deviceId: string, body: unknown) {
    const s = parseLorawanSettings(body);
    if (s.devEui) {
      const owner = this.#devices.deviceIdByDevEui(s.devEui);
      if (owner && owner !== deviceId) throw new ServiceError('DEVEUI_EXISTS', `DevEUI ${s.devEui} already belongs to device ${owner}`);
    }
    const record = this.#devices.put(
      {
        deviceId,
        activation: s.activation,
        devEui: s.devEui,
        joinEui: s.joinEui,
        appKey: s.appKey,
        fPort: s.fPort,
        deviceClass: s.deviceClass,
        adr: s.adr,
        devAddr: s.devAddr,
        nwkSKey: s.nwkSKey,
        appSKey: s.appSKey,
        fCntUp: s.fCntUp,
        fCntDown: s.fCntDown,
        updatedOn: this.#clock.now(),
      },
      s.usedDevNonces,
    );
    this.onChange(deviceId);
    return lorawanView(record, this.#queue.openCount(deviceId), this.#region);
  }

  get(deviceId: string) {
    const record = this.#devices.get(deviceId);
    if (!record) throw new ServiceError('NOT_LORAWAN', `device ${deviceId} has no LoRaWAN settings (set them with PUT /device/${deviceId}/lorawan)`);
    return lorawanView(record, this.#queue.openCount(deviceId), this.#region);
  }

  /** Every LoRaWAN device's radio link as a device list shows it: the signal of its last uplink, never a key. */
  links(): Map<string, { type: 'lorawan'; at: string | null; rssi?: number; snr?: number }> {
    const links = new Map<string, { type: 'lorawan'; at: string | null; rssi?: number; snr?: number }>();
    for (const record of this.#devices.all()) {
      const last = record.lastUplink;
      links.set(record.deviceId, { type: 'lorawan', at: last ? new Date(last.at).toISOString() : null, ...(last?.rssi !== undefined ? { rssi: last.rssi } : {}), ...(last?.snr !== undefined ? { snr: last.snr } : {}) });
    }
    return links;
  }

  delete(deviceId: string): void {
    if (!this.#devices.delete(deviceId)) throw new ServiceError('NOT_LORAWAN', `device ${deviceId} has no LoRaWAN settings`);
    this.onChange(deviceId);
  }

  downlinks(deviceId: string) {
    if (!this.#devices.get(deviceId)) throw new ServiceError('NOT_LORAWAN', `device ${deviceId} has no LoRaWAN settings`);
    return {
      data: this.#queue.list(deviceId).map((d) => ({
        id: d.id,
        fPort: d.fPort,
        confirmed: d.confirmed,
        status: d.status,
        createdAt: new Date(d.createdAt).toISOString(),
        expiresAt: new Date(d.expiresAt).toISOString(),
        ...(d.fCnt === null ? {} : { fCnt: d.fCnt }),
        ...(d.reason === null ? {} : { reason: d.reason }),
      })),
    };
  }
}
