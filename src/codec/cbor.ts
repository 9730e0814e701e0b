// CBOR device states and device commands (docs/codecs.md, "CBOR").
//
// Decoding is written against RFC 8949 directly rather than with cbor-x: cbor-x 1.6.9 turns Tag 0
// into a Date (losing the timestamp string rules), maps tags 64–87/258/259/28/29 to typed arrays,
// Sets, Maps and shared references, throws on unassigned simple values, and cannot report
// repeated map keys or nesting depth, so its results would need a second pass over the item
// heads anyway. Speed comes from cbor-common.ts: the common device state (a map of short text
// keys to numbers, text and booleans) is read there in one pass as fast as cbor-x reads it
// (bench/codec.ts); everything else falls through to the general reader below, which owns every
// warning and error. The encoder writes float32 where exact (cbor-x writes float64 for 21.5).
// cbor-x is used in the tests as the independent decoder the CBOR test vectors were checked against.
import type { DecodeResult, DecodedState, EncodeResult } from './types.js';
import { bytesToHex } from './hex.js';
import { float16BitsToNumber } from './abcl/float16.js';
import { decodeText, MAX_CBOR_DEPTH as MAX_DEPTH, NOT_COMMON, readCommonDeviceState, readCommonItem } from './cbor-common.js';
import { isJsonObject, type JsonObject, type JsonValue, setMember } from '../core/json.js';
import { CODEC_TIMESTAMP, epochMillisToIso, isoTimestamp } from '../core/time.js';
import { ServiceError } from '../core/errors.js';

const TAG_DATETIME_STRING = 0;
const TAG_EPOCH = 1;
const TAG_POSITIVE_BIGNUM = 2;
const TAG_NEGATIVE_BIGNUM = 3;
const TAG_GEO = 103;
const TAG_DATA_POINT = 120;
const TAG_EXTENDED_TIME = 1001;
const BREAK = 0xff;
const UTF8_ENCODER = new TextEncoder();

class CborStructureError extends Error {}

/** A bignum-sized argument is kept as a bigint so that it is rounded exactly once. */
type Argument = number | bigint;

interface Head {
  major: number;
  info: number;
  /** Undefined for indefinite length (info 31). */
  argument: Argument | undefined;
}

class CborReader {
  pos = 0;
  readonly warnings: string[] = [];

  constructor(
    private readonly bytes: Uint8Array,
    /** Keep NaN and ±Infinity as numbers (API bodies, where the caller refuses them by rule) instead of null. */
    readonly keepNonFinite = false,
  ) {}

  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  private take(count: number): number {
    if (this.pos + count > this.bytes.length) throw new CborStructureError(`truncated CBOR at byte ${this.pos}`);
    const start = this.pos;
    this.pos += count;
    return start;
  }

  peekByte(): number {
    if (this.pos >= this.bytes.length) throw new CborStructureError(`truncated CBOR at byte ${this.pos}`);
    return this.bytes[this.pos]!;
  }

