// Compiles `sense` blocks (docs/codecs.md, "Writing an ABCL document") into closures.
import { makeBinaryReader, type ReaderLabels } from './binary-reader.js';
import { makeJsonReader } from './json-reader.js';
import { indexPath, memberPath, type LoadProblems } from './problems.js';
import { checkComment, compileSelectorSpec, type SelectorSpec } from './selector.js';
import type { SenseRun, SenseStatement, ValueReader } from './sense-run.js';
import { statementObject } from './statement.js';
import { isJsonObject, type JsonObject, type JsonValue, setMember } from '../../core/json.js';
import { toIsoTimestamp } from '../../core/time.js';

const MAPPING_KEYS = new Set(['asset', 'value', 'at', 'comment']);
const SWITCH_KEYS = new Set(['switch', 'on', 'comment']);
const CASE_KEYS = new Set(['case', 'do', 'comment']);
/** Scalar values of these keys mark an object as a selector that lacks `byte`/`json`. */
const SELECTOR_MARKERS = ['bytelength', 'byteorder', 'type', 'signed', 'bit', 'bitlength', 'calculation'];
const SKIPPED = 'statement skipped';

function makeReader(spec: SelectorSpec, labels: ReaderLabels, truncateStrings: boolean): ValueReader {
  return spec.kind === 'json' ? makeJsonReader(spec, labels) : makeBinaryReader(spec, labels, { truncateStrings });
}

/** Asset names: a non-empty string, or a number written as `String(n)`. */
export function compileAssetName(object: JsonObject, path: string, problems: LoadProblems): string | undefined {
  if (!Object.hasOwn(object, 'asset')) {
    problems.error(path, 'has no "asset"');
    return undefined;
  }
  const asset = object.asset;
  if (typeof asset === 'string' && asset !== '') return asset;
  if (typeof asset === 'number' && Number.isFinite(asset)) return String(asset);
  problems.error(memberPath(path, 'asset'), 'must be a non-empty string or a number');
  return undefined;
}

function compileValueDescriptor(descriptor: JsonValue, path: string, subject: string, problems: LoadProblems): ValueReader | undefined {
  if (Array.isArray(descriptor)) {
    problems.error(path, 'is an array; a value descriptor cannot contain arrays');
    return undefined;
  }
  if (!isJsonObject(descriptor)) {
    const constant = descriptor;
    return () => constant;
  }
  if (Object.hasOwn(descriptor, 'byte') || Object.hasOwn(descriptor, 'json')) {
    const spec = compileSelectorSpec(descriptor, path, problems, 'selector');
    return spec && makeReader(spec, { subject, consequence: SKIPPED }, true);
  }
  const marker = SELECTOR_MARKERS.find((key) => Object.hasOwn(descriptor, key) && (typeof descriptor[key] !== 'object' || descriptor[key] === null));
  if (marker !== undefined) {
    problems.error(path, `looks like a selector (it has "${marker}") but has neither "byte" nor "json"`);
    return undefined;
  }
  const names = Object.keys(descriptor);
  const readers: (ValueReader | undefined)[] = names.map((name) =>
    compileValueDescriptor(descriptor[name]!, memberPath(path, name), `${subject} member ${JSON.stringify(name)}`, problems),
  );
  if (readers.some((reader) => reader === undefined)) return undefined;
  const memberReaders = readers as ValueReader[];
  const count = names.length;
  return (run) => {
    const result: JsonObject = {};
    let complete = true;
    // Every member is read even after a failure so that all of their warnings are reported.
    for (let i = 0; i < count; i++) {
      const value = memberReaders[i]!(run);
      if (value === undefined) complete = false;
      else setMember(result, names[i]!, value);
    }
    return complete ? result : undefined;
  };
}

function compileMapping(statement: JsonObject, path: string, problems: LoadProblems): SenseStatement | undefined {
  for (const key of Object.keys(statement)) {
    if (key === 'field' || key === 'const') problems.error(memberPath(path, key), 'belongs to actuate and is not allowed in a sense statement');
    else if (!MAPPING_KEYS.has(key)) problems.warning(memberPath(path, key), 'is not a mapping statement key; ignored');
  }
  checkComment(statement, path, problems);
  const asset = compileAssetName(statement, path, problems);
  const subject = `asset ${JSON.stringify(asset ?? '?')} (${path})`;
  let readValue: ValueReader | undefined;
  if (Object.hasOwn(statement, 'value')) readValue = compileValueDescriptor(statement.value!, memberPath(path, 'value'), subject, problems);
  else problems.error(path, 'has no "value"');

  let readAt: ValueReader | undefined;
  if (Object.hasOwn(statement, 'at')) {
    const atPath = memberPath(path, 'at');
    const at = statement.at;
    if (!isJsonObject(at)) problems.error(atPath, 'must be a selector object');
    else {
      const spec = compileSelectorSpec(at, atPath, problems, 'selector');
      if (spec) readAt = makeReader(spec, { subject: `${subject} at`, consequence: 'state written without at' }, true);
    }
  }
  if (asset === undefined || readValue === undefined) return undefined;
  const value = readValue;
  const write = asset === '__proto__' ? (run: SenseRun, state: { value: JsonValue; at?: string }) => setMember(run.states, asset, state) : (run: SenseRun, state: { value: JsonValue; at?: string }) => { run.states[asset] = state; };
  if (readAt === undefined && asset !== '__proto__') {
    // The hot path: one closure per statement, the write inlined.
    return (run) => {
      const v = value(run);
      if (v !== undefined) run.states[asset] = { value: v };
    };
  }
  if (readAt === undefined) {
    return (run) => {
      const v = value(run);
      if (v !== undefined) write(run, { value: v });
    };
  }
  const atReader = readAt;
  return (run) => {
    const v = value(run);
    if (v === undefined) return;
    const rawAt = atReader(run);
    if (rawAt === undefined) {
      write(run, { value: v });
      return;
    }
    const at = toIsoTimestamp(rawAt);
    if (at === undefined) {
      run.warnings.push(`${subject} at: ${JSON.stringify(rawAt)} is not a timestamp; state written without at`);
      write(run, { value: v });
    } else {
      write(run, { value: v, at });
    }
  };
}

