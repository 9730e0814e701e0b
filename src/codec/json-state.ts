// JSON device-state messages: an object of asset name → {"value", "at"?} (docs/api.md, "Device
// states"; docs/codecs.md, format `json`). One reader, with a policy for each of its two users:
//
// * API input (HTTP `application/json`, MQTT JSON payloads) refuses by name: a bad message is an
//   INVALID_JSON / INVALID_MESSAGE error, and each asset's value and `at` go on to the pipeline,
//   which refuses a bad one by its asset name (422, the errors topic). Member names are matched
//   ignoring case (the cloud's SDKs send `Value`, `At`); a member that is not `{value, at?}` is
//   itself the value, as an MQTT asset state is.
// * The `json` codec (the `outpost codec` tool, a device whose codec format is json or auto) warns
//   and drops: a member that is not `{value, at?}` or whose `at` is not a timestamp with a zone is
//   dropped with a warning naming it, and member names are matched exactly.
import type { DecodeResult, DecodedState } from './types.js';
import { ServiceError } from '../core/errors.js';
import { DEFAULT_JSON_DEPTH, hasMemberIgnoringCase, isJsonObject, memberIgnoringCase, parseJson, setMember, type JsonObject, type JsonValue } from '../core/json.js';
import { CODEC_TIMESTAMP_WITH_ZONE, isoTimestamp } from '../core/time.js';

/** An asset state as the message gave it; `at` not yet checked. */
export interface AssetEntry {
  value: JsonValue;
  at?: unknown;
}

/** How `value` and `at` are found in an asset member (see the top of this file). */
export type MemberMatch = 'ignoring case' | 'exact';

/** The `{value, at?}` of an asset member, or undefined when it is not an object with a `value` member. */
export function assetEntry(member: unknown, match: MemberMatch): AssetEntry | undefined {
  if (!isJsonObject(member)) return undefined;
  if (match === 'exact') return Object.hasOwn(member, 'value') ? { value: member.value!, at: member.at } : undefined;
  if (!hasMemberIgnoringCase(member, 'value')) return undefined;
  return { value: memberIgnoringCase(member, 'value') as JsonValue, at: memberIgnoringCase(member, 'at') };
}

/**
 * Whether bytes are a JSON object, by their first non-blank byte: what `auto` checks before it
 * tries JSON (CBOR maps start with 0xA0–0xBF or a tag, never with `{` or white space).
 */
export function looksLikeJsonObject(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) continue;
    return b === 0x7b;
  }
  return false;
}

interface StatePolicy {
  match: MemberMatch;
  /** A member that is not `{value, at?}`: the bare value (API), else dropped with a warning (codec). */
  bareValues: boolean;
  /** `at` read here, a bad one dropping the asset with a warning (codec), else left for the pipeline (API). */
  readsAt: boolean;
}

const API_POLICY: StatePolicy = { match: 'ignoring case', bareValues: true, readsAt: false };
const CODEC_POLICY: StatePolicy = { match: 'exact', bareValues: false, readsAt: true };

/** The walker both policies share: each member of the message to its asset state, or a warning. */
function statesOf(message: JsonObject, policy: StatePolicy, warnings: string[]): { [asset: string]: AssetEntry } {
  const states: { [asset: string]: AssetEntry } = {};
  for (const [asset, member] of Object.entries(message)) {
    const entry = assetEntry(member, policy.match);
    if (entry === undefined) {
      if (policy.bareValues) setMember(states, asset, { value: member });
      else warnings.push(`asset ${JSON.stringify(asset)}: not a state object {"value", "at"?}; dropped`);
    } else if (!policy.readsAt) {
      setMember(states, asset, entry);
    } else if (entry.at === undefined || entry.at === null) {
      setMember(states, asset, { value: entry.value });
    } else {
      const at = typeof entry.at === 'string' ? isoTimestamp(entry.at, CODEC_TIMESTAMP_WITH_ZONE) : undefined;
      if (at === undefined) warnings.push(`asset ${JSON.stringify(asset)}: at ${JSON.stringify(entry.at)} is not an ISO 8601 timestamp with a zone; dropped`);
      else setMember(states, asset, { value: entry.value, at });
    }
  }
  return states;
}

// ---- API input: refused by name ----

/** A parsed API device state; INVALID_MESSAGE naming `where` when it is not an object of asset names. */
export function statesFromJsonObject(message: unknown, where: string): Record<string, AssetEntry> {
  if (!isJsonObject(message)) throw new ServiceError('INVALID_MESSAGE', `${where}: a device state must be a JSON object of asset names`);
  return statesOf(message, API_POLICY, []);
}

/** API device state bytes; INVALID_JSON when they are not JSON or nest deeper than `maxDepth` (limits.jsonDepth). */
export function statesFromJsonBytes(bytes: Uint8Array, where: string, maxDepth = DEFAULT_JSON_DEPTH): Record<string, AssetEntry> {
  return statesFromJsonObject(parseJson(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'), where, maxDepth), where);
}

// ---- The `json` codec: warned and dropped ----

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Parses bytes as a JSON object; undefined when they are not one (not JSON, not UTF-8, not an object). */
export function parseJsonObjectBytes(bytes: Uint8Array): JsonObject | undefined {
  if (!looksLikeJsonObject(bytes)) return undefined;
  try {
    const parsed = JSON.parse(UTF8.decode(bytes)) as JsonValue;
    return isJsonObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export function decodeJsonDeviceState(message: JsonObject): DecodeResult {
  const warnings: string[] = [];
  const states = statesOf(message, CODEC_POLICY, warnings) as { [asset: string]: DecodedState };
  return { states, warnings, errors: [] };
}

export function decodeJsonDeviceStateBytes(bytes: Uint8Array): DecodeResult {
  const message = parseJsonObjectBytes(bytes);
  if (message === undefined) return { states: {}, warnings: [], errors: ['the payload is not a JSON object'] };
  return decodeJsonDeviceState(message);
}