  readHead(): Head {
    const initial = this.bytes[this.take(1)]!;
    const major = initial >> 5;
    const info = initial & 0x1f;
    const b = this.bytes;
    if (info < 24) return { major, info, argument: info };
    if (info === 24) return { major, info, argument: b[this.take(1)]! };
    if (info === 25) {
      const at = this.take(2);
      return { major, info, argument: (b[at]! << 8) | b[at + 1]! };
    }
    if (info === 26) {
      const at = this.take(4);
      return { major, info, argument: b[at]! * 0x1000000 + ((b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) };
    }
    if (info === 27) {
      const at = this.take(8);
      const high = b[at]! * 0x1000000 + ((b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!);
      const low = b[at + 4]! * 0x1000000 + ((b[at + 5]! << 16) | (b[at + 6]! << 8) | b[at + 7]!);
      if (high < 0x200000) return { major, info, argument: high * 0x100000000 + low };
      return { major, info, argument: (BigInt(high) << 32n) | BigInt(low) };
    }
    if (info === 31 && major >= 2 && major <= 5) return { major, info, argument: undefined };
    if (info === 31 && major === 7) throw new CborStructureError(`unexpected break at byte ${this.pos - 1}`);
    throw new CborStructureError(`reserved additional information ${info} at byte ${this.pos - 1}`);
  }

  readBytes(length: number): Uint8Array {
    const at = this.take(length);
    return this.bytes.subarray(at, at + length);
  }

  /** Consumes a break byte when one is next (indefinite-length containers). */
  atBreak(): boolean {
    if (this.peekByte() === BREAK) {
      this.pos++;
      return true;
    }
    return false;
  }

  /** Reads the float whose head was just read: its argument bytes are re-read as the float. */
  private view: DataView | undefined;

  readFloat(info: number): number {
    this.pos -= info === 25 ? 2 : info === 26 ? 4 : 8;
    const view = (this.view ??= new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength));
    if (info === 25) return float16BitsToNumber(view.getUint16(this.take(2)));
    if (info === 26) return view.getFloat32(this.take(4));
    return view.getFloat64(this.take(8));
  }
}

function argumentToNumber(argument: Argument, negative: boolean, reader: CborReader, what: string): number {
  const exact = negative ? -1n - BigInt(argument) : BigInt(argument);
  const value = Number(exact);
  if (!Number.isSafeInteger(value)) reader.warnings.push(`${what}: integer ${exact} is beyond 2^53 − 1; converted to the nearest double ${value}`);
  return value;
}

/** A container-length argument; a count beyond the remaining bytes cannot be well-formed. */
function lengthOf(head: Head, reader: CborReader, itemsPerEntry: number): number {
  const length = Number(head.argument);
  if (length * itemsPerEntry > reader.remaining) throw new CborStructureError(`length ${head.argument} exceeds the remaining ${reader.remaining} bytes`);
  return length;
}

function geoFrom(value: JsonValue, allowNullTail: boolean): JsonObject | undefined {
  if (!Array.isArray(value) || value.length < 2 || value.length > 4) return undefined;
  const [latitude, longitude, altitude, accuracy] = value;
  if (typeof latitude !== 'number' || typeof longitude !== 'number') return undefined;
  const geo: JsonObject = { latitude, longitude };
  for (const [name, item] of [['altitude', altitude], ['accuracy', accuracy]] as const) {
    if (item === undefined || (item === null && allowNullTail)) continue;
    if (typeof item !== 'number') return undefined;
    geo[name] = item;
  }
  return geo;
}

function bignumValue(content: JsonValue | Uint8Array, negative: boolean, reader: CborReader, what: string): number | undefined {
  if (!(content instanceof Uint8Array)) return undefined;
  let magnitude = 0n;
  for (const byte of content) magnitude = (magnitude << 8n) | BigInt(byte);
  const exact = negative ? -1n - magnitude : magnitude;
  const value = Number(exact);
  if (BigInt(value) !== exact) reader.warnings.push(`${what}: bignum ${exact} is not exact as a double; converted to ${value}`);
  return value;
}

/**
 * Reads one item and converts it to JSON. Byte strings come back as Uint8Array only when
 * `rawBytes` (bignum contents); everywhere else they become upper-case hex.
 */
function readValue(reader: CborReader, depth: number, what: string, rawBytes = false): JsonValue | Uint8Array {
  const head = reader.readHead();
  switch (head.major) {
    case 0:
      return argumentToNumber(head.argument!, false, reader, what);
    case 1:
      return argumentToNumber(head.argument!, true, reader, what);
    case 2:
    case 3: {
      if (head.argument === undefined) throw new CborStructureError(`indefinite-length ${head.major === 2 ? 'byte' : 'text'} string in ${what}`);
      const length = Number(head.argument);
      if (length > reader.remaining) throw new CborStructureError(`string length ${head.argument} exceeds the remaining ${reader.remaining} bytes`);
      const bytes = reader.readBytes(length);
      if (head.major === 3) return decodeText(bytes, 0, bytes.length);
      return rawBytes ? bytes : bytesToHex(bytes);
    }
    case 4: {
      if (depth >= MAX_DEPTH) throw new CborStructureError(`nesting deeper than ${MAX_DEPTH} levels`);
      const items: JsonValue[] = [];
      if (head.argument === undefined) {
        while (!reader.atBreak()) items.push(readValue(reader, depth + 1, `${what}[${items.length}]`) as JsonValue);
      } else {
        const length = lengthOf(head, reader, 1);
        for (let i = 0; i < length; i++) items.push(readValue(reader, depth + 1, `${what}[${i}]`) as JsonValue);
      }
      return items;
    }
    case 5:
      if (depth >= MAX_DEPTH) throw new CborStructureError(`nesting deeper than ${MAX_DEPTH} levels`);
      return readMap(reader, head, depth + 1, what);
    case 6:
      return readTagged(reader, head.argument!, depth, what);
    default:
      return readSimple(reader, head, what);
  }
}

function readSimple(reader: CborReader, head: Head, what: string): JsonValue {
  if (head.info >= 25 && head.info <= 27) {
    const value = reader.readFloat(head.info);
    if (Number.isFinite(value) || reader.keepNonFinite) return value;
    reader.warnings.push(`${what}: float ${value} has no JSON form; null used`);
    return null;
  }
  if (head.info === 24 && Number(head.argument) < 32) throw new CborStructureError(`simple value ${head.argument} in two bytes is not well-formed`);
  switch (head.argument) {
    case 20:
      return false;
    case 21:
      return true;
    case 22:
      return null;
    case 23:
      reader.warnings.push(`${what}: undefined has no JSON form; null used`);
      return null;
    default:
      reader.warnings.push(`${what}: simple value ${head.argument} has no JSON form; null used`);
      return null;
  }
}

function readTagged(reader: CborReader, tag: Argument, depth: number, what: string): JsonValue {
  if (depth >= MAX_DEPTH) throw new CborStructureError(`nesting deeper than ${MAX_DEPTH} levels`);
  const isBignum = tag === TAG_POSITIVE_BIGNUM || tag === TAG_NEGATIVE_BIGNUM;
  const content = readValue(reader, depth + 1, what, isBignum);
  if (isBignum) {
    const value = bignumValue(content, tag === TAG_NEGATIVE_BIGNUM, reader, what);
    if (value !== undefined) return value;
  } else if (tag === TAG_EPOCH && typeof content === 'number') {
    const iso = epochMillisToIso(content * 1000);
    if (iso !== undefined) return iso;
  } else if (tag === TAG_DATETIME_STRING && typeof content === 'string') {
    const iso = isoTimestamp(content, CODEC_TIMESTAMP);
    if (iso !== undefined) return iso;
  } else if (tag === TAG_GEO) {
    const geo = geoFrom(content as JsonValue, false);
    if (geo !== undefined) return geo;
  }
  reader.warnings.push(`${what}: tag ${tag} ignored`);
  return content instanceof Uint8Array ? bytesToHex(content) : content;
}

function readMap(reader: CborReader, head: Head, depth: number, what: string): JsonObject {
  const result: JsonObject = {};
  const length = head.argument === undefined ? Infinity : lengthOf(head, reader, 2);
  for (let i = 0; i < length; i++) {
    if (head.argument === undefined && reader.atBreak()) break;
    const keyHead = reader.peekByte() >> 5;
    let key: string | undefined;
    if (keyHead === 3) key = readValue(reader, depth, `${what} key`) as string;
    else if (keyHead === 0 || keyHead === 1) {
      const keyArgument = reader.readHead();
      key = (keyHead === 0 ? BigInt(keyArgument.argument!) : -1n - BigInt(keyArgument.argument!)).toString();
    } else {
      readValue(reader, depth, `${what} key`);
    }
    const memberWhat = key === undefined ? `${what} entry ${i}` : what === '' ? JSON.stringify(key) : `${what}.${key}`;
    const value = readValue(reader, depth, memberWhat) as JsonValue;
    if (key === undefined) {
      reader.warnings.push(`${memberWhat}: map key is neither a text string nor an integer; entry dropped`);
      continue;
    }
    if (Object.hasOwn(result, key)) reader.warnings.push(`${memberWhat}: key repeats; the last entry wins`);
    setMember(result, key, value);
  }
  return result;
}

/**
 * Reads an optional element of a data point: null is consumed and gives undefined;
 * otherwise the value, with the tag number when it has a tag head.
 */
function readDataPointElement(reader: CborReader, depth: number, what: string): { tag: Argument | undefined; content: JsonValue | Uint8Array } | undefined {
  const initial = reader.peekByte();
  if (initial === 0xf6) {
    reader.readHead();
    return undefined;
  }
  let tag: Argument | undefined;
  if (initial >> 5 === 6) tag = reader.readHead().argument!;
  return { tag, content: readValue(reader, depth + 1, what, false) };
}

/** The time element of a data point; undefined when absent or unusable. */
function readDataPointTime(reader: CborReader, depth: number): string | undefined {
  const element = readDataPointElement(reader, depth, 'data point time');
  if (element === undefined) return undefined;
  const { tag, content } = element;
  let iso: string | undefined;
  if ((tag === undefined || tag === TAG_EPOCH) && typeof content === 'number') iso = epochMillisToIso(content * 1000);
  else if ((tag === undefined || tag === TAG_DATETIME_STRING) && typeof content === 'string') iso = isoTimestamp(content, CODEC_TIMESTAMP);
  else if (tag === TAG_EXTENDED_TIME && isJsonObject(content)) iso = extendedTime(content);
  if (iso === undefined) reader.warnings.push(`data point time ${tag === undefined ? '' : `(tag ${tag}) `}is not a usable timestamp; dropped`);
  return iso;
}

/** RFC 9581 extended time: key 1 holds epoch seconds, with at most one of -3/-6/-9 as fraction. */
function extendedTime(map: JsonObject): string | undefined {
  const seconds = map['1'];
  if (typeof seconds !== 'number') return undefined;
  const fractions = (['-3', '-6', '-9'] as const).filter((key) => Object.hasOwn(map, key));
  if (fractions.length > 1) return undefined;
  let millis = seconds * 1000;
  if (fractions.length === 1) {
    const key = fractions[0]!;
    const fraction = map[key];
    if (typeof fraction !== 'number' || !Number.isInteger(fraction)) return undefined;
    millis += fraction / 10 ** (Number(key.slice(1)) - 3);
  }
  return epochMillisToIso(millis);
}

function readDataPointGeo(reader: CborReader, depth: number): JsonObject | undefined {
  const element = readDataPointElement(reader, depth, 'data point location');
  if (element === undefined) return undefined;
  const { tag, content } = element;
  const geo = tag === undefined || tag === TAG_GEO ? geoFrom(content as JsonValue, true) : undefined;
  if (geo === undefined) reader.warnings.push('data point location is not an array of 2 to 4 numbers; dropped');
  return geo;
}

function statesFrom(map: JsonObject, at: string | undefined): { [asset: string]: DecodedState } {
  const states: { [asset: string]: DecodedState } = {};
  for (const [asset, value] of Object.entries(map)) setMember(states, asset, at === undefined ? { value } : { value, at });
  return states;
}

function readDeviceState(reader: CborReader): { [asset: string]: DecodedState } {
  const initial = reader.peekByte();
  if (initial >> 5 === 5) return statesFrom(readValue(reader, 0, '') as JsonObject, undefined);
  if (initial >> 5 !== 6) throw new CborStructureError('a device state must be a map, optionally wrapped in tag 120');
  const tag = reader.readHead().argument;
  if (tag !== TAG_DATA_POINT) throw new CborStructureError(`a device state must be a map or tag 120, not tag ${tag}`);
  const inner = reader.peekByte() >> 5;
  if (inner === 5) return statesFrom(readValue(reader, 1, '') as JsonObject, undefined);
  if (inner !== 4) throw new CborStructureError('tag 120 must wrap a map or an array [map, time?, geo?]');
  const head = reader.readHead();
  const length = head.argument === undefined ? Infinity : lengthOf(head, reader, 1);
  if (length === 0 || (head.argument === undefined && reader.peekByte() === BREAK)) throw new CborStructureError('tag 120 wraps an empty array');
  if (reader.peekByte() >> 5 !== 5) throw new CborStructureError('the first element of a tag 120 data point must be a map');
  const map = readValue(reader, 2, '') as JsonObject;
  let at: string | undefined;
  let geo: JsonObject | undefined;
  let ignored = 0;
  for (let index = 1; index < length; index++) {
    if (head.argument === undefined && reader.atBreak()) break;
    if (index === 1) at = readDataPointTime(reader, 1);
    else if (index === 2) geo = readDataPointGeo(reader, 1);
    else {
      readValue(reader, 2, `data point element ${index}`);
      ignored++;
    }
  }
  if (ignored > 0) reader.warnings.push(`data point: ${ignored} element(s) after the third ignored`);
  const states = statesFrom(map, at);
  if (geo !== undefined) {
    if (Object.hasOwn(states, 'location')) reader.warnings.push('"location": replaced by the data point location');
    states.location = at === undefined ? { value: geo } : { value: geo, at };
  }
  return states;
}

/** A CBOR device state: the common kind read fast (cbor-common.ts), anything else by the general reader. */
export function decodeCborDeviceState(bytes: Uint8Array): DecodeResult {
  const states = readCommonDeviceState(bytes);
  if (states !== NOT_COMMON) return { states, warnings: [], errors: [] };
  return decodeCborDeviceStateInFull(bytes);
}

/** The general reader alone: every rule, warning and error (the reference the common path is tested against). */
export function decodeCborDeviceStateInFull(bytes: Uint8Array): DecodeResult {
  if (bytes.length === 0) return { states: {}, warnings: [], errors: ['empty CBOR payload'] };
  const reader = new CborReader(bytes);
  try {
    const states = readDeviceState(reader);
    if (reader.pos !== bytes.length) return { states: {}, warnings: [], errors: [`${bytes.length - reader.pos} bytes left over after the CBOR item`] };
    return { states, warnings: reader.warnings, errors: [] };
  } catch (error) {
    if (error instanceof CborStructureError) return { states: {}, warnings: [], errors: [`malformed CBOR: ${error.message}`] };
    throw error;
  }
}

/** Decodes any single item to JSON (used for item-level tests and tools). */
export function decodeCborItem(bytes: Uint8Array, options: { keepNonFinite?: boolean } = {}): { value?: JsonValue; warnings: string[]; errors: string[] } {
  const value = readCommonItem(bytes);
  if (value !== NOT_COMMON) return { value, warnings: [], errors: [] };
  return decodeCborItemInFull(bytes, options);
}

/** The general reader alone, for one item. */
export function decodeCborItemInFull(bytes: Uint8Array, options: { keepNonFinite?: boolean } = {}): { value?: JsonValue; warnings: string[]; errors: string[] } {
  if (bytes.length === 0) return { warnings: [], errors: ['empty CBOR payload'] };
  const reader = new CborReader(bytes, options.keepNonFinite);
  try {
    const value = readValue(reader, 0, 'item') as JsonValue;
    if (reader.pos !== bytes.length) return { warnings: [], errors: [`${bytes.length - reader.pos} bytes left over after the CBOR item`] };
    return { value, warnings: reader.warnings, errors: [] };
  } catch (error) {
    if (error instanceof CborStructureError) return { warnings: [], errors: [`malformed CBOR: ${error.message}`] };
    throw error;
  }
}

/** Decodes a CBOR request body into JSON data (asset states, assets, commands sent as CBOR). */
export function decodeCborBody(bytes: Uint8Array, where: string): unknown {
  // Non-finite floats stay numbers here, so the profile check refuses them by name instead of storing null.
  const result = decodeCborItem(bytes, { keepNonFinite: true });
  if (result.errors.length > 0) throw new ServiceError('INVALID_CBOR', `${where}: not valid CBOR (${result.errors.join('; ')})`);
  return result.value;
}

// ---- Encoding ----

class CborWriter {
  private buffer = new Uint8Array(64);
  private length = 0;

