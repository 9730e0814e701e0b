import { ServiceError } from '../core/errors.js';
import type { DeviceRecord } from '../core/model.js';
import type { CachedAsset } from '../store/catalog.js';
import { decodeCborDeviceState } from '../codec/index.js';
import type { DecodeResult } from '../codec/types.js';
import { looksLikeJsonObject, statesFromJsonBytes } from '../codec/json-state.js';
import { decodeCborBody } from '../codec/cbor.js';
import { BUILTIN_CBOR_VERSION, type DeviceCodecs } from '../device-codecs/device-codecs.js';
import { parseMqttAssetState, stateFromMessage, type StateInput } from '../ingest/messages.js';
import { DEFAULT_JSON_DEPTH, parseJson } from '../core/json.js';
import type { Uplink } from '../ingest/uplinks.js';

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
 * Turns an uplink's payload into states by asset name, choosing by the envelope's format hint
 * (docs/architecture.md, "Ingest and commands"):
 * - `json` / `cbor`: a device state in that form, as the sender declared it (HTTP Content-Type);
 * - `device`: the device decides. A payload that came with a transport port (a radio frame) goes
 *   to the device's codec when it has one, because radio codecs read the port; otherwise the
 *   device's `payloadFormat` does (`auto`: a JSON object if it parses as one, else CBOR; `abcl`
 *   and `js`: the codec);
 * - `codec`: the device's codec, or the door's own (a serial modem's raw codec) when it names one.
 * One asset's state (`asset`) is read as an API body (`json`, `cbor`: `{value, at?}`) or in MQTT's
 * text forms (`text`: also a bare value or the legacy `<seconds>|<value>`, converted by the asset's
 * profile type). JSON is parsed asset by asset, so each bad member is refused by name; everything
 * binary goes through the codec layer, and its raw bytes are kept whatever the codec makes of them.
 */
export class DeviceStateDecoder {
  readonly #codecs: DeviceCodecs | undefined;
  readonly #jsonDepth: number;

  /** Without `codecs` only the built-in formats decode (binary uplinks for a codec are refused). */
  constructor(codecs: DeviceCodecs | undefined, limits: { jsonDepth: number } = { jsonDepth: DEFAULT_JSON_DEPTH }) {
    this.#codecs = codecs;
    this.#jsonDepth = limits.jsonDepth;
  }

  /** `asset`: the asset an asset-state payload names (the pipeline found it first). */
  decode(device: DeviceRecord, uplink: Uplink, receivedAt: number, asset?: CachedAsset): DecodedMessage {
    const payload = uplink.payload;
    const where = uplink.label;
    if ('states' in payload) return { states: payload.states };
    if ('asset' in payload) return { states: { [payload.asset]: this.#assetState(payload.bytes, payload.form, asset, where) } };
    const raw: RawUplink = { deviceId: device.id, payload: payload.bytes, source: uplink.via, receivedAt };
    if (uplink.fPort !== undefined) raw.fPort = uplink.fPort;
    switch (payload.format) {
      case 'json':
        return { states: statesFromJsonBytes(payload.bytes, where, this.#jsonDepth) };
      case 'cbor':
        return this.#outcome(raw, BUILTIN_CBOR_VERSION, 'cbor', decodeCborDeviceState(payload.bytes), where, 'INVALID_CBOR');
      case 'codec':
        if (payload.decoder) return this.#outcome(raw, payload.decoder.version, null, payload.decoder.decode(raw.payload, raw), where, 'DECODE_FAILED');
        return this.#byCodec(device, raw, where);
      case 'device':
        return this.#byDevice(device, raw, where);
    }
  }

  #byDevice(device: DeviceRecord, raw: RawUplink, where: string): DecodedMessage {
    if (raw.fPort !== undefined && this.#codecs?.get(device)) return this.#byCodec(device, raw, where);
    const format = device.payloadFormat;
    const bytes = raw.payload;
    if (format === 'json' || (format === 'auto' && looksLikeJsonObject(bytes))) return { states: statesFromJsonBytes(bytes, where, this.#jsonDepth) };
    // Not declared by the door: the device's format chose CBOR, so a later codec may re-decode it.
    if (format === 'auto' || format === 'cbor') return this.#outcome(raw, BUILTIN_CBOR_VERSION, null, decodeCborDeviceState(bytes), where, 'INVALID_CBOR');
    return this.#byCodec(device, raw, where);
  }

  /** The device's codec (fPort reaches it); without one, nothing but the kept bytes and a DECODE_FAILED refusal. */
  #byCodec(device: DeviceRecord, raw: RawUplink, where: string): DecodedMessage {
    const codec = this.#codecs?.get(device);
    if (!codec) {
      const failed = this.#codecs?.failure(device);
      const error = failed
        ? `device ${device.id}'s stored codec settings do not load (${failed}); set them again with PUT /device/${device.id}/codec`
        : `device ${device.id} has no custom binary codec configured (set one with PUT /device/${device.id}/codec)`;
      return {
        states: {},
        uplink: { raw, codec: null, declaredFormat: null, error: 'no custom binary codec configured' },
        failure: new ServiceError('DECODE_FAILED', `${where}: ${error}`),
      };
    }
    const decoder = currentUplinkDecoder(this.#codecs!, device);
    return this.#outcome(raw, decoder.version, null, decoder.decode(raw.payload, raw), where, 'DECODE_FAILED');
  }

  #assetState(bytes: Uint8Array, form: 'json' | 'cbor' | 'text', asset: CachedAsset | undefined, where: string): StateInput {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (form === 'text') return parseMqttAssetState(buffer, asset?.profile.type, where, this.#jsonDepth);
    // An API body: `value` is required; an empty body is a body without it.
    const message = bytes.length === 0 ? undefined : form === 'cbor' ? decodeCborBody(bytes, where) : parseJson(buffer.toString('utf8'), where, this.#jsonDepth);
    return stateFromMessage(message, false, where);
  }

  #outcome(raw: RawUplink, codec: string, declaredFormat: string | null, result: DecodeResult, where: string, code: 'INVALID_CBOR' | 'DECODE_FAILED'): DecodedMessage {
    const failed = result.errors.length > 0;
    const uplink: KeptUplink = { raw, codec, declaredFormat, error: failed ? result.errors.join('; ') : null };
    if (failed) return { states: {}, uplink, failure: failureOf(result, where, code) };
    return { states: result.states as Record<string, StateInput>, uplink, warnings: result.warnings };
  }
}
