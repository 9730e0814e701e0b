// Readers for binary selectors (docs/codecs.md, "Writing an ABCL document"), specialised once per selector at load time.
import { bytesToHex } from '../hex.js';
import type { BinarySelectorSpec } from './selector.js';
import { float16BitsToNumber } from './float16.js';
import type { SenseRun, ValueReader } from './sense-run.js';

export interface ReaderLabels {
  /** Names the asset/statement and member, e.g. `asset "motion" member accel.x (sense[0].value.accel.x)`. */
  subject: string;
  /** What the caller does on no value, e.g. "statement skipped". */
  consequence: string;
}

export interface BinaryReaderOptions {
  /** Outside a switch, string/hexstring reads past the end are truncated instead of failing. */
  truncateStrings: boolean;
}

const UTF8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Unsigned big-endian-after-ordering integer of up to 6 bytes; exact in a Number. */
function makeSmallUnsigned(offset: number, length: number, little: boolean): (b: Uint8Array) => number {
  if (length === 1) return (b) => b[offset]!;
  if (length === 2) return little ? (b) => b[offset]! | (b[offset + 1]! << 8) : (b) => (b[offset]! << 8) | b[offset + 1]!;
  if (length === 4) {
    return little
      ? (b) => (b[offset]! | (b[offset + 1]! << 8) | (b[offset + 2]! << 16)) + b[offset + 3]! * 0x1000000
      : (b) => b[offset]! * 0x1000000 + ((b[offset + 1]! << 16) | (b[offset + 2]! << 8) | b[offset + 3]!);
  }
  return little
    ? (b) => {
        let raw = 0;
        for (let i = offset + length - 1; i >= offset; i--) raw = raw * 256 + b[i]!;
        return raw;
      }
    : (b) => {
        let raw = 0;
        for (let i = offset; i < offset + length; i++) raw = raw * 256 + b[i]!;
        return raw;
      };
}

/** 7- and 8-byte integers are assembled exactly as a BigInt and rounded once at the end. */
function makeBigUnsigned(offset: number, length: number, little: boolean): (b: Uint8Array) => bigint {
  return (b) => {
    let raw = 0n;
    if (little) for (let i = offset + length - 1; i >= offset; i--) raw = (raw << 8n) | BigInt(b[i]!);
    else for (let i = offset; i < offset + length; i++) raw = (raw << 8n) | BigInt(b[i]!);
    return raw;
  };
}

/** The integer field (bit field or whole) as a Number, signedness applied. */
function makeIntegerField(spec: BinarySelectorSpec): (b: Uint8Array) => number {
  const { byte, length, little, signed, bits } = spec;
  const width = bits ? bits.bitLength : 8 * length;
  if (length <= 6) {
    const unsigned = makeSmallUnsigned(byte, length, little);
    const full = 2 ** width;
    const half = 2 ** (width - 1);
    if (bits === undefined) return signed ? (b) => { const raw = unsigned(b); return raw >= half ? raw - full : raw; } : unsigned;
    const divisor = 2 ** bits.bit;
    return (b) => {
      const field = Math.floor(unsigned(b) / divisor) % full;
      return signed && field >= half ? field - full : field;
    };
  }
  const unsigned = makeBigUnsigned(byte, length, little);
  const shift = BigInt(bits ? bits.bit : 0);
  return (b) => {
    const field = BigInt.asUintN(width, unsigned(b) >> shift);
    return Number(signed ? BigInt.asIntN(width, field) : field);
  };
}

const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function makeFloat(spec: BinarySelectorSpec): (run: SenseRun, b: Uint8Array) => number {
  const { byte, little } = spec;
  if (spec.floatWidth === 2) return (_run, b) => float16BitsToNumber(little ? b[byte]! | (b[byte + 1]! << 8) : (b[byte]! << 8) | b[byte + 1]!);
  // Each reader owns a scratch buffer: copying the bytes into it in host order and reading a
  // typed-array element avoids a DataView per message.
  const width = spec.floatWidth!;
  const scratch = new Uint8Array(width);
  const floats = width === 4 ? new Float32Array(scratch.buffer) : new Float64Array(scratch.buffer);
  const reverse = little !== HOST_IS_LITTLE_ENDIAN;
  return (_run, b) => {
    if (reverse) for (let i = 0; i < width; i++) scratch[i] = b[byte + width - 1 - i]!;
    else for (let i = 0; i < width; i++) scratch[i] = b[byte + i]!;
    return floats[0]!;
  };
}

function makeBoolean(spec: BinarySelectorSpec): (b: Uint8Array) => boolean {
  if (spec.bits !== undefined) {
    const field = makeIntegerField({ ...spec, signed: false });
    return (b) => field(b) !== 0;
  }
  const { byte, length } = spec;
  return (b) => {
    for (let i = byte; i < byte + length; i++) if (b[i] !== 0) return true;
    return false;
  };
}

function readString(b: Uint8Array, start: number, end: number): string {
  let stop = end;
  while (stop > start && b[stop - 1] === 0) stop--;
  return UTF8.decode(b.subarray(start, stop));
}

function readHex(b: Uint8Array, start: number, end: number, little: boolean): string {
  if (!little) return bytesToHex(b, start, end);
  let text = '';
  for (let i = end - 1; i >= start; i--) text += bytesToHex(b, i, i + 1);
  return text;
}

type Failure = (run: SenseRun, available: number) => undefined;