  private reserve(count: number): void {
    if (this.length + count <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + count));
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }

  byte(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  /** The shortest head for `argument` (a non-negative integer below 2^64). */
  head(major: number, argument: number | bigint): void {
    const type = major << 5;
    if (typeof argument === 'bigint' || argument > 0xffffffff) {
      const big = BigInt(argument);
      this.byte(type | 27);
      for (let shift = 56n; shift >= 0n; shift -= 8n) this.byte(Number((big >> shift) & 0xffn));
    } else if (argument < 24) this.byte(type | argument);
    else if (argument <= 0xff) {
      this.byte(type | 24);
      this.byte(argument);
    } else if (argument <= 0xffff) {
      this.byte(type | 25);
      this.byte(argument >> 8);
      this.byte(argument & 0xff);
    } else {
      this.byte(type | 26);
      for (let shift = 24; shift >= 0; shift -= 8) this.byte(Math.floor(argument / 2 ** shift) & 0xff);
    }
  }

  float(value: number): void {
    const single = Math.fround(value) === value;
    this.reserve(9);
    const view = new DataView(this.buffer.buffer, this.length + 1, single ? 4 : 8);
    this.buffer[this.length] = single ? 0xfa : 0xfb;
    if (single) view.setFloat32(0, value);
    else view.setFloat64(0, value);
    this.length += single ? 5 : 9;
  }

  result(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }
}

const TWO_64 = 2 ** 64;

function writeValue(writer: CborWriter, value: unknown, path: string, errors: string[], depth: number): void {
  if (depth > 64) {
    errors.push(`${path}: nested too deeply`);
    return;
  }
  if (value === null) writer.byte(0xf6);
  else if (value === true) writer.byte(0xf5);
  else if (value === false) writer.byte(0xf4);
  else if (typeof value === 'number') {
    if (!Number.isFinite(value)) errors.push(`${path}: ${value} cannot be encoded; values must be finite numbers`);
    else if (Number.isInteger(value) && value >= -TWO_64 && value < TWO_64) {
      // Integral doubles beyond 2^53 are exact integers too; BigInt keeps them exact.
      if (value >= 0) writer.head(0, value > Number.MAX_SAFE_INTEGER ? BigInt(value) : value);
      else writer.head(1, value < -Number.MAX_SAFE_INTEGER ? -1n - BigInt(value) : -1 - value);
    } else writer.float(value);
  } else if (typeof value === 'string') {
    const encoded = UTF8_ENCODER.encode(value);
    writer.head(3, encoded.length);
    writer.raw(encoded);
  } else if (Array.isArray(value)) {
    writer.head(4, value.length);
    value.forEach((item, index) => writeValue(writer, item, `${path}[${index}]`, errors, depth + 1));
  } else if (isJsonObject(value)) {
    const entries = Object.entries(value).filter(([, member]) => member !== undefined);
    writer.head(5, entries.length);
    for (const [key, member] of entries) {
      writeValue(writer, key, path, errors, depth + 1);
      writeValue(writer, member, path === '' ? key : `${path}.${key}`, errors, depth + 1);
    }
  } else {
    errors.push(`${path || 'command'}: ${typeof value} is not a JSON value`);
  }
}

/** A device command as one definite-length CBOR map with text keys, in the command's order. */
export function encodeCborCommand(values: Record<string, JsonValue>): EncodeResult {
  if (!isJsonObject(values)) return { bytes: new Uint8Array(0), warnings: [], errors: ['the command must be an object of asset → value'] };
  const writer = new CborWriter();
  const errors: string[] = [];
  writeValue(writer, values, '', errors, 0);
  if (errors.length > 0) return { bytes: new Uint8Array(0), warnings: [], errors };
  return { bytes: writer.result(), warnings: [], errors: [] };
}