function caseKey(value: string | number | boolean): string {
  return `${typeof value}:${String(value)}`;
}

function compileSwitch(statement: JsonObject, path: string, problems: LoadProblems): SenseStatement | undefined {
  for (const key of Object.keys(statement)) {
    if (!SWITCH_KEYS.has(key)) problems.warning(memberPath(path, key), 'is not a switch key; ignored');
  }
  checkComment(statement, path, problems);
  const switchPath = memberPath(path, 'switch');
  const subject = `switch (${path})`;
  const selector = statement.switch;
  let readSwitchValue: ValueReader | undefined;
  let valid = true;
  if (selector === '$payloadLength') {
    readSwitchValue = (run) => {
      if (run.bytes !== null) return run.bytes.length;
      run.warnings.push(`${subject}: $payloadLength on a JSON uplink; only $default considered`);
      return undefined;
    };
  } else if (isJsonObject(selector)) {
    const spec = compileSelectorSpec(selector, switchPath, problems, 'selector');
    if (spec) readSwitchValue = makeReader(spec, { subject, consequence: 'only $default considered' }, false);
    else valid = false;
  } else {
    problems.error(switchPath, 'must be a selector object or "$payloadLength"');
    valid = false;
  }

  const cases = new Map<JsonValue, SenseStatement[]>();
  let defaultBlock: SenseStatement[] | undefined;
  const onPath = memberPath(path, 'on');
  if (!Object.hasOwn(statement, 'on') || !Array.isArray(statement.on)) {
    problems.error(onPath, Object.hasOwn(statement, 'on') ? 'must be an array' : 'is missing');
    valid = false;
  } else {
    const seen = new Set<string>();
    statement.on.forEach((entry, index) => {
      const casePath = indexPath(onPath, index);
      if (!isJsonObject(entry)) {
        problems.error(casePath, 'must be an object with "case" and "do"');
        valid = false;
        return;
      }
      for (const key of Object.keys(entry)) {
        if (!CASE_KEYS.has(key)) problems.warning(memberPath(casePath, key), 'is not a case key; ignored');
      }
      checkComment(entry, casePath, problems);
      const value = entry.case;
      const caseIsValid = typeof value === 'number' || typeof value === 'string' || typeof value === 'boolean';
      if (!caseIsValid) {
        problems.error(memberPath(casePath, 'case'), Object.hasOwn(entry, 'case') ? 'must be a number, string or boolean' : 'is missing');
        valid = false;
      }
      let block: SenseStatement[] = [];
      if (!Object.hasOwn(entry, 'do')) {
        problems.error(memberPath(casePath, 'do'), 'is missing');
        valid = false;
      } else {
        block = compileSenseBlock(entry.do!, memberPath(casePath, 'do'), problems);
      }
      if (!caseIsValid) return;
      if (value === '$default') {
        if (defaultBlock !== undefined) {
          problems.error(memberPath(casePath, 'case'), 'is a second "$default"');
          valid = false;
        }
        defaultBlock = block;
        return;
      }
      const key = caseKey(value);
      if (seen.has(key)) {
        problems.warning(memberPath(casePath, 'case'), `repeats the case ${JSON.stringify(value)}; it can never run`);
        return;
      }
      seen.add(key);
      cases.set(value, block);
    });
  }
  if (!valid || readSwitchValue === undefined) return undefined;
  const read = readSwitchValue;
  const fallback = defaultBlock;
  return (run) => {
    const value = read(run);
    // Map keys compare by SameValueZero: 1 and 1.0 match, 1, "1" and true never do.
    const block = value === undefined ? fallback : (cases.get(value) ?? fallback);
    if (block !== undefined) for (let i = 0; i < block.length; i++) block[i]!(run);
  };
}

function compileSenseStatement(node: JsonValue, path: string, problems: LoadProblems, into: SenseStatement[]): void {
  const element = statementObject(node, path, problems, (child, childPath) => compileSenseStatement(child, childPath, problems, into));
  if (element === undefined) return;
  const isMapping = Object.hasOwn(element, 'asset') || Object.hasOwn(element, 'value');
  const isSwitch = Object.hasOwn(element, 'switch');
  let statement: SenseStatement | undefined;
  if (isMapping && isSwitch) problems.error(path, 'mixes a switch with a mapping ("asset"/"value")');
  else if (isMapping) statement = compileMapping(element, path, problems);
  else if (isSwitch) statement = compileSwitch(element, path, problems);
  else if (Object.hasOwn(element, 'field') || Object.hasOwn(element, 'const')) problems.error(path, 'is an actuate statement ("field"/"const"), not allowed in sense');
  else problems.error(path, 'is not a recognised statement (no "asset", "value" or "switch")');
  if (statement !== undefined) into.push(statement);
}

/** Compiles a statement block, flattening nested blocks in document order. */
export function compileSenseBlock(block: JsonValue, path: string, problems: LoadProblems): SenseStatement[] {
  const statements: SenseStatement[] = [];
  if (!Array.isArray(block)) {
    problems.error(path, 'must be an array (a statement block)');
    return statements;
  }
  block.forEach((element, index) => compileSenseStatement(element, indexPath(path, index), problems, statements));
  return statements;
}
