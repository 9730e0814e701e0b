import { EventEmitter } from 'node:events';
import { ServiceError, isServiceError } from '../core/errors.js';
import { canPublishState, type Principal } from '../core/access.js';
import type { Clock } from '../core/time.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';
import type { DeviceRecord } from '../core/model.js';
import type { StoredState } from '../store/states.js';
import type { AlongsideWrite, StateWriter } from '../ingest/state-writer.js';
import type { DecodedMessage, KeptUplink } from '../ingest/decoders.js';
import { resolveAt, valueProblem, type StateInput } from '../ingest/messages.js';
import { DEFAULT_JSON_DEPTH, type JsonValue } from '../core/json.js';

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
  /** A re-decode corrected the latest state: a feed message, but nothing the device sent (no echo). */
  correction?: boolean;
}

/** A refused message of a known device, reported on `device/<id>/errors` whatever door it came through. */
export interface RefusalEvent {
  deviceId: string;
  topic: string;
  code: string;
  error: string;
  at: number;
  /** The refused assets of a device state message, at most REPORTED_ASSET_REFUSALS of them. */
  assets?: AssetRefusal[];
  /** How many refused assets were left out of `assets`. */
  more?: number;
}

/**
 * A device state message names at most as many assets as fit in its payload (thousands in 64 KiB):
 * its refusals are reported as one event that lists this many and counts the rest, so one message
 * can never turn into thousands of errors-topic messages.
 */
export const REPORTED_ASSET_REFUSALS = 50;

export interface AssetRefusal {
  asset: string;
  code: string;
  error: string;
}

export type AssetTarget = { deviceId: string; assetName: string } | { assetId: string };

export interface AssetStateRequest {
  principal: Principal;
  target: AssetTarget;
  /**
   * The door's parser; it gets the asset because the legacy MQTT form converts by profile type,
   * and the input limits so JSON is refused at parse time beyond `limits.jsonDepth`.
   */
  parse: (asset: CachedAsset, limits: InputLimits) => StateInput;
  /** Exact payload for the echo topic; defaults to the parsed state as JSON. */
  echo?: Buffer | string;
  source: string;
  topic: string;
}

/** Limits on what a message may contain, from the `limits` configuration. */
export interface InputLimits {
  /** Deepest nesting of arrays and objects in a message (`limits.jsonDepth`). */
  jsonDepth: number;
}

export interface DeviceStateRequest {
  /** Absent when the door authenticated the device itself (a radio frame's MIC). */
  principal?: Principal;
  deviceId: string;
  /**
   * Turns the message into states by asset name (JSON, CBOR or the device's codec), with the raw
   * uplink to keep; `receivedAt` is the time states without their own `at` get.
   */
  decode: (device: DeviceRecord, receivedAt: number) => DecodedMessage;
  source: string;
  topic: string;
  /** When the door received it (defaults to now). */
  receivedAt?: number;
  /** The door's own writes that must commit with this message (a radio session's frame counters). */
  alongside?: AlongsideWrite;
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
  readonly limits: InputLimits;
  statesAccepted = 0;
  statesRefused = 0;
  /** States a gateway sent again that were already held (central role). */
  duplicates = 0;

  constructor(catalog: Catalog, writer: StateWriter, clock: Clock, limits: InputLimits = { jsonDepth: DEFAULT_JSON_DEPTH }) {
    super();
    this.#catalog = catalog;
    this.#writer = writer;
    this.#clock = clock;
    this.limits = limits;
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

  /** The refused assets of one device state message, as one report (one event, whatever their number). */
  reportAssetRefusals(deviceId: string, topic: string, refused: AssetRefusal[]): void {
    if (refused.length === 0) return;
    this.statesRefused += refused.length;
    this.emit('refused', { deviceId, topic, at: this.#clock.now(), ...summarizeRefusals(refused) });
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
      const input = req.parse(asset, this.limits);
      event = this.#prepare(device, asset, input, receivedAt, req.source, `asset "${asset.name}"`);
      if (req.echo !== undefined) event.echo = req.echo;
    } catch (err) {
      if (isServiceError(err)) this.reportRefusal(device.id, req.topic, err);
      throw err;
    }
    // A gateway re-sends what was in flight when its link broke: a state this asset already holds
    // (same `at` and value) is acknowledged but stored and announced only once (docs/sync.md).
    const stored: StoredState = { assetId: asset.id, at: event.at, valueJson: event.valueJson, receivedAt, dedupe: req.principal.kind === 'gateway' };
    await this.#writer.write([stored]);
    if (stored.duplicate) this.duplicates++;
    else this.#announce(event);
    return event;
  }

  /** Each asset is validated on its own: valid ones are stored, the others reported by name (docs/api.md, "Device states"). */
  async publishDeviceState(req: DeviceStateRequest): Promise<DeviceStateOutcome> {
    const receivedAt = req.receivedAt ?? this.#clock.now();
    const device = this.#catalog.device(req.deviceId);
    if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${req.deviceId} not found`);
    if (req.principal && !canPublishState(req.principal, device.id)) {
      throw new ServiceError('FORBIDDEN', `this token may not publish states of device ${device.id}`);
    }
    let message: DecodedMessage;
    try {
      message = req.decode(device, receivedAt);
    } catch (err) {
      if (isServiceError(err)) this.reportRefusal(device.id, req.topic, err);
      if (req.alongside) await this.#writer.write([], req.alongside);
      throw err;
    }
    if (message.failure) {
      this.reportRefusal(device.id, req.topic, message.failure);
      // Undecodable bytes are kept all the same (a later codec may read them); the refusal is
      // answered only once they are committed.
      if (message.uplink || req.alongside) await this.#writer.write([], this.#alongside(message.uplink, [], req.alongside));
      throw message.failure;
    }
    for (const warning of message.warnings ?? []) {
      this.reportRefusal(device.id, req.topic, { asset: '', code: 'DECODE_WARNING', error: warning }, false);
    }
    const inputs = message.states;
    const events: StateEvent[] = [];
    const refused: AssetRefusal[] = [];
    for (const [name, input] of Object.entries(inputs)) {
      try {
        const asset = this.#catalog.assetByName(device.id, name);
        if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${device.id}`);
        events.push(this.#prepare(device, asset, input, receivedAt, req.source, `asset "${name}"`));
      } catch (err) {
        // One asset that cannot be handled, for whatever reason, never sinks the others of the message.
        refused.push(
          isServiceError(err)
            ? { asset: name, code: err.code, error: err.message }
            : { asset: name, code: 'INTERNAL', error: `asset "${name}": could not be processed (${(err as Error)?.message ?? String(err)})` },
        );
      }
    }
    this.reportAssetRefusals(device.id, req.topic, refused);
    const stored: StoredState[] = events.map((e) => ({ assetId: e.asset.id, at: e.at, valueJson: e.valueJson, receivedAt }));
    if (stored.length > 0 || message.uplink || req.alongside) await this.#writer.write(stored, this.#alongside(message.uplink, stored, req.alongside));
    const states: DeviceStateOutcome['states'] = {};
    for (const event of events) {
      this.#announce(event);
      states[event.asset.name] = { value: event.value, at: event.at };
    }
    return { states, refused };
  }

