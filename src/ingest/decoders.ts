import { ServiceError } from '../core/errors.js';
import type { DeviceRecord } from '../core/model.js';
import { decodeCborDeviceState } from '../codec/index.js';
import type { DecodeResult } from '../codec/types.js';
import { looksLikeJsonObject, statesFromJsonBytes } from '../codec/json-state.js';
import { BUILTIN_CBOR_VERSION, type DeviceCodecs } from '../device-codecs/device-codecs.js';
import { type StateInput } from '../ingest/messages.js';
import { DEFAULT_JSON_DEPTH } from '../core/json.js';

export type BodyKind = 'json' | 'cbor' | 'binary';

/** Bytes a device sent, as any door (HTTP, MQTT, a radio) received them, before any codec. */
export interface RawUplink {
  deviceId: string;
  payload: Uint8Array;
  /** The transport's port (LoRaWAN FPort); JS codecs get it as `fPort`, and it is kept with the bytes. */
  fPort?: number;
  /** `http`, `mqtt`, `gwmp:<gateway EUI>`, `serial:<path>` … */
  source: string;
  /** When the daemon received it (ms since epoch): the `at` of states the codec gives no time. */
  receivedAt: number;
}

/** A raw uplink on its way to the store, with what decoding it gave. */
export interface KeptUplink {
  raw: RawUplink;
  /** The codec version that decoded it (null when the device has no codec for it). */
  codec: string | null;
  /** Set when the door fixed the format (HTTP `application/cbor`): a re-decode leaves it alone. */
  declaredFormat: string | null;
  /** The codec's errors, when it could not decode the bytes at all. */
  error: string | null;
}

/**
 * What one message decoded to. The raw uplink commits in the same transaction as its states, so
 * a state never points at an uplink that is not there, and an acknowledged uplink is never lost.
 */
export interface DecodedMessage {
  states: Record<string, StateInput>;
  /** Absent for JSON, which is not a raw uplink. */
  uplink?: KeptUplink;
  /** Nothing could be decoded: the uplink is still kept, then this is the refusal. */
  failure?: ServiceError;
  /** The codec's warnings (parts dropped or changed). */
  warnings?: string[];
}

/** The device's uplink codec as it stands now: what the binary path, re-decode and try run. */
export interface UplinkDecoder {
  version: string;
  decode(payload: Uint8Array, context: { fPort?: number; receivedAt: number }): DecodeResult;
}

/** The device's codec, or the built-in CBOR device state for a device without one. */
export function currentUplinkDecoder(codecs: DeviceCodecs, device: DeviceRecord): UplinkDecoder {
  const codec = codecs.get(device);
  if (!codec) return { version: BUILTIN_CBOR_VERSION, decode: (payload) => decodeCborDeviceState(payload) };
  return {
    version: codecs.version(device) ?? codec.uplinkFormat,
    decode: (payload, context) => codec.decodeUplink(payload, { fPort: context.fPort, receivedAt: new Date(context.receivedAt) }),
  };
}

/** The message of a decode that failed: it names where, and every error the codec found. */
function failureOf(result: DecodeResult, where: string, code: 'INVALID_CBOR' | 'DECODE_FAILED'): ServiceError {
  return new ServiceError(code, `${where}: ${result.errors.join('; ')}`);
}

/**
 * Turns device state bytes into states by asset name. Over HTTP the Content-Type says the kind;
 * over MQTT the device's `payloadFormat` does (`auto`: a JSON object if it parses as one, else CBOR);
 * a radio door always hands over raw bytes with a port. JSON is parsed here, asset by asset, so each
 * bad member is refused by name; everything binary goes through the codec layer, and its raw bytes
 * are kept whatever the codec makes of them.
 */
export class DeviceStateDecoder {
  readonly #codecs: DeviceCodecs;
  readonly #jsonDepth: number;

  constructor(codecs: DeviceCodecs, limits: { jsonDepth: number } = { jsonDepth: DEFAULT_JSON_DEPTH }) {
    this.#codecs = codecs;
    this.#jsonDepth = limits.jsonDepth;
  }

  /**
   * The door-neutral path for raw bytes: the door's codec when it names one, else the device's
   * codec (fPort reaches it) or, without one, nothing but the kept bytes and a DECODE_FAILED refusal.
   */
  decodeUplink(device: DeviceRecord, raw: RawUplink, where = 'uplink', doorDecoder?: UplinkDecoder): DecodedMessage {
    // A door that configures its own codec for these bytes (a serial modem's raw codec) passes it.
    if (doorDecoder) return this.#outcome(raw, doorDecoder.version, null, doorDecoder.decode(raw.payload, raw), where, 'DECODE_FAILED');
    const codec = this.#codecs.get(device);
    if (!codec) {
      const failed = this.#codecs.failure(device);
      const error = failed
        ? `device ${device.id}'s stored codec settings do not load (${failed}); set them again with PUT /device/${device.id}/codec`
        : `device ${device.id} has no custom binary codec configured (set one with PUT /device/${device.id}/codec)`;
      return {
        states: {},
        uplink: { raw, codec: null, declaredFormat: null, error: 'no custom binary codec configured' },
        failure: new ServiceError('DECODE_FAILED', `${where}: ${error}`),
      };
    }
    const decoder = currentUplinkDecoder(this.#codecs, device);
    return this.#outcome(raw, decoder.version, null, decoder.decode(raw.payload, raw), where, 'DECODE_FAILED');
  }

  /** By the request's declared kind (HTTP). */
  decode(device: DeviceRecord, bytes: Uint8Array, kind: BodyKind, where: string, source: string, receivedAt: number): DecodedMessage {
    if (kind === 'json') return { states: statesFromJsonBytes(bytes, where, this.#jsonDepth) };
    const raw: RawUplink = { deviceId: device.id, payload: bytes, source, receivedAt };
    if (kind === 'cbor') return this.#outcome(raw, BUILTIN_CBOR_VERSION, 'cbor', decodeCborDeviceState(bytes), where, 'INVALID_CBOR');
    return this.decodeUplink(device, raw, where);
  }

  /** By the device's payload format (MQTT). */
  decodeByDeviceFormat(device: DeviceRecord, bytes: Uint8Array, where: string, source: string, receivedAt: number): DecodedMessage {
    const format = device.payloadFormat;
    if (format === 'json' || (format === 'auto' && looksLikeJsonObject(bytes))) return { states: statesFromJsonBytes(bytes, where, this.#jsonDepth) };
    if (format === 'auto' || format === 'cbor') {
      // Not declared by the door: the device's format chose CBOR, so a later codec may re-decode it.
      const raw: RawUplink = { deviceId: device.id, payload: bytes, source, receivedAt };
      return this.#outcome(raw, BUILTIN_CBOR_VERSION, null, decodeCborDeviceState(bytes), where, 'INVALID_CBOR');
    }
    return this.decodeUplink(device, { deviceId: device.id, payload: bytes, source, receivedAt }, where);
  }

  #outcome(raw: RawUplink, codec: string, declaredFormat: string | null, result: DecodeResult, where: string, code: 'INVALID_CBOR' | 'DECODE_FAILED'): DecodedMessage {
    const failed = result.errors.length > 0;
    const uplink: KeptUplink = { raw, codec, declaredFormat, error: failed ? result.errors.join('; ') : null };
    if (failed) return { states: {}, uplink, failure: failureOf(result, where, code) };
    return { states: result.states as Record<string, StateInput>, uplink, warnings: result.warnings };
  }
}
