// Validation of selectors and actuate fields (docs/codecs.md, "Writing an ABCL document") into plain specs.
// Everything here runs once, at load time; the readers and writers are built from the specs.
import { parseExpression, type CompiledExpression } from './expression.js';
import { parseJsonPath, type PathStep } from './json-path.js';
import { memberPath, type LoadProblems } from './problems.js';
import type { JsonObject, JsonValue } from '../../core/json.js';

export type CanonicalType = 'integer' | 'number' | 'boolean' | 'string' | 'hexstring';

const TYPE_NAMES: Record<string, CanonicalType> = {
  integer: 'integer',
  int: 'integer',
  uint: 'integer',
  number: 'number',
  float: 'number',
  boolean: 'boolean',
  string: 'string',
  hexstring: 'hexstring',
};

export interface BinarySelectorSpec {
  kind: 'binary';
  byte: number;
  length: number;
  little: boolean;
  type: CanonicalType;
  /** 2, 4 or 8 for a float `number`; undefined when the bytes are read as an integer. */
  floatWidth: 2 | 4 | 8 | undefined;
  signed: boolean;
  /** Present for a bit field. */
  bits: { bit: number; bitLength: number } | undefined;
  calculation: CompiledExpression | undefined;
  calculationText: string | undefined;
}

export interface JsonSelectorSpec {
  kind: 'json';
  pathText: string;
  path: PathStep[];
  /** Only an explicit `type` converts in JSON mode. */
  type: CanonicalType | undefined;
  calculation: CompiledExpression | undefined;
  calculationText: string | undefined;
}

export type SelectorSpec = BinarySelectorSpec | JsonSelectorSpec;

const SELECTOR_KEYS = new Set(['byte', 'json', 'bytelength', 'byteorder', 'type', 'signed', 'bit', 'bitlength', 'calculation', 'comment']);
const BINARY_ONLY_KEYS = ['bytelength', 'byteorder', 'signed', 'bit', 'bitlength'] as const;

/** Largest end offset an actuate field may have. */
export const MAX_FIELD_END = 4096;

function isInteger(value: JsonValue | undefined, min: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min;
}

export function checkComment(object: JsonObject, path: string, problems: LoadProblems): void {
  if (Object.hasOwn(object, 'comment') && typeof object.comment !== 'string') problems.warning(memberPath(path, 'comment'), 'should be a string; ignored');
}

/**
 * Validates a selector. `role` "field" is an actuate field (`byte` required, no `json`).
 * Returns undefined when it has load errors (already reported). The steps below each read one
 * group of keys and report their own problems; a selector with any error compiles to nothing.
 */
export function compileSelectorSpec(object: JsonObject, path: string, problems: LoadProblems, role: 'selector' | 'field'): SelectorSpec | undefined {
  const errorsBefore = problems.errors.length;
  const { hasByte, hasJson } = checkSelectorShape(object, path, problems, role);
  const { type, explicitType, isUint } = readType(object, path, problems);
  const signedGiven = readSigned(object, path, problems);
  const { calculation, calculationText } = readCalculation(object, path, problems, type);

  if (hasJson && role === 'selector' && !hasByte) {
    const spec = compileJsonSelector(object, path, problems, { type: explicitType ? type : undefined, calculation, calculationText });
    return problems.errors.length === errorsBefore ? spec : undefined;
  }

  const byte = object.byte;
  if (hasByte && !isInteger(byte, 0)) problems.error(memberPath(path, 'byte'), 'must be an integer ≥ 0');
  let length = type === 'number' ? 4 : 1;
  if (Object.hasOwn(object, 'bytelength')) {
    if (isInteger(object.bytelength, 1)) length = object.bytelength;
    else problems.error(memberPath(path, 'bytelength'), 'must be an integer ≥ 1');
  }
  const little = readByteOrder(object, path, problems);
  const floatWidth = type === 'number' && (length === 2 || length === 4 || length === 8) ? (length as 2 | 4 | 8) : undefined;
  const readsInteger = type === 'integer' || (type === 'number' && floatWidth === undefined);
  if (readsInteger && length > 8) problems.error(memberPath(path, 'bytelength'), `must be at most 8 for an integer (got ${length})`);
  const bits = readBits(object, path, problems, { type, length, floatWidth });

  let signed = signedGiven;
  if (signedGiven) {
    if (isUint) {
      problems.warning(memberPath(path, 'signed'), 'is ignored: type "uint" is always unsigned');
      signed = false;
    } else if (!readsInteger) {
      problems.warning(memberPath(path, 'signed'), `has no effect on a ${floatWidth === undefined ? type : 'float number'} selector`);
      signed = false;
    }
  }
  if (little && type === 'string') problems.warning(memberPath(path, 'byteorder'), 'has no effect on a string: string bytes are never reordered');
  if (role === 'field' && isInteger(byte, 0) && byte + length > MAX_FIELD_END) problems.error(path, `ends at byte ${byte + length}, beyond byte ${MAX_FIELD_END}`);

  if (problems.errors.length !== errorsBefore) return undefined;
  return { kind: 'binary', byte: byte as number, length, little, type, floatWidth, signed, bits, calculation, calculationText };
}