  /** Inserts the raw uplink in the batch's transaction and points its states at it (provenance). */
  #alongside(uplink: KeptUplink | undefined, states: StoredState[], door: AlongsideWrite | undefined): AlongsideWrite | undefined {
    if (!uplink) return door;
    const store = this.#catalog.store;
    return () => {
      const { raw } = uplink;
      const seq = store.uplinks.record({
        deviceId: raw.deviceId,
        at: raw.receivedAt,
        payload: raw.payload,
        port: raw.fPort ?? null,
        source: raw.source,
        decoded: uplink.error === null,
        error: uplink.error,
        codec: uplink.codec,
        declaredFormat: uplink.declaredFormat,
      });
      for (const state of states) {
        state.uplinkSeq = seq;
        if (uplink.codec !== null) state.codec = uplink.codec;
      }
      door?.();
    };
  }

  #prepare(device: DeviceRecord, asset: CachedAsset, input: StateInput, receivedAt: number, source: string, where: string): StateEvent {
    if (input.value === undefined) throw new ServiceError('INVALID_MESSAGE', `${where}: member "value" is required`);
    const at = resolveAt(input.at, receivedAt, where);
    const problem = valueProblem(input.value, this.limits.jsonDepth);
    if (problem) throw new ServiceError(problem.code, `${where}: ${problem.message}`);
    const check = asset.check(input.value);
    if (!check.ok) throw new ServiceError(check.code ?? 'PROFILE_MISMATCH', `${where}: ${check.error}`);
    const valueJson = JSON.stringify(input.value);
    return { device, asset, value: input.value, valueJson, at, inputAt: input.at ?? undefined, source };
  }

  /** A re-decode changed an asset's latest state: listeners (the MQTT feed) see the corrected value once. */
  announceCorrection(device: DeviceRecord, asset: CachedAsset, valueJson: string, at: number): void {
    this.emit('state', { device, asset, value: JSON.parse(valueJson) as JsonValue, valueJson, at, source: 'redecode', correction: true });
  }

  #announce(event: StateEvent): void {
    this.statesAccepted++;
    this.emit('state', event);
  }
}

/**
 * One report for the refused assets of a device state message: the assets' own code when they
 * share one (else STATES_REFUSED, as the HTTP answer), the first REPORTED_ASSET_REFUSALS listed.
 */
export function summarizeRefusals(refused: AssetRefusal[]): Pick<RefusalEvent, 'code' | 'error' | 'assets' | 'more'> {
  const first = refused[0]!;
  if (refused.length === 1) return { code: first.code, error: first.error, assets: [first] };
  const code = refused.every((r) => r.code === first.code) ? first.code : 'STATES_REFUSED';
  const assets = refused.slice(0, REPORTED_ASSET_REFUSALS);
  const more = refused.length - assets.length;
  // The names only: each one's reason is in `assets`.
  const listed = assets.map((r) => JSON.stringify(r.asset)).join(', ');
  const error = `${refused.length} assets refused: ${listed}${more > 0 ? `, and ${more} more` : ''}`;
  return more > 0 ? { code, error, assets, more } : { code, error, assets };
}

/** The state echo payload: exact bytes when the door kept them, else the asset's part as `{value, at?}` (docs/mqtt.md). */
export function echoPayload(event: StateEvent): Buffer | string {
  if (event.echo !== undefined) return event.echo;
  return JSON.stringify(event.inputAt === undefined ? { value: event.value } : { value: event.value, at: event.inputAt });
}

/** The feed message: formatted by the service, `at` always set (docs/mqtt.md). */
export function feedText(valueJson: string, at: number): string {
  return `{"value":${valueJson},"at":"${new Date(at).toISOString()}"}`;
}

export function feedPayload(event: StateEvent): string {
  return feedText(event.valueJson, event.at);
}
