// Writers for actuate fields (docs/codecs.md, "Writing an ABCL document"), specialised once per field.
import { describeJsonType } from '../json.js';
import { roundHalfAwayFromZero, type CompiledExpression } from './expression.js';
import { numberToFloat16Bits } from './float16.js';
import type { BinarySelectorSpec } from './selector.js';
import type { JsonValue } from '../../core/json.js';

export interface EncodeProblems {
  readonly errors: string[];
  readonly warnings: string[];
}

/** Writes `value` into `buffer`; reports problems and returns false on an error. */
export type FieldWriter = (buffer: Uint8Array, value: JsonValue, problems: EncodeProblems) => boolean;

const UTF8 = new TextEncoder();
/** Rounding moves up to this size are float noise (0.57 * 100) and stay silent. */
const ROUNDING_TOLERANCE = 1e-9;

/** Reads the field's bytes as an unsigned integer in the field's byte order. */
function readUnsignedBig(buffer: Uint8Array, spec: BinarySelectorSpec): bigint {
  let raw = 0n;
  for (let i = 0; i < spec.length; i++) raw = (raw << 8n) | BigInt(buffer[spec.little ? spec.byte + spec.length - 1 - i : spec.byte + i]!);
  return raw;
}

function writeUnsignedBig(buffer: Uint8Array, spec: BinarySelectorSpec, value: bigint): void {
  let rest = value;
  for (let i = spec.length - 1; i >= 0; i--) {
    buffer[spec.little ? spec.byte + spec.length - 1 - i : spec.byte + i] = Number(rest & 0xffn);
    rest >>= 8n;
  }
}

function readUnsigned(buffer: Uint8Array, spec: BinarySelectorSpec): number {
  let raw = 0;
  for (let i = 0; i < spec.length; i++) raw = raw * 256 + buffer[spec.little ? spec.byte + spec.length - 1 - i : spec.byte + i]!;
  return raw;
}

function writeUnsigned(buffer: Uint8Array, spec: BinarySelectorSpec, value: number): void {
  let rest = value;
  for (let i = spec.length - 1; i >= 0; i--) {
    buffer[spec.little ? spec.byte + spec.length - 1 - i : spec.byte + i] = rest % 256;
    rest = Math.floor(rest / 256);
  }
}

/**
 * Stores a `width`-bit two's complement pattern (already in range, as an unsigned value) into
 * the field: a whole-byte field replaces its bytes, a bit field replaces only its own bits.
 */
function makeStore(spec: BinarySelectorSpec): (buffer: Uint8Array, unsigned: number | bigint) => void {
  const { bits, length } = spec;
  if (length <= 6) {
    if (bits === undefined) return (buffer, unsigned) => writeUnsigned(buffer, spec, Number(unsigned));
    const low = 2 ** bits.bit;
    const high = 2 ** (bits.bit + bits.bitLength);
    return (buffer, unsigned) => {
      const existing = readUnsigned(buffer, spec);
      const kept = Math.floor(existing / high) * high + (existing % low);
      writeUnsigned(buffer, spec, kept + Number(unsigned) * low);
    };
  }
  if (bits === undefined) return (buffer, unsigned) => writeUnsignedBig(buffer, spec, BigInt(unsigned));
  const shift = BigInt(bits.bit);
  const mask = ((1n << BigInt(bits.bitLength)) - 1n) << shift;
  return (buffer, unsigned) => {
    const existing = readUnsignedBig(buffer, spec);
    writeUnsignedBig(buffer, spec, (existing & ~mask) | (BigInt(unsigned) << shift));
  };
}