/** Unknown keys, the comment, and which of `byte` and `json` the selector has (for its role). */
function checkSelectorShape(object: JsonObject, path: string, problems: LoadProblems, role: 'selector' | 'field'): { hasByte: boolean; hasJson: boolean } {
  for (const key of Object.keys(object)) {
    if (!SELECTOR_KEYS.has(key)) problems.warning(memberPath(path, key), 'is not a selector key; ignored');
  }
  checkComment(object, path, problems);
  const hasByte = Object.hasOwn(object, 'byte');
  const hasJson = Object.hasOwn(object, 'json');
  if (role === 'field') {
    if (hasJson) problems.error(memberPath(path, 'json'), 'is not allowed in an actuate field');
    if (!hasByte) problems.error(path, 'must have "byte"');
  } else if (hasByte && hasJson) {
    problems.error(path, 'must have exactly one of "byte" and "json", not both');
  } else if (!hasByte && !hasJson) {
    problems.error(path, 'must have "byte" or "json"');
  }
  return { hasByte, hasJson };
}

/** `type` (any case); integer when absent. `uint` is an integer that `signed` cannot change. */
function readType(object: JsonObject, path: string, problems: LoadProblems): { type: CanonicalType; explicitType: boolean; isUint: boolean } {
  if (!Object.hasOwn(object, 'type')) return { type: 'integer', explicitType: false, isUint: false };
  const raw = object.type;
  const canonical = typeof raw === 'string' ? TYPE_NAMES[raw.toLowerCase()] : undefined;
  if (canonical === undefined || !Object.hasOwn(TYPE_NAMES, (raw as string).toLowerCase())) {
    problems.error(memberPath(path, 'type'), `is not a known type (${JSON.stringify(raw)})`);
    return { type: 'integer', explicitType: false, isUint: false };
  }
  return { type: canonical, explicitType: true, isUint: (raw as string).toLowerCase() === 'uint' };
}

/** Whether `signed` was given as true (a boolean or its text); anything but true or false is an error. */
function readSigned(object: JsonObject, path: string, problems: LoadProblems): boolean {
  if (!Object.hasOwn(object, 'signed')) return false;
  const raw = object.signed;
  if (raw === true || raw === 'true') return true;
  if (raw !== false && raw !== 'false') problems.error(memberPath(path, 'signed'), `must be true, false, "true" or "false" (got ${JSON.stringify(raw)})`);
  return false;
}

