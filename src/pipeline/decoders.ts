import { ServiceError } from '../core/errors.js';
import type { Clock } from '../core/time.js';
import type { DeviceRecord, Store } from '../store/store.js';
import { decodeCborDeviceState } from '../codec/index.js';
import type { DecodeResult } from '../codec/types.js';
import { looksLikeJsonObject, statesFromJsonBytes } from './device-state.js';
import type { DeviceCodecs } from './device-codecs.js';
import type { StateInput } from './messages.js';

export type BodyKind = 'json' | 'cbor' | 'binary';

/**
 * Turns device state bytes into states by asset name. Over HTTP the Content-Type says the kind;
 * over MQTT the device's `payloadFormat` does (`auto`: a JSON object if it parses as one, else CBOR).
 * JSON is parsed here, asset by asset, so each bad member is refused by name; everything binary
 * goes through the codec layer, and its raw bytes are kept whatever the codec makes of them.
 */
export class DeviceStateDecoder {
  readonly #store: Store;
  readonly #codecs: DeviceCodecs;
  readonly #clock: Clock;
  /** Codec warnings (parts dropped or changed): the daemon reports them on the errors topic. */
  onWarnings: (device: DeviceRecord, warnings: string[]) => void = () => {};

  constructor(store: Store, codecs: DeviceCodecs, clock: Clock) {
    this.#store = store;
    this.#codecs = codecs;
    this.#clock = clock;
  }

  /** By the request's declared kind (HTTP). */
  decode(device: DeviceRecord, bytes: Uint8Array, kind: BodyKind, where: string, source = 'http'): Record<string, StateInput> {
    if (kind === 'json') return statesFromJsonBytes(bytes, where);
    if (kind === 'cbor') return this.#keepAndConvert(device, bytes, source, decodeCborDeviceState(bytes), where, 'INVALID_CBOR');
    const codec = this.#codecs.get(device);
    if (!codec) {
      this.#keep(device, bytes, source, false, 'no custom binary codec configured');
      throw new ServiceError('DECODE_FAILED', `${where}: device ${device.id} has no custom binary codec configured (set one with PUT /device/${device.id}/codec)`);
    }
    return this.#keepAndConvert(device, bytes, source, codec.decodeUplink(bytes, { receivedAt: new Date(this.#clock.now()) }), where, 'DECODE_FAILED');
  }

  /** By the device's payload format (MQTT). */
  decodeByDeviceFormat(device: DeviceRecord, bytes: Uint8Array, where: string, source = 'mqtt'): Record<string, StateInput> {
    const format = device.payloadFormat;
    if (format === 'json' || (format === 'auto' && looksLikeJsonObject(bytes))) return statesFromJsonBytes(bytes, where);
    if (format === 'auto' || format === 'cbor') return this.decode(device, bytes, 'cbor', where, source);
    return this.decode(device, bytes, 'binary', where, source);
  }

  #keep(device: DeviceRecord, bytes: Uint8Array, source: string, decoded: boolean, error: string | null): void {
    this.#store.recordUplink({ deviceId: device.id, at: this.#clock.now(), payload: bytes, port: null, source, decoded, error });
  }

  #keepAndConvert(device: DeviceRecord, bytes: Uint8Array, source: string, result: DecodeResult, where: string, code: 'INVALID_CBOR' | 'DECODE_FAILED'): Record<string, StateInput> {
    const failed = result.errors.length > 0;
    this.#keep(device, bytes, source, !failed, failed ? result.errors.join('; ') : null);
    if (failed) throw new ServiceError(code, `${where}: ${result.errors.join('; ')}`);
    if (result.warnings.length > 0) this.onWarnings(device, result.warnings);
    return result.states as Record<string, StateInput>;
  }
}
