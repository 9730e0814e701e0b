// The common CBOR device state, read fast: what nearly every device sends is a definite-length
// map of short text keys to small integers, finite floats, text, booleans and null, sometimes
// with definite-length arrays and maps of the same. This reader handles exactly that, in one
// pass, without the general reader's head objects, member paths and warning lists (cbor.ts).
//
// Anything else — a tag, a byte string, an indefinite length, a repeated or inherited key, a
// non-text key, undefined or another simple value, a float that is not finite, an integer
// beyond 2^53 − 1, nesting at the limit, truncation, bytes left over — makes it give up
// (NOT_COMMON), and the general reader reads the payload from the start, with its warnings and
// errors. So it never changes a result; it only skips work (test/codec/cbor.test.ts holds the
// two readers to the same results on generated payloads).
import { float16BitsToNumber } from './abcl/float16.js';
import type { JsonObject, JsonValue } from '../core/json.js';

/** Containers nested deeper than this are an error (docs/codecs.md, "CBOR"). */
export const MAX_CBOR_DEPTH = 32;

/** What the common reader returns when the payload is not the common kind. */
export const NOT_COMMON: unique symbol = Symbol('not a common CBOR item');

const UTF8_DECODER = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/**
 * UTF-8 text of `bytes[start, end)`; invalid sequences become U+FFFD. Short ASCII text (asset
 * names) is built from char codes: TextDecoder's per-call cost dominates for a few bytes.
 */
export function decodeText(bytes: Uint8Array, start: number, end: number): string {
  const length = end - start;
  if (length > 32) return UTF8_DECODER.decode(bytes.subarray(start, end));
  let ascii = 0;
  for (let i = start; i < end; i++) ascii |= bytes[i]!;
  if (ascii >= 0x80) return UTF8_DECODER.decode(bytes.subarray(start, end));
  // One call with the codes as arguments makes one flat string (a key V8 hashes once).
  if (length <= 8) return asciiUpTo8(bytes, start, length);
  return asciiUpTo8(bytes, start, 8) + decodeText(bytes, start + 8, end);
}

function asciiUpTo8(b: Uint8Array, s: number, length: number): string {
  switch (length) {
    case 0:
      return '';
    case 1:
      return String.fromCharCode(b[s]!);
    case 2:
      return String.fromCharCode(b[s]!, b[s + 1]!);
    case 3:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!);
    case 4:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!);
    case 5:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!);
    case 6:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!);
    case 7:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!);
    default:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!);
  }
}

const KEY_CACHE_SLOTS = 1024;
/** Longer keys are decoded every time: they are rare, and comparing them costs what decoding does. */
const KEY_CACHE_LONGEST = 32;

/**
 * Asset names repeat in every message a device sends. The last key decoded into each of 1024
 * slots (chosen by a hash of its bytes) is kept with a copy of its bytes, so a repeated key is
 * compared byte by byte and reused instead of decoded and looked up in V8's string table again:
 * that lookup was the largest cost of a small device state. The cache remembers a pure function
 * of the bytes, so sharing it between payloads and devices changes no result.
 */
class KeyCache {
  readonly #bytes: Array<Uint8Array | undefined> = new Array(KEY_CACHE_SLOTS);
  readonly #keys: string[] = new Array(KEY_CACHE_SLOTS);

