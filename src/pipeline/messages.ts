import { ServiceError } from '../core/errors.js';
import { parseTimestamp } from '../core/time.js';
import type { ProfileType } from '../core/profiles.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** An asset state as a door hands it to the pipeline: `at` still as received. */
export interface StateInput {
  value: JsonValue;
  at?: unknown;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Member lookup ignoring case: the cloud's Python SDK sends `Value`, `Name`, `Is` … (contract §3). */
export function member(obj: Record<string, unknown>, name: string): unknown {
  if (name in obj) return obj[name];
  for (const key of Object.keys(obj)) if (key.toLowerCase() === name) return obj[key];
  return undefined;
}

export function hasMember(obj: Record<string, unknown>, name: string): boolean {
  return name in obj || Object.keys(obj).some((k) => k.toLowerCase() === name);
}

/**
 * `{value, at?}` from a parsed body. With `bareValueAllowed` (MQTT) anything that is not an object
 * with a `value` member is itself the value; over HTTP a missing `value` is a 400.
 */
export function stateFromMessage(message: unknown, bareValueAllowed: boolean, where = 'message'): StateInput {
  if (isPlainObject(message) && hasMember(message, 'value')) {
    return { value: member(message, 'value') as JsonValue, at: member(message, 'at') };
  }
  if (bareValueAllowed) return { value: message as JsonValue };
  throw new ServiceError('INVALID_MESSAGE', `${where}: member "value" is required`);
}

/** Epoch ms of a state's `at`; a missing or null `at` is the receive time (spec 2.3). */
export function resolveAt(at: unknown, receivedAt: number, where: string): number {
  if (at === undefined || at === null) return receivedAt;
  if (typeof at !== 'string') throw new ServiceError('INVALID_TIMESTAMP', `${where}: "at" must be an ISO 8601 string with a zone`);
  const epoch = parseTimestamp(at);
  if (epoch === undefined) {
    throw new ServiceError('INVALID_TIMESTAMP', `${where}: "at" ${JSON.stringify(at)} is not an ISO 8601 timestamp with a zone`);
  }
  return epoch;
}

export function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ServiceError('INVALID_JSON', `${where}: not valid JSON (${(err as Error).message})`);
  }
}

const LEGACY_FORM = /^(\d{1,12}(?:\.\d+)?)\|([\s\S]*)$/;

/** The value of a legacy `<unixSeconds>|<value>` payload, converted by the asset's profile type. */
function legacyValue(text: string, type: ProfileType | undefined, where: string): JsonValue {
  switch (type) {
    case 'integer':
    case 'number': {
      const n = Number(text.trim());
      if (text.trim() === '' || !Number.isFinite(n)) throw new ServiceError('INVALID_MESSAGE', `${where}: legacy value ${JSON.stringify(text)} is not a number`);
      return n;
    }
    case 'boolean': {
      const t = text.trim().toLowerCase();
      if (t === 'true' || t === '1') return true;
      if (t === 'false' || t === '0') return false;
      throw new ServiceError('INVALID_MESSAGE', `${where}: legacy value ${JSON.stringify(text)} is not a boolean`);
    }
    case 'object':
    case 'array':
      return parseJson(text, where) as JsonValue;
    default:
      return text;
  }
}

/**
 * An MQTT asset state payload (contract §4): JSON `{value, at?}`, a bare JSON value, or the legacy
 * `<unixSeconds>|<value>` form. Text that is neither JSON nor legacy is refused rather than guessed.
 */
export function parseMqttAssetState(payload: Buffer, type: ProfileType | undefined, where: string): StateInput {
  const text = payload.toString('utf8');
  const legacy = LEGACY_FORM.exec(text);
  if (legacy) {
    const seconds = Number(legacy[1]);
    return { value: legacyValue(legacy[2]!, type, where), at: new Date(seconds * 1000).toISOString() };
  }
  return stateFromMessage(parseJson(text, where), true, where);
}
