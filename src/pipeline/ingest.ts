import { EventEmitter } from 'node:events';
import { ServiceError, isServiceError } from '../core/errors.js';
import { canPublishState, type Principal } from '../core/access.js';
import type { Clock } from '../core/time.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';
import type { DeviceRecord } from '../store/store.js';
import type { StateWriter } from './state-writer.js';
import { resolveAt, type JsonValue, type StateInput } from './messages.js';

/** A stored state, announced after its commit: the MQTT feed, echo and (later) the outbox listen here. */
export interface StateEvent {
  device: DeviceRecord;
  asset: CachedAsset;
  value: JsonValue;
  valueJson: string;
  at: number;
  /** The exact bytes of an asset state publish, for `device/<id>/asset/<name>/state` subscribers. */
  echo?: Buffer | string;
  /** `at` as the message gave it (absent when it had none), for echoing a device state's part. */
  inputAt?: unknown;
  source: string;
}

/** A refused message of a known device, reported on `device/<id>/errors` whatever door it came through. */
export interface RefusalEvent {
  deviceId: string;
  topic: string;
  code: string;
  error: string;
  at: number;
}

export interface AssetRefusal {
  asset: string;
  code: string;
  error: string;
}

export type AssetTarget = { deviceId: string; assetName: string } | { assetId: string };

export interface AssetStateRequest {
  principal: Principal;
  target: AssetTarget;
  /** The door's parser; it gets the asset because the legacy MQTT form converts by profile type. */
  parse: (asset: CachedAsset) => StateInput;
  /** Exact payload for the echo topic; defaults to the parsed state as JSON. */
  echo?: Buffer | string;
  source: string;
  topic: string;
}

export interface DeviceStateRequest {
  principal: Principal;
  deviceId: string;
  /** Turns the message into states by asset name (JSON, CBOR or the device's codec). */
  decode: (device: DeviceRecord) => Record<string, StateInput>;
  source: string;
  topic: string;
}

export interface DeviceStateOutcome {
  states: Record<string, { value: JsonValue; at: number }>;
  refused: AssetRefusal[];
}

type PipelineEvents = { state: [StateEvent]; refused: [RefusalEvent] };

/**
 * The one road every state takes: resolve → authorize → parse → validate → store (group commit)
 * → announce. Doors (HTTP, MQTT, radio) only turn their bytes into these requests.
 */
export class StatePipeline extends EventEmitter<PipelineEvents> {
  readonly #catalog: Catalog;
  readonly #writer: StateWriter;
  readonly #clock: Clock;
  statesAccepted = 0;
  statesRefused = 0;

  constructor(catalog: Catalog, writer: StateWriter, clock: Clock) {
    super();
    this.#catalog = catalog;
    this.#writer = writer;
    this.#clock = clock;
  }

  resolveAsset(target: AssetTarget): CachedAsset {
    if ('assetId' in target) {
      const asset = this.#catalog.assetById(target.assetId);
      if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset ${target.assetId} not found`);
      return asset;
    }
    if (!this.#catalog.device(target.deviceId)) throw new ServiceError('DEVICE_NOT_FOUND', `device ${target.deviceId} not found`);
    const asset = this.#catalog.assetByName(target.deviceId, target.assetName);
    if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${target.assetName}" not found on device ${target.deviceId}`);
    return asset;
  }

