import { ServiceError } from '../core/errors.js';
import { canCommand, type Principal } from '../core/access.js';
import type { Clock } from '../core/time.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';
import type { DeviceRecord } from '../store/store.js';
import { isPlainObject, member, type JsonValue } from './messages.js';
import type { AssetTarget, StatePipeline } from './ingest.js';

export interface AssetCommand {
  device: DeviceRecord;
  asset: CachedAsset;
  value: JsonValue;
  meta: Record<string, JsonValue> | null;
  at: number;
}

/** Several asset commands for one device at once (spec 2.6); MQTT delivers each, LPWAN sends one frame. */
export interface DeviceCommand {
  device: DeviceRecord;
  values: Record<string, JsonValue>;
  assets: CachedAsset[];
  meta: Record<string, JsonValue> | null;
  at: number;
}

export interface CommandDelivery {
  at: string;
  delivered: { mqtt: number; lpwan: 'queued' | 'none' };
}

/** A transport that delivers commands; returns how many subscribers it reached. */
export interface CommandSink {
  deliverAssetCommand(command: AssetCommand): number;
  /** LPWAN sinks queue the whole device command; MQTT sinks deliver it per asset. */
  deliverDeviceCommand(command: DeviceCommand): number | 'queued';
}

function parseMeta(raw: unknown): Record<string, JsonValue> | null {
  if (raw === undefined || raw === null) return null;
  if (!isPlainObject(raw)) throw new ServiceError('INVALID_BODY', '"meta" must be an object or null');
  return raw as Record<string, JsonValue>;
}

/**
 * The one road every command takes back down (HTTP, MQTT app publishes, later the upstream):
 * authorize → validate against the profile → record → hand to every sink.
 */
export class CommandRouter {
  readonly #catalog: Catalog;
  readonly #pipeline: StatePipeline;
  readonly #clock: Clock;
  readonly #sinks: CommandSink[] = [];
  commandsSent = 0;

  constructor(catalog: Catalog, pipeline: StatePipeline, clock: Clock) {
    this.#catalog = catalog;
    this.#pipeline = pipeline;
    this.#clock = clock;
  }

  addSink(sink: CommandSink): void {
    this.#sinks.push(sink);
  }

  #checkActuator(asset: CachedAsset, value: unknown): void {
    if (asset.is !== 'actuator') throw new ServiceError('NOT_ACTUATOR', `asset "${asset.name}" is a ${asset.is}, not an actuator: it takes no commands`);
    if (value === undefined) throw new ServiceError('INVALID_MESSAGE', `asset "${asset.name}": member "value" is required`);
    const check = asset.check(value);
    if (!check.ok) throw new ServiceError('PROFILE_MISMATCH', `asset "${asset.name}": ${check.error}`);
  }

  /** Body `{value, meta?}` (keys in any case). */
  sendAssetCommand(principal: Principal, target: AssetTarget, body: unknown, source: string): CommandDelivery {
    if (!canCommand(principal)) throw new ServiceError('FORBIDDEN', 'sending commands needs an application token with the "command" scope');
    const asset = this.#pipeline.resolveAsset(target);
    if (!isPlainObject(body)) throw new ServiceError('INVALID_MESSAGE', 'command must be a JSON object {"value", "meta"?}');
    const value = member(body, 'value') as JsonValue;
    this.#checkActuator(asset, value);
    const meta = parseMeta(member(body, 'meta'));
    const device = this.#catalog.device(asset.deviceId)!;
    const at = this.#clock.now();
    this.#catalog.store.recordCommand({ deviceId: device.id, assetId: asset.id, valueJson: JSON.stringify(value), metaJson: meta && JSON.stringify(meta), at, source });
    const command: AssetCommand = { device, asset, value, meta, at };
    let mqtt = 0;
    for (const sink of this.#sinks) mqtt += sink.deliverAssetCommand(command);
    this.commandsSent++;
    return { at: new Date(at).toISOString(), delivered: { mqtt, lpwan: 'none' } };
  }

  /** Body: a map asset name → value, or `{values: {...}, meta?}`. All assets must be valid: one frame goes out. */
  sendDeviceCommand(principal: Principal, deviceId: string, body: unknown, metaFromQuery: unknown, source: string): CommandDelivery {
    if (!canCommand(principal)) throw new ServiceError('FORBIDDEN', 'sending commands needs an application token with the "command" scope');
    const device = this.#catalog.device(deviceId);
    if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${deviceId} not found`);
    if (!isPlainObject(body)) throw new ServiceError('INVALID_MESSAGE', 'device command must be a JSON object mapping asset names to values');
    const wrapped = member(body, 'values');
    const values = (isPlainObject(wrapped) ? wrapped : body) as Record<string, JsonValue>;
    const meta = parseMeta(isPlainObject(wrapped) ? member(body, 'meta') : metaFromQuery);
    const names = Object.keys(values);
    if (names.length === 0) throw new ServiceError('INVALID_MESSAGE', 'device command names no asset');
    const assets = names.map((name) => {
      const asset = this.#catalog.assetByName(device.id, name);
      if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${device.id}`);
      this.#checkActuator(asset, values[name]);
      return asset;
    });
    const at = this.#clock.now();
    this.#catalog.store.recordCommand({ deviceId: device.id, assetId: null, valueJson: JSON.stringify(values), metaJson: meta && JSON.stringify(meta), at, source });
    const command: DeviceCommand = { device, values, assets, meta, at };
    let mqtt = 0;
    let lpwan: 'queued' | 'none' = 'none';
    for (const sink of this.#sinks) {
      const result = sink.deliverDeviceCommand(command);
      if (result === 'queued') lpwan = 'queued';
      else mqtt += result;
    }
    this.commandsSent++;
    return { at: new Date(at).toISOString(), delivered: { mqtt, lpwan } };
  }
}

/** The JSON message on both command topics (contract §4): `{value, at, meta?}`. */
export function commandPayload(value: JsonValue, at: number, meta: Record<string, JsonValue> | null): string {
  return JSON.stringify(meta ? { value, at: new Date(at).toISOString(), meta } : { value, at: new Date(at).toISOString() });
}