function makeFastInteger(
  spec: BinarySelectorSpec,
  calculation: ((v: number) => number) | undefined,
  calculated: (run: SenseRun, value: number) => number | undefined,
  notBinary: (run: SenseRun) => undefined,
  outOfRange: Failure,
  end: number,
): ValueReader | undefined {
  const { byte, little, signed, length } = spec;
  const second = byte + 1;
  if (length === 1) {
    if (calculation === undefined) {
      return signed
        ? (run) => { const b = run.bytes; if (b === null) return notBinary(run); if (end > b.length) return outOfRange(run, b.length); return (b[byte]! << 24) >> 24; }
        : (run) => { const b = run.bytes; if (b === null) return notBinary(run); if (end > b.length) return outOfRange(run, b.length); return b[byte]!; };
    }
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      if (end > b.length) return outOfRange(run, b.length);
      const raw = signed ? (b[byte]! << 24) >> 24 : b[byte]!;
      const result = calculation(raw);
      return result === result ? result : calculated(run, raw);
    };
  }
  if (length === 4) {
    const at = little ? [byte + 3, byte + 2, byte + 1, byte] : [byte, byte + 1, byte + 2, byte + 3];
    const [b0, b1, b2, b3] = at as [number, number, number, number];
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      if (end > b.length) return outOfRange(run, b.length);
      const word = (b[b0]! << 24) | (b[b1]! << 16) | (b[b2]! << 8) | b[b3]!;
      const raw = signed ? word : word >>> 0;
      if (calculation === undefined) return raw;
      const result = calculation(raw);
      return result === result ? result : calculated(run, raw);
    };
  }
  // Two bytes: assemble in a 32-bit int, sign-extend with shifts.
  const hi = little ? second : byte;
  const lo = little ? byte : second;
  return (run) => {
    const b = run.bytes;
    if (b === null) return notBinary(run);
    if (end > b.length) return outOfRange(run, b.length);
    const word = (b[hi]! << 8) | b[lo]!;
    const raw = signed ? (word << 16) >> 16 : word;
    if (calculation === undefined) return raw;
    const result = calculation(raw);
    return result === result ? result : calculated(run, raw);
  };
}

export function makeBinaryReader(spec: BinarySelectorSpec, labels: ReaderLabels, options: BinaryReaderOptions): ValueReader {
  const { byte, length, type, calculation, calculationText } = spec;
  const end = byte + length;
  const { subject, consequence } = labels;
  const rangeText = `bytes ${byte}..${end - 1}`;

  const outOfRange = (run: SenseRun, available: number): undefined => {
    run.warnings.push(`${subject}: ${rangeText} reach past the payload end (${available} bytes); ${consequence}`);
    return undefined;
  };
  const notBinary = (run: SenseRun): undefined => {
    run.warnings.push(`${subject}: byte selector on a JSON uplink; ${consequence}`);
    return undefined;
  };
  const calculated = (run: SenseRun, value: number): number | undefined => {
    const result = calculation!(value);
    if (result === result) return result;
    run.warnings.push(`${subject}: calculation "${calculationText}" failed for val = ${value} (division by zero or non-finite result); ${consequence}`);
    return undefined;
  };

  if (type === 'string' || type === 'hexstring') {
    const decode = type === 'string' ? (b: Uint8Array, stop: number) => readString(b, byte, stop) : (b: Uint8Array, stop: number) => readHex(b, byte, stop, spec.little);
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      if (end <= b.length) return decode(b, end);
      if (!options.truncateStrings || byte >= b.length) return outOfRange(run, b.length);
      run.warnings.push(`${subject}: ${rangeText} reach past the payload end (${b.length} bytes); ${type} truncated to ${b.length - byte} bytes`);
      return decode(b, b.length);
    };
  }

  if (spec.bits !== undefined && length === 1 && (type === 'boolean' || (type === 'integer' && !spec.signed && calculation === undefined))) {
    const { bit, bitLength } = spec.bits;
    const mask = (1 << bitLength) - 1;
    if (type === 'boolean') {
      return (run) => {
        const b = run.bytes;
        if (b === null) return notBinary(run);
        return end <= b.length ? ((b[byte]! >>> bit) & mask) !== 0 : outOfRange(run, b.length);
      };
    }
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      return end <= b.length ? (b[byte]! >>> bit) & mask : outOfRange(run, b.length);
    };
  }

  if (type === 'boolean') {
    const read = makeBoolean(spec);
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      return end <= b.length ? read(b) : outOfRange(run, b.length);
    };
  }

  if (spec.floatWidth !== undefined) {
    const read = makeFloat(spec);
    const widthName = `binary${spec.floatWidth * 8}`;
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      if (end > b.length) return outOfRange(run, b.length);
      const value = read(run, b);
      if (value - value !== 0) {
        run.warnings.push(`${subject}: ${rangeText} hold a ${widthName} ${value}; ${consequence}`);
        return undefined;
      }
      return calculation === undefined ? value : calculated(run, value);
    };
  }

  // The common whole-byte integers get one closure each, with the read inlined.
  if (spec.bits === undefined && (length === 1 || length === 2 || length === 4)) {
    const fast = makeFastInteger(spec, calculation, calculated, notBinary, outOfRange, end);
    if (fast !== undefined) return fast;
  }
  const read = makeIntegerField(spec);
  if (calculation === undefined) {
    return (run) => {
      const b = run.bytes;
      if (b === null) return notBinary(run);
      return end <= b.length ? read(b) : outOfRange(run, b.length);
    };
  }
  return (run) => {
    const b = run.bytes;
    if (b === null) return notBinary(run);
    return end <= b.length ? calculated(run, read(b)) : outOfRange(run, b.length);
  };
}
