import { ServiceError } from '../core/errors.js';
import type { DeviceRecord } from '../store/store.js';
import { decodeCborBody, looksLikeJsonObject, statesFromJsonBytes } from './device-state.js';
import { isPlainObject, type JsonValue, type StateInput } from './messages.js';

export type BodyKind = 'json' | 'cbor' | 'binary';

/**
 * Turns device state bytes into states by asset name. Over HTTP the Content-Type says the kind;
 * over MQTT the device's `payloadFormat` does (`auto`: a JSON object if it parses as one, else CBOR).
 */
export class DeviceStateDecoder {
  /** By the request's declared kind (HTTP). */
  decode(device: DeviceRecord, bytes: Uint8Array, kind: BodyKind, where: string): Record<string, StateInput> {
    if (kind === 'json') return statesFromJsonBytes(bytes, where);
    if (kind === 'cbor') return this.#cbor(bytes, where);
    throw new ServiceError('DECODE_FAILED', `${where}: device ${device.id} has no custom binary codec configured (payloadFormat ${device.payloadFormat})`);
  }

  /** By the device's payload format (MQTT). */
  decodeByDeviceFormat(device: DeviceRecord, bytes: Uint8Array, where: string): Record<string, StateInput> {
    switch (device.payloadFormat) {
      case 'json':
        return statesFromJsonBytes(bytes, where);
      case 'cbor':
        return this.#cbor(bytes, where);
      case 'auto':
        return looksLikeJsonObject(bytes) ? statesFromJsonBytes(bytes, where) : this.#cbor(bytes, where);
      default:
        return this.decode(device, bytes, 'binary', where);
    }
  }

  /** CBOR simplified form (spec 2.4): a map of asset name → bare value. */
  #cbor(bytes: Uint8Array, where: string): Record<string, StateInput> {
    const map = decodeCborBody(bytes, where);
    if (!isPlainObject(map)) throw new ServiceError('INVALID_CBOR', `${where}: a CBOR device state must be a map of asset names`);
    const states: Record<string, StateInput> = {};
    for (const [name, value] of Object.entries(map)) states[name] = { value: value as JsonValue };
    return states;
  }
}
