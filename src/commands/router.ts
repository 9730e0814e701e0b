import { EventEmitter } from 'node:events';
import { ServiceError, isServiceError } from '../core/errors.js';
import { canCommand, type Principal } from '../core/access.js';
import type { Clock } from '../core/time.js';
import type { CommandStore } from '../store/commands.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';
import type { DeviceRecord } from '../core/model.js';
import { isJsonObject, type JsonValue, memberIgnoringCase } from '../core/json.js';
import { resolveAsset, type AssetTarget } from '../registry/targets.js';

export interface AssetCommand {
  device: DeviceRecord;
  asset: CachedAsset;
  value: JsonValue;
  meta: Record<string, JsonValue> | null;
  at: number;
}

/** Several asset commands for one device at once (docs/api.md); MQTT delivers each, LPWAN sends one frame. */
export interface DeviceCommand {
  device: DeviceRecord;
  values: Record<string, JsonValue>;
  assets: CachedAsset[];
  meta: Record<string, JsonValue> | null;
  at: number;
}

/** An outcome together with what encoding the command for this way down warned of (a radio codec's warnings). */
export interface SinkReport {
  outcome: number | string;
  warnings: string[];
}

/**
 * What one sink did with a command: a count (MQTT subscribers reached) or a status word
 * (`queued` for the radio, `sent`/`queued` for a gateway link), possibly with warnings (SinkReport).
 * `undefined`: not this sink's device.
 */
export type SinkOutcome = number | string | SinkReport | undefined;

/** Per sink name; `mqtt` and `lpwan` are always present because clients of the API read them. */
export type Delivered = { mqtt: number; lpwan: string } & Record<string, number | string>;

/** Announced after a command was recorded and handed to every sink (the console's live view listens). */
export interface CommandEvent {
  deviceId: string;
  /** Asset name → commanded value (one member for an asset command). */
  values: Record<string, JsonValue>;
  meta: Record<string, JsonValue> | null;
  at: number;
  source: string;
  delivered: Delivered;
  /** What the sinks warned of while encoding it (e.g. an asset the radio frame had no value for). */
  warnings?: string[];
}

/** Who sends a command and how it came: what the router needs besides the command itself. */
export interface CommandOrigin {
  principal: Principal;
  /** The door or link it came through (`http`, `mqtt`, `upstream`): recorded with the command. */
  via: string;
  /**
   * The topic of this broker it was published on, when it came as an MQTT publish. Such a sender
   * has no answer to read a refusal from, so the router reports refusals on the device's errors
   * topic (docs/architecture.md, "Ingest and commands").
   */
  publishedOn?: string;
}

export interface AssetCommandRequest extends CommandOrigin {
  target: AssetTarget;
  /** `{value, meta?}` (keys in any case). */
  body: unknown;
  /** The command's time when it was given elsewhere (a command from the upstream keeps the central's); else now. */
  at?: number;
}

export interface DeviceCommandRequest extends CommandOrigin {
  deviceId: string;
  /** A map asset name → value, or `{values: {...}, meta?}`. */
  body: unknown;
  /** `meta` given beside the body (HTTP's `?meta=` query), for the map form. */
  meta?: unknown;
  /** The command's time when it was given elsewhere (a device command from the central keeps its `at`); else now. */
  at?: number;
}

/** A refused command whose sender can learn of it only on the device's errors topic. */
export interface CommandRefusal {
  deviceId: string;
  topic: string;
  code: string;
  error: string;
  at: number;
}

export interface CommandDelivery {
  at: string;
  delivered: Delivered;
  /** Present when a sink warned while encoding the command (docs/api.md, "Commands"). */
  warnings?: string[];
}

/**
 * Something that carries commands towards devices (MQTT subscribers, the radio queue, a link to a
 * gateway). Each sink reports under its own `name` in the answer's `delivered`, so a new way down
 * is a new sink, not a change to the router or its callers.
 */
export interface CommandSink {
  readonly name: string;
  deliverAssetCommand(command: AssetCommand): SinkOutcome;
  /** A radio sink queues the whole device command as one frame; MQTT delivers it per asset. */
  deliverDeviceCommand(command: DeviceCommand): SinkOutcome;
}

/** Counts add up across sinks of the same name; a status word replaces the default; warnings are gathered. */
function collectOutcomes(sinks: readonly CommandSink[], deliver: (sink: CommandSink) => SinkOutcome): { delivered: Delivered; warnings: string[] } {
  const delivered: Delivered = { mqtt: 0, lpwan: 'none' };
  const warnings: string[] = [];
  for (const sink of sinks) {
    const result = deliver(sink);
    if (result === undefined) continue;
    const outcome = typeof result === 'object' ? result.outcome : result;
    if (typeof result === 'object') warnings.push(...result.warnings);
    const before = delivered[sink.name];
    delivered[sink.name] = typeof outcome === 'number' && typeof before === 'number' ? before + outcome : outcome;
  }
  return { delivered, warnings };
}

/** The answer to the sender: `warnings` only when there are some, so answers without stay as they were. */
function deliveryAnswer(at: number, delivered: Delivered, warnings: string[]): CommandDelivery {
  return warnings.length > 0 ? { at: new Date(at).toISOString(), delivered, warnings } : { at: new Date(at).toISOString(), delivered };
}

function parseMeta(raw: unknown): Record<string, JsonValue> | null {
  if (raw === undefined || raw === null) return null;
  if (!isJsonObject(raw)) throw new ServiceError('INVALID_BODY', '"meta" must be an object or null');
  return raw as Record<string, JsonValue>;
}