function numericInput(value: JsonValue): number | undefined {
  if (typeof value === 'boolean') return value ? 1 : 0;
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/**
 * The number a numeric field is to hold: the commanded value (a finite number, or a boolean as
 * 1/0) put through the field's calculation. Reports an error and returns undefined when the value
 * is not numeric or the calculation fails.
 */
function commandedNumber(
  value: JsonValue,
  subject: string,
  calculation: CompiledExpression | undefined,
  calculationText: string | undefined,
  problems: EncodeProblems,
): number | undefined {
  const v = numericInput(value);
  if (v === undefined) {
    problems.errors.push(`${subject}: value must be a finite number or a boolean, got ${describeJsonType(value)}`);
    return undefined;
  }
  if (calculation === undefined) return v;
  const result = calculation(v);
  if (result !== result) {
    problems.errors.push(`${subject}: calculation "${calculationText}" failed for val = ${v} (division by zero or non-finite result)`);
    return undefined;
  }
  return result;
}

function makeIntegerWriter(spec: BinarySelectorSpec, subject: string): FieldWriter {
  const width = spec.bits ? spec.bits.bitLength : 8 * spec.length;
  const { signed, calculation, calculationText } = spec;
  const store = makeStore(spec);
  const exact = width <= 53;
  const min = signed ? -(2 ** (width - 1)) : 0;
  const max = signed ? 2 ** (width - 1) - 1 : 2 ** width - 1;
  const bigMin = signed ? -(1n << BigInt(width - 1)) : 0n;
  const bigMax = signed ? (1n << BigInt(width - 1)) - 1n : (1n << BigInt(width)) - 1n;
  const rangeText = `${signed ? 'signed' : 'unsigned'} ${width}-bit range ${exact ? min : bigMin}..${exact ? max : bigMax}`;
  return (buffer, value, problems) => {
    const v = commandedNumber(value, subject, calculation, calculationText, problems);
    if (v === undefined) return false;
    const rounded = roundHalfAwayFromZero(v) + 0; // + 0 turns −0 into 0
    if (Math.abs(rounded - v) > ROUNDING_TOLERANCE) problems.warnings.push(`${subject}: ${v} is not an integer; rounded to ${rounded}`);
    if (exact ? rounded < min || rounded > max : BigInt(rounded) < bigMin || BigInt(rounded) > bigMax) {
      problems.errors.push(`${subject}: ${rounded} does not fit the ${rangeText}`);
      return false;
    }
    if (exact) store(buffer, rounded < 0 ? rounded + 2 ** width : rounded);
    else store(buffer, BigInt.asUintN(width, BigInt(rounded)));
    return true;
  };
}

function makeFloatWriter(spec: BinarySelectorSpec, subject: string): FieldWriter {
  const { byte, little, calculation, calculationText } = spec;
  const width = spec.floatWidth!;
  return (buffer, value, problems) => {
    const v = commandedNumber(value, subject, calculation, calculationText, problems);
    if (v === undefined) return false;
    const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    if (width === 8) {
      view.setFloat64(byte, v, little);
      return true;
    }
    if (width === 4) {
      if (!Number.isFinite(Math.fround(v))) {
        problems.errors.push(`${subject}: ${v} overflows binary32`);
        return false;
      }
      view.setFloat32(byte, v, little);
      return true;
    }
    const bits = numberToFloat16Bits(v);
    if (bits === undefined) {
      problems.errors.push(`${subject}: ${v} overflows binary16 (largest finite value 65504)`);
      return false;
    }
    view.setUint16(byte, bits, little);
    return true;
  };
}

function makeBooleanWriter(spec: BinarySelectorSpec, subject: string): FieldWriter {
  const { byte, length, bits } = spec;
  const store = bits === undefined ? undefined : makeStore(spec);
  const allOnes = bits === undefined ? 0 : length <= 6 ? 2 ** bits.bitLength - 1 : (1n << BigInt(bits.bitLength)) - 1n;
  return (buffer, value, problems) => {
    let on: boolean;
    if (typeof value === 'boolean') on = value;
    else if (typeof value === 'number' && Number.isFinite(value)) on = value !== 0;
    else {
      problems.errors.push(`${subject}: value must be a boolean or a finite number, got ${describeJsonType(value)}`);
      return false;
    }
    if (store !== undefined) store(buffer, on ? allOnes : 0);
    else buffer.fill(on ? 0xff : 0, byte, byte + length);
    return true;
  };
}

function makeStringWriter(spec: BinarySelectorSpec, subject: string): FieldWriter {
  const { byte, length } = spec;
  return (buffer, value, problems) => {
    if (typeof value !== 'string') {
      problems.errors.push(`${subject}: value must be a string, got ${describeJsonType(value)}`);
      return false;
    }
    const encoded = UTF8.encode(value);
    if (encoded.length > length) {
      problems.errors.push(`${subject}: string is ${encoded.length} UTF-8 bytes, more than the field's ${length}`);
      return false;
    }
    buffer.fill(0, byte, byte + length);
    buffer.set(encoded, byte);
    return true;
  };
}

function makeHexWriter(spec: BinarySelectorSpec, subject: string): FieldWriter {
  const { byte, length, little } = spec;
  return (buffer, value, problems) => {
    if (typeof value !== 'string' || value.length !== 2 * length || !/^[0-9A-Fa-f]*$/.test(value)) {
      problems.errors.push(`${subject}: value must be a string of exactly ${2 * length} hex digits`);
      return false;
    }
    for (let i = 0; i < length; i++) {
      const pair = parseInt(value.substr(2 * i, 2), 16);
      buffer[little ? byte + length - 1 - i : byte + i] = pair;
    }
    return true;
  };
}

export function makeFieldWriter(spec: BinarySelectorSpec, subject: string): FieldWriter {
  switch (spec.type) {
    case 'boolean':
      return makeBooleanWriter(spec, subject);
    case 'string':
      return makeStringWriter(spec, subject);
    case 'hexstring':
      return makeHexWriter(spec, subject);
    default:
      return spec.floatWidth === undefined ? makeIntegerWriter(spec, subject) : makeFloatWriter(spec, subject);
  }
}
