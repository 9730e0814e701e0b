import { ServiceError } from '../core/errors.js';
import { DEFAULT_JSON_DEPTH, parseJson, type JsonValue } from '../core/json.js';
import { parseTimestamp } from '../core/time.js';
import { assetEntry, type AssetEntry } from '../codec/json-state.js';
import type { ProfileType } from '../core/profiles.js';

/** An asset state as a door hands it to the pipeline: `at` still as received. */
export type StateInput = AssetEntry;

/**
 * `{value, at?}` from a parsed body. With `bareValueAllowed` (MQTT) anything that is not an object
 * with a `value` member is itself the value; over HTTP a missing `value` is a 400.
 */
export function stateFromMessage(message: unknown, bareValueAllowed: boolean, where = 'message'): StateInput {
  const entry = assetEntry(message, 'ignoring case');
  if (entry !== undefined) return entry;
  if (bareValueAllowed) return { value: message as JsonValue };
  throw new ServiceError('INVALID_MESSAGE', `${where}: member "value" is required`);
}

/** Epoch ms of a state's `at`; a missing or null `at` is the receive time (docs/api.md, "Bodies"). */
export function resolveAt(at: unknown, receivedAt: number, where: string): number {
  if (at === undefined || at === null) return receivedAt;
  if (typeof at !== 'string') throw new ServiceError('INVALID_TIMESTAMP', `${where}: "at" must be an ISO 8601 string with a zone`);
  const epoch = parseTimestamp(at);
  if (epoch === undefined) {
    throw new ServiceError('INVALID_TIMESTAMP', `${where}: "at" ${JSON.stringify(at)} is not an ISO 8601 timestamp with a zone`);
  }
  return epoch;
}

/**
 * What makes a decoded value unstorable whatever its profile: nesting beyond the limit (values
 * from codecs never passed through parseJson) or a number that is not finite (`1e400` parses to
 * Infinity, which JSON cannot hold: it would be stored as null). Walks without recursion.
 */
export function valueProblem(value: unknown, maxDepth: number): ServiceError | undefined {
  interface Item { value: unknown; depth: number; parent?: Item; key?: string | number }
  // The path is built only for the error, from parent links: most values are checked with none.
  const pathOf = (item: Item): string => (item.parent ? `${pathOf(item.parent)}/${item.key}` : 'value');
  const pending: Item[] = [{ value, depth: 0 }];
  while (pending.length > 0) {
    const item = pending.pop()!;
    const v = item.value;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return new ServiceError('PROFILE_MISMATCH', `${pathOf(item)} must be a finite number, not ${v} (finite)`);
    } else if (typeof v === 'object' && v !== null) {
      if (item.depth >= maxDepth) return new ServiceError('INVALID_MESSAGE', `${pathOf(item)} is nested deeper than ${maxDepth} levels (limits.jsonDepth)`);
      const depth = item.depth + 1;
      if (Array.isArray(v)) for (let i = v.length - 1; i >= 0; i--) pending.push({ value: v[i], depth, parent: item, key: i });
      else for (const key of Object.keys(v)) pending.push({ value: (v as Record<string, unknown>)[key], depth, parent: item, key });
    }
  }
  return undefined;
}

const LEGACY_FORM = /^(\d{1,12}(?:\.\d+)?)\|([\s\S]*)$/;

/** The value of a legacy `<unixSeconds>|<value>` payload, converted by the asset's profile type. */
function legacyValue(text: string, type: ProfileType | undefined, where: string, maxDepth: number): JsonValue {
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
      return parseJson(text, where, maxDepth) as JsonValue;
    default:
      return text;
  }
}

/**
 * An MQTT asset state payload (docs/mqtt.md): JSON `{value, at?}`, a bare JSON value, or the legacy
 * `<unixSeconds>|<value>` form. Text that is neither JSON nor legacy is refused rather than guessed.
 */
export function parseMqttAssetState(payload: Buffer, type: ProfileType | undefined, where: string, maxDepth = DEFAULT_JSON_DEPTH): StateInput {
  const text = payload.toString('utf8');
  const legacy = LEGACY_FORM.exec(text);
  if (legacy) {
    const seconds = Number(legacy[1]);
    return { value: legacyValue(legacy[2]!, type, where, maxDepth), at: new Date(seconds * 1000).toISOString() };
  }
  return stateFromMessage(parseJson(text, where, maxDepth), true, where);
}