/**
 * The one road every command takes back down (HTTP, MQTT app publishes, the upstream):
 * authorize → validate against the profile → record → hand to every sink. Every refusal is thrown
 * to the door, which maps it to its own answer; the router alone decides which are also reported
 * (`refused`, published on `device/<id>/errors`): those of commands published on a topic of this
 * broker, whose sender has no other way to hear of them.
 */
export class CommandRouter extends EventEmitter<{ command: [CommandEvent]; refused: [CommandRefusal] }> {
  readonly #catalog: Catalog;
  readonly #log: CommandStore;
  readonly #clock: Clock;
  readonly #sinks: CommandSink[] = [];
  commandsSent = 0;

  /** `log`: where every routed command is recorded. */
  constructor(catalog: Catalog, log: CommandStore, clock: Clock) {
    super();
    this.#catalog = catalog;
    this.#log = log;
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

  sendAssetCommand(request: AssetCommandRequest): CommandDelivery {
    try {
      return this.#sendAssetCommand(request);
    } catch (err) {
      this.refuse(request, 'assetId' in request.target ? this.#catalog.assetById(request.target.assetId)?.deviceId : request.target.deviceId, err);
      throw err;
    }
  }

  sendDeviceCommand(request: DeviceCommandRequest): CommandDelivery {
    try {
      return this.#sendDeviceCommand(request);
    } catch (err) {
      this.refuse(request, request.deviceId, err);
      throw err;
    }
  }

  /**
   * Reports a refused command where its sender can learn of it: on the device's errors topic when
   * it was published on this broker (and the device exists); an answer carries it otherwise. Doors
   * call it too for what they refuse before the router sees the command (a payload over the limit,
   * JSON that does not parse).
   */
  refuse(origin: CommandOrigin, deviceId: string | undefined, err: unknown): void {
    if (origin.publishedOn === undefined || !isServiceError(err) || !deviceId || !this.#catalog.device(deviceId)) return;
    this.emit('refused', { deviceId, topic: origin.publishedOn, code: err.code, error: err.message, at: this.#clock.now() });
  }

  #sendAssetCommand({ principal, target, body, via, at }: AssetCommandRequest): CommandDelivery {
    if (!canCommand(principal)) throw new ServiceError('FORBIDDEN', 'sending commands needs an application token with the "command" scope');
    const asset = resolveAsset(this.#catalog, target);
    if (!isJsonObject(body)) throw new ServiceError('INVALID_MESSAGE', 'command must be a JSON object {"value", "meta"?}');
    const value = memberIgnoringCase(body, 'value') as JsonValue;
    this.#checkActuator(asset, value);
    const meta = parseMeta(memberIgnoringCase(body, 'meta'));
    const device = this.#catalog.device(asset.deviceId)!;
    at ??= this.#clock.now();
    this.#log.record({ deviceId: device.id, assetId: asset.id, valueJson: JSON.stringify(value), metaJson: meta && JSON.stringify(meta), at, source: via });
    const command: AssetCommand = { device, asset, value, meta, at };
    const { delivered, warnings } = collectOutcomes(this.#sinks, (sink) => sink.deliverAssetCommand(command));
    this.commandsSent++;
    this.emit('command', { deviceId: device.id, values: { [asset.name]: value }, meta, at, source: via, delivered, ...(warnings.length ? { warnings } : {}) });
    return deliveryAnswer(at, delivered, warnings);
  }

  /** All assets must be valid: one frame goes out. */
  #sendDeviceCommand({ principal, deviceId, body, meta: metaBeside, via, at: givenAt }: DeviceCommandRequest): CommandDelivery {
    if (!canCommand(principal)) throw new ServiceError('FORBIDDEN', 'sending commands needs an application token with the "command" scope');
    const device = this.#catalog.device(deviceId);
    if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${deviceId} not found`);
    if (!isJsonObject(body)) throw new ServiceError('INVALID_MESSAGE', 'device command must be a JSON object mapping asset names to values');
    const wrapped = memberIgnoringCase(body, 'values');
    const values = (isJsonObject(wrapped) ? wrapped : body) as Record<string, JsonValue>;
    const meta = parseMeta(isJsonObject(wrapped) ? memberIgnoringCase(body, 'meta') : metaBeside);
    const names = Object.keys(values);
    if (names.length === 0) throw new ServiceError('INVALID_MESSAGE', 'device command names no asset');
    const assets = names.map((name) => {
      const asset = this.#catalog.assetByName(device.id, name);
      if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${device.id}`);
      this.#checkActuator(asset, values[name]);
      return asset;
    });
    const at = givenAt ?? this.#clock.now();
    this.#log.record({ deviceId: device.id, assetId: null, valueJson: JSON.stringify(values), metaJson: meta && JSON.stringify(meta), at, source: via });
    const command: DeviceCommand = { device, values, assets, meta, at };
    const { delivered, warnings } = collectOutcomes(this.#sinks, (sink) => sink.deliverDeviceCommand(command));
    this.commandsSent++;
    this.emit('command', { deviceId: device.id, values, meta, at, source: via, delivered, ...(warnings.length ? { warnings } : {}) });
    return deliveryAnswer(at, delivered, warnings);
  }
}

/** The JSON message on both command topics (docs/mqtt.md): `{value, at, meta?}`, written once in the wire model. */
export { commandPayload } from '../wire/messages.js';