/** `calculation`, compiled once; not allowed on booleans, strings and hex strings. */
function readCalculation(object: JsonObject, path: string, problems: LoadProblems, type: CanonicalType): { calculation?: CompiledExpression; calculationText?: string } {
  if (!Object.hasOwn(object, 'calculation')) return {};
  const raw = object.calculation;
  let compiled: { calculation?: CompiledExpression; calculationText?: string } = {};
  if (typeof raw !== 'string') {
    problems.error(memberPath(path, 'calculation'), 'must be a string');
  } else {
    const parsed = parseExpression(raw);
    if (parsed.ok) compiled = { calculation: parsed.evaluate, calculationText: raw };
    else problems.error(memberPath(path, 'calculation'), `is not a valid expression: ${parsed.error}`);
  }
  if (type === 'boolean' || type === 'string' || type === 'hexstring') problems.error(memberPath(path, 'calculation'), `is not allowed on a ${type} selector`);
  return compiled;
}

/** A `json` selector: its path, and a warning for each key that only binary selectors read. */
function compileJsonSelector(
  object: JsonObject,
  path: string,
  problems: LoadProblems,
  read: { type: CanonicalType | undefined; calculation?: CompiledExpression; calculationText?: string },
): SelectorSpec {
  const raw = object.json;
  let steps: PathStep[] = [];
  if (typeof raw !== 'string') {
    problems.error(memberPath(path, 'json'), 'must be a non-empty string');
  } else {
    const parsed = parseJsonPath(raw);
    if (parsed.ok) steps = parsed.steps;
    else problems.error(memberPath(path, 'json'), parsed.error);
  }
  for (const key of BINARY_ONLY_KEYS) {
    if (Object.hasOwn(object, key)) problems.warning(memberPath(path, key), 'has no effect on a json selector');
  }
  return { kind: 'json', pathText: raw as string, path: steps, type: read.type, calculation: read.calculation, calculationText: read.calculationText };
}

/** Whether `byteorder` says little-endian; `small` is read as `little`, with a warning. */
function readByteOrder(object: JsonObject, path: string, problems: LoadProblems): boolean {
  if (!Object.hasOwn(object, 'byteorder')) return false;
  const raw = object.byteorder;
  const order = typeof raw === 'string' ? raw.toLowerCase() : undefined;
  if (order === 'little') return true;
  if (order === 'small') {
    problems.warning(memberPath(path, 'byteorder'), 'value "small" is read as "little"');
    return true;
  }
  if (order !== 'big') problems.error(memberPath(path, 'byteorder'), `must be "big" or "little" (got ${JSON.stringify(raw)})`);
  return false;
}

/** `bit` and `bitlength`: a bit field within the selector's bytes (integers and booleans only). */
function readBits(
  object: JsonObject,
  path: string,
  problems: LoadProblems,
  read: { type: CanonicalType; length: number; floatWidth: 2 | 4 | 8 | undefined },
): BinarySelectorSpec['bits'] {
  const hasBit = Object.hasOwn(object, 'bit');
  const hasBitLength = Object.hasOwn(object, 'bitlength');
  if (!hasBit && !hasBitLength) return undefined;
  const { type, length, floatWidth } = read;
  let bit = 0;
  let bitLength = 1;
  let valid = true;
  if (hasBit) {
    if (isInteger(object.bit, 0)) bit = object.bit;
    else {
      problems.error(memberPath(path, 'bit'), 'must be an integer ≥ 0');
      valid = false;
    }
  }
  if (hasBitLength) {
    if (isInteger(object.bitlength, 1)) bitLength = object.bitlength;
    else {
      problems.error(memberPath(path, 'bitlength'), 'must be an integer ≥ 1');
      valid = false;
    }
  }
  if (type === 'string' || type === 'hexstring' || floatWidth !== undefined) {
    problems.error(path, `cannot have bit or bitlength on a ${floatWidth === undefined ? type : 'float number'} selector`);
    return undefined;
  }
  if (length > 8) {
    problems.error(path, `cannot have bit or bitlength with bytelength ${length} (more than 8)`);
    return undefined;
  }
  if (valid && bit + bitLength > 8 * length) {
    problems.error(path, `bit ${bit} + bitlength ${bitLength} exceeds the ${8 * length} bits of bytelength ${length}`);
    return undefined;
  }
  return valid ? { bit, bitLength } : undefined;
}
