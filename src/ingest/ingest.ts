import { EventEmitter } from 'node:events';
import { feedText } from '../wire/messages.js';
import { ServiceError, isServiceError } from '../core/errors.js';
import type { Clock } from '../core/time.js';
import type { UplinkStore } from '../store/uplinks.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';
import type { DeviceRecord } from '../core/model.js';
import type { StoredState } from '../store/states.js';
import type { AlongsideWrite, StateWriter } from '../ingest/state-writer.js';
import { DeviceStateDecoder, type DecodedMessage, type KeptUplink } from '../ingest/decoders.js';
import type { Uplink } from '../ingest/uplinks.js';
import { resolveAt, valueProblem, type StateInput } from '../ingest/messages.js';
import { DEFAULT_JSON_DEPTH, type JsonValue } from '../core/json.js';

/** A stored state, announced after its commit: the MQTT feed and echo, the console and retention listen here. */
export interface StateEvent {
  device: DeviceRecord;
  asset: CachedAsset;
  value: JsonValue;
  valueJson: string;
  at: number;
  /** `at` as the message gave it (absent when it had none): what an echo of the message repeats. */
  givenAt?: unknown;
  /** The uplink's `reply`: the door's own data, opaque to everyone else (the MQTT echo's exact bytes). */
  reply?: unknown;
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

/** Limits on what a message may contain, from the `limits` configuration. */
export interface InputLimits {
  /** Deepest nesting of arrays and objects in a message (`limits.jsonDepth`). */
  jsonDepth: number;
}

export interface PipelineOptions extends Partial<InputLimits> {
  /** Reads payloads by their format hint; without one, built-in formats only (no device codecs). */
  decoder?: DeviceStateDecoder;
}

/** One stored state of an uplink, as the door answers it. */
export interface AcceptedState {
  assetId: string;
  value: JsonValue;
  at: number;
}

export interface IngestOutcome {
  /** By asset name. */
  states: Record<string, AcceptedState>;
  refused: AssetRefusal[];
}

type PipelineEvents = { state: [StateEvent]; refused: [RefusalEvent] };

/**
 * The one road every uplink takes, whatever door it came through (docs/architecture.md, "Ingest
 * and commands"): decode (the device's codec, by the uplink's format hint) → validate each asset
 * → store the raw bytes, the states and the door's own writes in one group commit → announce.
 * Doors authenticate and authorize before; they only turn their bytes into an `Uplink`.
 */
export class StatePipeline extends EventEmitter<PipelineEvents> {
  readonly #catalog: Catalog;
  readonly #writer: StateWriter;
  readonly #uplinks: UplinkStore;
  readonly #clock: Clock;
  readonly #decoder: DeviceStateDecoder;
  readonly limits: InputLimits;
  statesAccepted = 0;
  statesRefused = 0;
  /** States a gateway sent again that were already held (central role). */
  duplicates = 0;

  /** `uplinks`: where raw uplinks are kept, in the same group commit as their states. */
  constructor(catalog: Catalog, writer: StateWriter, uplinks: UplinkStore, clock: Clock, options: PipelineOptions = {}) {
    super();
    this.#catalog = catalog;
    this.#writer = writer;
    this.#uplinks = uplinks;
    this.#clock = clock;
    this.limits = { jsonDepth: options.jsonDepth ?? DEFAULT_JSON_DEPTH };
    this.#decoder = options.decoder ?? new DeviceStateDecoder(undefined, this.limits);
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

  /**
   * Stores what the uplink holds. Each asset is validated on its own: valid ones are stored, the
   * others reported by name and returned in `refused` (docs/api.md, "Device states"). A message that
   * cannot be read at all is reported and thrown; so is the refusal of a one-asset state, which is
   * the whole message. Settles after the commit.
   */
  async ingest(uplink: Uplink): Promise<IngestOutcome> {
    const receivedAt = uplink.receivedAt ?? this.#clock.now();
    const device = this.#catalog.device(uplink.deviceId);
    if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${uplink.deviceId} not found`);
    const decoded = this.#decode(device, uplink, receivedAt);
    if ('refusal' in decoded) {
      // Undecodable bytes are kept all the same (a later codec may read them) and the door's own
      // writes still commit: the refusal is thrown only once they are.
      if (decoded.write) await this.#writer.write([], decoded.write);
      throw decoded.refusal;
    }
    const message = decoded.message;
    const events: StateEvent[] = [];
    const refused: AssetRefusal[] = [];
    let firstRefusal: ServiceError | undefined;
    for (const [name, input] of Object.entries(message.states)) {
      try {
        const asset = this.#catalog.assetByName(device.id, name);
        if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${device.id}`);
        events.push(this.#prepare(device, asset, input, receivedAt, uplink, `asset "${name}"`));
      } catch (err) {
        // One asset that cannot be handled, for whatever reason, never sinks the others of the message.
        const refusal = isServiceError(err)
          ? err
          : new ServiceError('INTERNAL', `asset "${name}": could not be processed (${(err as Error)?.message ?? String(err)})`);
        firstRefusal ??= refusal;
        refused.push({ asset: name, code: refusal.code, error: refusal.message });
      }
    }
    this.reportAssetRefusals(device.id, uplink.topic, refused);
    const stored: StoredState[] = events.map((e) => ({ assetId: e.asset.id, at: e.at, valueJson: e.valueJson, receivedAt, dedupe: uplink.resent }));
    if (stored.length > 0 || message.uplink || uplink.alongside) await this.#writer.write(stored, this.#alongside(message.uplink, stored, uplink.alongside));
    const states: IngestOutcome['states'] = {};
    for (const [i, event] of events.entries()) {
      if (stored[i]!.duplicate) this.duplicates++;
      else this.#announce(event);
      states[event.asset.name] = { assetId: event.asset.id, value: event.value, at: event.at };
    }
    if (firstRefusal && 'asset' in uplink.payload) throw firstRefusal;
    return { states, refused };
  }

