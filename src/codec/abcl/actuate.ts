// Compiles and runs `actuate` blocks (docs/codecs.md, "Writing an ABCL document").
import type { EncodeResult } from '../types.js';
import { makeFieldWriter, type EncodeProblems, type FieldWriter } from './field-writer.js';
import { indexPath, memberPath, type LoadProblems } from './problems.js';
import { checkComment, compileSelectorSpec } from './selector.js';
import { compileAssetName } from './sense.js';
import { statementObject } from './statement.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../../core/json.js';

interface ActuateStatement {
  /** Undefined for a constant field. */
  asset: string | undefined;
  constant: JsonValue;
  write: FieldWriter;
  subject: string;
}

export interface CompiledActuate {
  statements: ActuateStatement[];
  /** Fixed by the document: the largest byte + bytelength over all fields. */
  payloadLength: number;
  assets: Set<string>;
}

const ACTUATE_KEYS = new Set(['asset', 'const', 'field', 'comment']);

function compileActuateStatement(node: JsonValue, path: string, problems: LoadProblems, into: ActuateStatement[], ends: number[]): void {
  const element = statementObject(node, path, problems, (child, childPath) => compileActuateStatement(child, childPath, problems, into, ends));
  if (element === undefined) return;
  if (Object.hasOwn(element, 'switch')) {
    problems.error(memberPath(path, 'switch'), 'is not supported in actuate');
    return;
  }
  const errorsBefore = problems.errors.length;
  for (const key of Object.keys(element)) {
    if (key === 'value' || key === 'at') problems.error(memberPath(path, key), 'belongs to sense and is not allowed in an actuate statement');
    else if (!ACTUATE_KEYS.has(key)) problems.warning(memberPath(path, key), 'is not an actuate statement key; ignored');
  }
  checkComment(element, path, problems);
  const hasAsset = Object.hasOwn(element, 'asset');
  const hasConst = Object.hasOwn(element, 'const');
  let asset: string | undefined;
  let constant: JsonValue = null;
  if (hasAsset && hasConst) problems.error(path, 'must have exactly one of "asset" and "const", not both');
  else if (!hasAsset && !hasConst) problems.error(path, 'must have "asset" or "const"');
  else if (hasAsset) asset = compileAssetName(element, path, problems);
  else {
    constant = element.const!;
    if (typeof constant !== 'number' && typeof constant !== 'boolean' && typeof constant !== 'string') problems.error(memberPath(path, 'const'), 'must be a number, boolean or string');
  }
  const fieldPath = memberPath(path, 'field');
  const field = element.field;
  let spec;
  if (!Object.hasOwn(element, 'field')) problems.error(fieldPath, 'is missing');
  else if (!isJsonObject(field)) problems.error(fieldPath, 'must be a field object');
  else spec = compileSelectorSpec(field, fieldPath, problems, 'field');
  if (spec === undefined || spec.kind !== 'binary' || problems.errors.length !== errorsBefore) return;
  ends.push(spec.byte + spec.length);
  const subject = asset === undefined ? `const ${JSON.stringify(constant)} (${path})` : `asset ${JSON.stringify(asset)} (${path})`;
  into.push({ asset, constant, write: makeFieldWriter(spec, subject), subject });
}

export function compileActuate(block: JsonValue, problems: LoadProblems): CompiledActuate {
  const statements: ActuateStatement[] = [];
  const ends: number[] = [];
  if (!Array.isArray(block)) problems.error('actuate', 'must be an array (a statement block)');
  else block.forEach((element, index) => compileActuateStatement(element, indexPath('actuate', index), problems, statements, ends));
  const assets = new Set<string>();
  for (const statement of statements) if (statement.asset !== undefined) assets.add(statement.asset);
  return { statements, payloadLength: ends.reduce((a, b) => Math.max(a, b), 0), assets };
}

const EMPTY = new Uint8Array(0);

export function runActuate(actuate: CompiledActuate, command: JsonObject, previous: JsonObject | undefined): EncodeResult {
  const problems: EncodeProblems = { errors: [], warnings: [] };
  let usedMembers = 0;
  for (const name of Object.keys(command)) {
    if (actuate.assets.has(name)) usedMembers++;
    else problems.warnings.push(`command member ${JSON.stringify(name)} is not used by any actuate statement`);
  }
  if (usedMembers === 0) {
    problems.errors.push('the command names no asset of the actuate block; refused');
    return { bytes: EMPTY, warnings: problems.warnings, errors: problems.errors };
  }
  const buffer = new Uint8Array(actuate.payloadLength);
  for (const statement of actuate.statements) {
    const { asset } = statement;
    let value: JsonValue | undefined;
    if (asset === undefined) value = statement.constant;
    else if (Object.hasOwn(command, asset)) value = command[asset];
    else if (previous !== undefined && Object.hasOwn(previous, asset)) value = previous[asset];
    if (value === undefined) {
      problems.warnings.push(`${statement.subject}: no value in the command or previous values; its field is left as it is`);
      continue;
    }
    statement.write(buffer, value, problems);
  }
  if (problems.errors.length > 0) return { bytes: EMPTY, warnings: problems.warnings, errors: problems.errors };
  return { bytes: buffer, warnings: problems.warnings, errors: [] };
}
