import { decodeCborItem } from '../codec/cbor.js';
import { ServiceError } from '../core/errors.js';
import { DEFAULT_JSON_DEPTH, isPlainObject, parseJson, stateFromMessage, type StateInput } from '../ingest/messages.js';

/**
 * The members of a JSON device state message (docs/api.md, "Device states"): asset name → `{value, at?}`.
 * A member that is not such an object is taken as the bare value, as MQTT asset states are.
 */
export function statesFromJsonObject(message: unknown, where: string): Record<string, StateInput> {
  if (!isPlainObject(message)) throw new ServiceError('INVALID_MESSAGE', `${where}: a device state must be a JSON object of asset names`);
  const states: Record<string, StateInput> = {};
  for (const [name, member] of Object.entries(message)) states[name] = stateFromMessage(member, true, `${where}: asset "${name}"`);
  return states;
}

export function statesFromJsonBytes(bytes: Uint8Array, where: string, maxDepth = DEFAULT_JSON_DEPTH): Record<string, StateInput> {
  return statesFromJsonObject(parseJson(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'), where, maxDepth), where);
}

/** A JSON object, by its first non-blank byte: `auto` tries JSON only then (docs/api.md, "Device states"). */
export function looksLikeJsonObject(bytes: Uint8Array): boolean {
  for (const b of bytes) {
    if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) continue;
    return b === 0x7b;
  }
  return false;
}

/** Decodes a CBOR request body into JSON data (asset states, assets, commands sent as CBOR). */
export function decodeCborBody(bytes: Uint8Array, where: string): unknown {
  // Non-finite floats stay numbers here, so the profile check refuses them by name instead of storing null.
  const result = decodeCborItem(bytes, { keepNonFinite: true });
  if (result.errors.length > 0) throw new ServiceError('INVALID_CBOR', `${where}: not valid CBOR (${result.errors.join('; ')})`);
  return result.value;
}