  /**
   * Decodes, or reports why the message cannot be read and returns the refusal with the writes
   * that must still commit before it is thrown (the raw bytes, the door's own). Synchronous: most
   * messages decode, and an async step more per message was measurable on the hot path.
   */
  #decode(device: DeviceRecord, uplink: Uplink, receivedAt: number): { message: DecodedMessage } | { refusal: unknown; write: AlongsideWrite | undefined } {
    let message: DecodedMessage;
    try {
      const payload = uplink.payload;
      let asset: CachedAsset | undefined;
      if ('asset' in payload) {
        // Before the payload is read: the asset's profile may decide how (MQTT's legacy form).
        asset = this.#catalog.assetByName(device.id, payload.asset);
        if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${payload.asset}" not found on device ${device.id}`);
      }
      message = this.#decoder.decode(device, uplink, receivedAt, asset);
    } catch (err) {
      if (isServiceError(err)) this.reportRefusal(device.id, uplink.topic, err);
      return { refusal: err, write: uplink.alongside };
    }
    if (message.failure) {
      this.reportRefusal(device.id, uplink.topic, message.failure);
      return { refusal: message.failure, write: this.#alongside(message.uplink, [], uplink.alongside) };
    }
    // A codec's warnings are reported like refusals (the device's errors topic), but refuse nothing.
    for (const warning of message.warnings ?? []) {
      this.reportRefusal(device.id, uplink.topic, { asset: '', code: 'DECODE_WARNING', error: warning }, false);
    }
    return { message };
  }

  /** Inserts the raw uplink in the batch's transaction and points its states at it (provenance). */
  #alongside(uplink: KeptUplink | undefined, states: StoredState[], door: AlongsideWrite | undefined): AlongsideWrite | undefined {
    if (!uplink) return door;
    const uplinks = this.#uplinks;
    return () => {
      const { raw } = uplink;
      const seq = uplinks.record({
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

  #prepare(device: DeviceRecord, asset: CachedAsset, input: StateInput, receivedAt: number, uplink: Uplink, where: string): StateEvent {
    if (input.value === undefined) throw new ServiceError('INVALID_MESSAGE', `${where}: member "value" is required`);
    const at = resolveAt(input.at, receivedAt, where);
    const problem = valueProblem(input.value, this.limits.jsonDepth);
    if (problem) throw new ServiceError(problem.code, `${where}: ${problem.message}`);
    const check = asset.check(input.value);
    if (!check.ok) throw new ServiceError(check.code ?? 'PROFILE_MISMATCH', `${where}: ${check.error}`);
    const valueJson = JSON.stringify(input.value);
    const event: StateEvent = { device, asset, value: input.value, valueJson, at, source: uplink.via };
    if (input.at !== undefined && input.at !== null) event.givenAt = input.at;
    if (uplink.reply !== undefined) event.reply = uplink.reply;
    return event;
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
  const exact = event.reply;
  if (Buffer.isBuffer(exact) || typeof exact === 'string') return exact;
  return JSON.stringify(event.givenAt === undefined ? { value: event.value } : { value: event.value, at: event.givenAt });
}

/** The feed message: formatted by the service, `at` always set (docs/mqtt.md); written once in the wire model. */
export { feedText };

export function feedPayload(event: StateEvent): string {
  return feedText(event.valueJson, event.at);
}
