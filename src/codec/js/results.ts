// Host-side validation of what a script returned, per convention (docs/codecs.md, "JavaScript codecs").
import type { DecodeResult, DecodedState, EncodeResult } from '../types.js';
import { hexToBytes } from '../hex.js';
import { isJsonObject, type JsonValue, setMember } from '../../core/json.js';
import { toIsoTimestamp } from '../../core/time.js';

const EMPTY = new Uint8Array(0);

export function invalidDecode(why: string): DecodeResult {
  return { states: {}, warnings: [], errors: [`codec returned an invalid result: ${why}`] };
}

export function invalidEncode(why: string): EncodeResult {
  return { bytes: EMPTY, warnings: [], errors: [`codec returned an invalid result: ${why}`] };
}

function messages(list: JsonValue[]): string[] {
  return list.map((entry) => (typeof entry === 'string' ? entry : JSON.stringify(entry)));
}

function optionalList(result: { [key: string]: JsonValue }, key: 'warnings' | 'errors'): string[] | undefined | false {
  const list = result[key];
  if (list === undefined || list === null) return undefined;
  return Array.isArray(list) ? messages(list) : false;
}

/**
 * The optional "warnings" and "errors" members of a decodeUplink/encodeDownlink result,
 * absent ones as empty lists; a string says why the result is invalid.
 */
function resultMessages(result: { [key: string]: JsonValue }): { warnings: string[]; errors: string[] } | string {
  const warnings = optionalList(result, 'warnings');
  const errors = optionalList(result, 'errors');
  if (warnings === false) return '"warnings" must be an array';
  if (errors === false) return '"errors" must be an array';
  return { warnings: warnings ?? [], errors: errors ?? [] };
}

function statesFromData(data: { [key: string]: JsonValue }): { [asset: string]: DecodedState } {
  const states: { [asset: string]: DecodedState } = {};
  for (const [asset, value] of Object.entries(data)) setMember(states, asset, { value });
  return states;
}

/** `decodeUplink` → `{data, warnings?, errors?}`. */
export function interpretDecodeUplink(result: JsonValue): DecodeResult {
  if (!isJsonObject(result)) return invalidDecode('decodeUplink must return an object with "data"');
  const listed = resultMessages(result);
  if (typeof listed === 'string') return invalidDecode(listed);
  const { warnings, errors } = listed;
  if (errors.length > 0) return { states: {}, warnings, errors };
  if (!isJsonObject(result.data)) return invalidDecode('"data" must be a plain object');
  return { states: statesFromData(result.data), warnings, errors: [] };
}

/** Legacy `Decoder(bytes, port)` → the data object, or null/undefined for no states. */
export function interpretDecoder(result: JsonValue): DecodeResult {
  if (result === null) return { states: {}, warnings: [], errors: [] };
  if (!isJsonObject(result)) return invalidDecode('Decoder must return an object (or null)');
  return { states: statesFromData(result), warnings: [], errors: [] };
}

/** AllThingsTalk `converter(hex)` → JSON text (or object) of asset → {value, at?}. */
export function interpretUplinkConverter(result: JsonValue): DecodeResult {
  let parsed: JsonValue = result;
  if (typeof result === 'string') {
    try {
      parsed = JSON.parse(result) as JsonValue;
    } catch {
      return invalidDecode('converter returned a string that is not valid JSON');
    }
  }
  if (parsed === null) return { states: {}, warnings: [], errors: [] };
  if (!isJsonObject(parsed)) return invalidDecode('converter must return a JSON object of asset → {"value": …} (or null)');
  const states: { [asset: string]: DecodedState } = {};
  const warnings: string[] = [];
  for (const [asset, member] of Object.entries(parsed)) {
    if (!isJsonObject(member) || !Object.hasOwn(member, 'value')) {
      warnings.push(`asset ${JSON.stringify(asset)}: member has no "value"; dropped`);
      continue;
    }
    const state: DecodedState = { value: member.value! };
    if (member.at !== undefined) {
      const at = toIsoTimestamp(member.at);
      if (at === undefined) warnings.push(`asset ${JSON.stringify(asset)}: at ${JSON.stringify(member.at)} is not a valid timestamp; dropped`);
      else state.at = at;
    }
    setMember(states, asset, state);
  }
  return { states, warnings, errors: [] };
}

