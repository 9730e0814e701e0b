// JSON device-state messages (docs/api.md, "Device states"): an object of asset → {"value", "at"?}.
import type { DecodeResult, DecodedState, JsonValue } from './types.js';
import { hasMember, isJsonObject, setMember } from './json.js';
import { parseTimestampString } from './timestamp.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Parses bytes as a JSON object; undefined when they are not one. */
export function parseJsonObjectBytes(bytes: Uint8Array): { [key: string]: JsonValue } | undefined {
  // Cheap pre-check: CBOR maps start with 0xA0–0xBF or tags, never with '{' or white space.
  let first = 0;
  while (first < bytes.length && (bytes[first] === 0x20 || bytes[first] === 0x09 || bytes[first] === 0x0a || bytes[first] === 0x0d)) first++;
  if (bytes[first] !== 0x7b) return undefined;
  try {
    const parsed = JSON.parse(UTF8.decode(bytes)) as JsonValue;
    return isJsonObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Each member must be an asset state object; `at`, when present, is API input and needs a zone. */
export function decodeJsonDeviceState(message: { [key: string]: JsonValue }): DecodeResult {
  const states: { [asset: string]: DecodedState } = {};
  const warnings: string[] = [];
  for (const [asset, member] of Object.entries(message)) {
    if (!isJsonObject(member) || !hasMember(member, 'value')) {
      warnings.push(`asset ${JSON.stringify(asset)}: not a state object {"value", "at"?}; dropped`);
      continue;
    }
    const state: DecodedState = { value: member.value! };
    if (member.at !== undefined && member.at !== null) {
      const at = typeof member.at === 'string' ? parseTimestampString(member.at, true) : undefined;
      if (at === undefined) {
        warnings.push(`asset ${JSON.stringify(asset)}: at ${JSON.stringify(member.at)} is not an ISO 8601 timestamp with a zone; dropped`);
        continue;
      }
      state.at = at;
    }
    setMember(states, asset, state);
  }
  return { states, warnings, errors: [] };
}

export function decodeJsonDeviceStateBytes(bytes: Uint8Array): DecodeResult {
  const message = parseJsonObjectBytes(bytes);
  if (message === undefined) return { states: {}, warnings: [], errors: ['the payload is not a JSON object'] };
  return decodeJsonDeviceState(message);
}
