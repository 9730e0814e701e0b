// JSON data as every layer sees it (request bodies, MQTT payloads, codec results, stored values),
// and the few rules for reading it that the API and the codecs share.
import { ServiceError } from './errors.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** A JSON object: not null, not an array, not bytes (a CBOR byte string or a Buffer). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/**
 * Sets an own member even when the key is `__proto__`: plain assignment would replace the
 * object's prototype instead, and member names come from devices and documents.
 */
export function setMember<T>(target: { [key: string]: T }, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/**
 * An API body member, its name matched ignoring case: the cloud's SDKs send `Value`, `Name`,
 * `Is` … (docs/api.md, "Bodies"). `name` is given in lower case. Codec documents (ABCL) match
 * their keys exactly instead, with `Object.hasOwn`.
 */
export function memberIgnoringCase(obj: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(obj, name)) return obj[name];
  for (const key of Object.keys(obj)) if (key.toLowerCase() === name) return obj[key];
  return undefined;
}

export function hasMemberIgnoringCase(obj: Record<string, unknown>, name: string): boolean {
  return Object.hasOwn(obj, name) || Object.keys(obj).some((key) => key.toLowerCase() === name);
}

/** Default of `limits.jsonDepth`: nested arrays and objects a message may have, its envelope included. */
export const DEFAULT_JSON_DEPTH = 32;

/**
 * The deepest nesting of arrays and objects in JSON text, counted without parsing, so a message
 * like `[[[…32 000…]]]` is refused before anything recursive (JSON.stringify, validation) sees it.
 * Returns as soon as `limit` is passed.
 */
export function jsonNestingOver(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** JSON text from a request or a payload: INVALID_JSON naming `where` when it is not valid or nested too deeply. */
export function parseJson(text: string, where: string, maxDepth = DEFAULT_JSON_DEPTH): unknown {
  if (jsonNestingOver(text, maxDepth)) {
    throw new ServiceError('INVALID_JSON', `${where}: JSON nested deeper than ${maxDepth} levels (limits.jsonDepth)`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ServiceError('INVALID_JSON', `${where}: not valid JSON (${(err as Error).message})`);
  }
}