  /** Reports on the device's errors topic; `counted: false` for codec warnings, which refuse nothing. */
  reportRefusal(deviceId: string, topic: string, err: ServiceError | AssetRefusal, counted = true): void {
    if (counted) this.statesRefused++;
    const error = err instanceof ServiceError ? err.message : err.error;
    this.emit('refused', { deviceId, topic, code: err.code, error, at: this.#clock.now() });
  }

  async publishAssetState(req: AssetStateRequest): Promise<StateEvent> {
    const receivedAt = this.#clock.now();
    let asset: CachedAsset;
    try {
      asset = this.resolveAsset(req.target);
    } catch (err) {
      // An unknown asset name on the publisher's own device is bad input like any other: report it.
      const target = req.target;
      if (isServiceError(err) && err.code === 'ASSET_NOT_FOUND' && 'deviceId' in target && canPublishState(req.principal, target.deviceId)) {
        this.reportRefusal(target.deviceId, req.topic, err);
      }
      throw err;
    }
    if (!canPublishState(req.principal, asset.deviceId)) {
      throw new ServiceError('FORBIDDEN', `this token may not publish states of device ${asset.deviceId}`);
    }
    const device = this.#catalog.device(asset.deviceId)!;
    let event: StateEvent;
    try {
      const input = req.parse(asset);
      event = this.#prepare(device, asset, input, receivedAt, req.source, `asset "${asset.name}"`);
      if (req.echo !== undefined) event.echo = req.echo;
    } catch (err) {
      if (isServiceError(err)) this.reportRefusal(device.id, req.topic, err);
      throw err;
    }
    await this.#writer.write([{ assetId: asset.id, at: event.at, valueJson: event.valueJson, receivedAt }]);
    this.#announce(event);
    return event;
  }

  /** Each asset is validated on its own: valid ones are stored, the others reported by name (contract §5). */
  async publishDeviceState(req: DeviceStateRequest): Promise<DeviceStateOutcome> {
    const receivedAt = this.#clock.now();
    const device = this.#catalog.device(req.deviceId);
    if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${req.deviceId} not found`);
    if (!canPublishState(req.principal, device.id)) {
      throw new ServiceError('FORBIDDEN', `this token may not publish states of device ${device.id}`);
    }
    let inputs: Record<string, StateInput>;
    try {
      inputs = req.decode(device);
    } catch (err) {
      if (isServiceError(err)) this.reportRefusal(device.id, req.topic, err);
      throw err;
    }
    const events: StateEvent[] = [];
    const refused: AssetRefusal[] = [];
    for (const [name, input] of Object.entries(inputs)) {
      const asset = this.#catalog.assetByName(device.id, name);
      try {
        if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${device.id}`);
        events.push(this.#prepare(device, asset, input, receivedAt, req.source, `asset "${name}"`));
      } catch (err) {
        if (!isServiceError(err)) throw err;
        const refusal = { asset: name, code: err.code, error: err.message };
        refused.push(refusal);
        this.reportRefusal(device.id, req.topic, refusal);
      }
    }
    if (events.length > 0) {
      await this.#writer.write(events.map((e) => ({ assetId: e.asset.id, at: e.at, valueJson: e.valueJson, receivedAt })));
    }
    const states: DeviceStateOutcome['states'] = {};
    for (const event of events) {
      this.#announce(event);
      states[event.asset.name] = { value: event.value, at: event.at };
    }
    return { states, refused };
  }

  #prepare(device: DeviceRecord, asset: CachedAsset, input: StateInput, receivedAt: number, source: string, where: string): StateEvent {
    if (input.value === undefined) throw new ServiceError('INVALID_MESSAGE', `${where}: member "value" is required`);
    const at = resolveAt(input.at, receivedAt, where);
    const check = asset.check(input.value);
    if (!check.ok) throw new ServiceError('PROFILE_MISMATCH', `${where}: ${check.error}`);
    const valueJson = JSON.stringify(input.value);
    return { device, asset, value: input.value, valueJson, at, inputAt: input.at ?? undefined, source };
  }

  #announce(event: StateEvent): void {
    this.statesAccepted++;
    this.emit('state', event);
  }
}

/** The state echo payload: exact bytes when the door kept them, else the asset's part as `{value, at?}` (contract §4). */
export function echoPayload(event: StateEvent): Buffer | string {
  if (event.echo !== undefined) return event.echo;
  return JSON.stringify(event.inputAt === undefined ? { value: event.value } : { value: event.value, at: event.inputAt });
}

/** The feed message: formatted by the service, `at` always set (contract §4). */
export function feedText(valueJson: string, at: number): string {
  return `{"value":${valueJson},"at":"${new Date(at).toISOString()}"}`;
}

export function feedPayload(event: StateEvent): string {
  return feedText(event.valueJson, event.at);
}