  key(bytes: Uint8Array, start: number, end: number): string {
    const length = end - start;
    if (length > KEY_CACHE_LONGEST) return decodeText(bytes, start, end);
    let hash = length;
    for (let i = start; i < end; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
    const slot = (hash >>> 0) % KEY_CACHE_SLOTS;
    const cached = this.#bytes[slot];
    if (cached !== undefined && cached.length === length && sameBytes(cached, bytes, start)) return this.#keys[slot]!;
    const key = decodeText(bytes, start, end);
    // A copy: Buffer#slice would return a view into a payload buffer that Node reuses.
    this.#bytes[slot] = new Uint8Array(bytes.subarray(start, end));
    this.#keys[slot] = key;
    return key;
  }
}

function sameBytes(cached: Uint8Array, bytes: Uint8Array, start: number): boolean {
  for (let i = 0; i < cached.length; i++) if (cached[i] !== bytes[start + i]) return false;
  return true;
}

const KEYS = new KeyCache();

// Floats are assembled in a scratch buffer in the machine's byte order: no DataView per payload.
const FLOAT64 = new Float64Array(1);
const FLOAT64_BYTES = new Uint8Array(FLOAT64.buffer);
const FLOAT32 = new Float32Array(1);
const FLOAT32_BYTES = new Uint8Array(FLOAT32.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

class CommonReader {
  pos = 0;

  constructor(readonly bytes: Uint8Array) {}

  /** The argument of a head whose initial byte was just read, or -1 when it is not a safe integer or is cut off. */
  argument(info: number): number {
    if (info < 24) return info;
    const b = this.bytes;
    const p = this.pos;
    if (info === 24) {
      if (p + 1 > b.length) return -1;
      this.pos = p + 1;
      return b[p]!;
    }
    if (info === 25) {
      if (p + 2 > b.length) return -1;
      this.pos = p + 2;
      return (b[p]! << 8) | b[p + 1]!;
    }
    if (info === 26) {
      if (p + 4 > b.length) return -1;
      this.pos = p + 4;
      return b[p]! * 0x1000000 + ((b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!);
    }
    if (info !== 27 || p + 8 > b.length) return -1;
    const high = b[p]! * 0x1000000 + ((b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!);
    if (high >= 0x200000) return -1;
    this.pos = p + 8;
    return high * 0x100000000 + (b[p + 4]! * 0x1000000 + ((b[p + 5]! << 16) | (b[p + 6]! << 8) | b[p + 7]!));
  }

  /** The float whose initial byte was just read (info 25–27); NaN when cut off. */
  float(info: number): number {
    const b = this.bytes;
    const p = this.pos;
    const size = info === 25 ? 2 : info === 26 ? 4 : 8;
    if (p + size > b.length) return Number.NaN;
    this.pos = p + size;
    if (info === 25) return float16BitsToNumber((b[p]! << 8) | b[p + 1]!);
    const target = info === 26 ? FLOAT32_BYTES : FLOAT64_BYTES;
    if (LITTLE_ENDIAN) for (let i = 0; i < size; i++) target[i] = b[p + size - 1 - i]!;
    else for (let i = 0; i < size; i++) target[i] = b[p + i]!;
    return info === 26 ? FLOAT32[0]! : FLOAT64[0]!;
  }

  /** The end of a definite-length string whose initial byte was just read, or -1; `pos` is then its start. */
  stringEnd(info: number): number {
    const length = this.argument(info);
    return length < 0 || length > this.bytes.length - this.pos ? -1 : this.pos + length;
  }

  /** A definite-length text string whose initial byte was just read; undefined when not common. */
  text(info: number): string | undefined {
    const end = this.stringEnd(info);
    if (end < 0) return undefined;
    const start = this.pos;
    this.pos = end;
    return decodeText(this.bytes, start, end);
  }

  /** A map key: text only (the general reader turns integer keys into text, with rules of its own). */
  key(): string | undefined {
    if (this.pos >= this.bytes.length) return undefined;
    const initial = this.bytes[this.pos++]!;
    if (initial >> 5 !== 3) return undefined;
    const end = this.stringEnd(initial & 0x1f);
    if (end < 0) return undefined;
    const start = this.pos;
    this.pos = end;
    return KEYS.key(this.bytes, start, end);
  }

  /** The length of a definite-length container whose initial byte was just read, or -1. */
  containerLength(info: number, itemsPerEntry: number, depth: number): number {
    if (depth >= MAX_CBOR_DEPTH || info > 26) return -1;
    const length = this.argument(info);
    return length * itemsPerEntry > this.bytes.length - this.pos ? -1 : length;
  }

  value(depth: number): JsonValue | typeof NOT_COMMON {
    const b = this.bytes;
    if (this.pos >= b.length) return NOT_COMMON;
    const initial = b[this.pos++]!;
    const info = initial & 0x1f;
    switch (initial >> 5) {
      case 0: {
        const n = this.argument(info);
        return n < 0 ? NOT_COMMON : n;
      }
      case 1: {
        const n = this.argument(info);
        // −1 − n must stay a safe integer: −2^53 already is not.
        return n < 0 || n >= Number.MAX_SAFE_INTEGER ? NOT_COMMON : -1 - n;
      }
      case 3: {
        const text = this.text(info);
        return text === undefined ? NOT_COMMON : text;
      }
      case 4:
        return this.array(info, depth);
      case 5:
        return this.map(info, depth);
      case 7: {
        if (info === 20) return false;
        if (info === 21) return true;
        if (info === 22) return null;
        if (info < 25 || info > 27) return NOT_COMMON;
        const value = this.float(info);
        return Number.isFinite(value) ? value : NOT_COMMON;
      }
      default:
        return NOT_COMMON;
    }
  }

  array(info: number, depth: number): JsonValue[] | typeof NOT_COMMON {
    const length = this.containerLength(info, 1, depth);
    if (length < 0) return NOT_COMMON;
    const items: JsonValue[] = [];
    for (let i = 0; i < length; i++) {
      const item = this.value(depth + 1);
      if (item === NOT_COMMON) return NOT_COMMON;
      items.push(item);
    }
    return items;
  }

  map(info: number, depth: number): JsonObject | typeof NOT_COMMON {
    const length = this.containerLength(info, 2, depth);
    if (length < 0) return NOT_COMMON;
    const object: JsonObject = {};
    for (let i = 0; i < length; i++) {
      const key = this.key();
      // A repeated key warns, and `__proto__`, `toString` … need care: the general reader's job.
      if (key === undefined || object[key] !== undefined) return NOT_COMMON;
      const item = this.value(depth + 1);
      if (item === NOT_COMMON) return NOT_COMMON;
      object[key] = item;
    }
    return object;
  }
}

/** One whole item of the common kind, or NOT_COMMON. */
export function readCommonItem(bytes: Uint8Array): JsonValue | typeof NOT_COMMON {
  const reader = new CommonReader(bytes);
  const value = reader.value(0);
  return reader.pos === bytes.length ? value : NOT_COMMON;
}

/** A device state map of the common kind as asset states, or NOT_COMMON. */
export function readCommonDeviceState(bytes: Uint8Array): { [asset: string]: { value: JsonValue } } | typeof NOT_COMMON {
  if (bytes.length === 0 || bytes[0]! >> 5 !== 5) return NOT_COMMON;
  const reader = new CommonReader(bytes);
  reader.pos = 1;
  const length = reader.containerLength(bytes[0]! & 0x1f, 2, 0);
  if (length < 0) return NOT_COMMON;
  const states: { [asset: string]: { value: JsonValue } } = {};
  for (let i = 0; i < length; i++) {
    const asset = reader.key();
    if (asset === undefined || states[asset] !== undefined) return NOT_COMMON;
    const value = reader.value(1);
    if (value === NOT_COMMON) return NOT_COMMON;
    states[asset] = { value };
  }
  return reader.pos === bytes.length ? states : NOT_COMMON;
}