function byteArray(value: JsonValue | undefined): Uint8Array | string {
  if (!Array.isArray(value)) return 'bytes must be an array of integers 0–255';
  const bytes = new Uint8Array(value.length);
  for (let i = 0; i < value.length; i++) {
    const item = value[i];
    if (typeof item !== 'number' || !Number.isInteger(item) || item < 0 || item > 255) return `bytes[${i}] = ${JSON.stringify(item)} is not an integer 0–255`;
    bytes[i] = item;
  }
  return bytes;
}

function validPort(port: JsonValue | undefined): boolean {
  return typeof port === 'number' && Number.isInteger(port) && port >= 1 && port <= 223;
}

/** `encodeDownlink` → `{bytes, fPort?, warnings?, errors?}`. */
export function interpretEncodeDownlink(result: JsonValue): EncodeResult {
  if (!isJsonObject(result)) return invalidEncode('encodeDownlink must return an object with "bytes"');
  const listed = resultMessages(result);
  if (typeof listed === 'string') return invalidEncode(listed);
  const { warnings, errors } = listed;
  if (errors.length > 0) return { bytes: EMPTY, warnings, errors };
  const bytes = byteArray(result.bytes);
  if (typeof bytes === 'string') return invalidEncode(bytes);
  if (result.fPort !== undefined && result.fPort !== null && !validPort(result.fPort)) return invalidEncode(`fPort must be an integer from 1 to 223 (got ${JSON.stringify(result.fPort)})`);
  const encoded: EncodeResult = { bytes, warnings, errors: [] };
  if (typeof result.fPort === 'number') encoded.fPort = result.fPort;
  return encoded;
}

/** Legacy `Encoder(object, port)` → the byte array directly. */
export function interpretEncoder(result: JsonValue): EncodeResult {
  const bytes = byteArray(result);
  return typeof bytes === 'string' ? invalidEncode(bytes) : { bytes, warnings: [], errors: [] };
}

/** AllThingsTalk `converter(json)` → hex text, or `{"data": hex, "meta": {port?, confirmed?}}` as JSON text or object. */
export function interpretDownlinkConverter(result: JsonValue): EncodeResult {
  let parsed: JsonValue = result;
  if (typeof result === 'string') {
    if (result.trimStart().startsWith('{')) {
      try {
        parsed = JSON.parse(result) as JsonValue;
      } catch {
        return invalidEncode('converter returned text starting with "{" that is not valid JSON');
      }
    } else {
      const bytes = result === '' ? undefined : hexToBytes(result);
      return bytes === undefined ? invalidEncode('converter returned a string that is not hex digits of even length') : { bytes, warnings: [], errors: [] };
    }
  }
  if (!isJsonObject(parsed) || typeof parsed.data !== 'string') return invalidEncode('converter must return hex text or {"data": "<hex>", "meta"?: {…}}');
  const bytes = parsed.data === '' ? undefined : hexToBytes(parsed.data);
  if (bytes === undefined) return invalidEncode('"data" is not hex digits of even length');
  const encoded: EncodeResult = { bytes, warnings: [], errors: [] };
  const meta = parsed.meta;
  if (meta !== undefined && meta !== null) {
    if (!isJsonObject(meta)) return invalidEncode('"meta" must be an object');
    if (meta.port !== undefined) {
      if (!validPort(meta.port)) return invalidEncode(`meta.port must be an integer from 1 to 223 (got ${JSON.stringify(meta.port)})`);
      encoded.fPort = meta.port as number;
    }
    if (meta.confirmed !== undefined) {
      if (typeof meta.confirmed !== 'boolean') return invalidEncode('meta.confirmed must be a boolean');
      encoded.confirmed = meta.confirmed;
    }
  }
  return encoded;
}
