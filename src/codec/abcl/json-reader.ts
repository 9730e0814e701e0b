// Readers for `json` selectors (docs/codecs.md, "Writing an ABCL document").
import { describeJsonType } from '../json.js';
import { resolveJsonPath } from './json-path.js';
import type { CanonicalType, JsonSelectorSpec } from './selector.js';
import type { ReaderLabels } from './binary-reader.js';
import type { SenseRun, ValueReader } from './sense-run.js';
import type { JsonValue } from '../../core/json.js';

/** The explicit-type conversions of JSON mode; undefined when impossible. */
function convert(value: JsonValue, type: CanonicalType): JsonValue | undefined {
  switch (type) {
    case 'integer':
    case 'number':
      if (typeof value === 'number') return value;
      return typeof value === 'boolean' ? (value ? 1 : 0) : undefined;
    case 'boolean':
      if (typeof value === 'boolean') return value;
      return typeof value === 'number' ? value !== 0 : undefined;
    case 'string':
      if (typeof value === 'string') return value;
      if (typeof value === 'number') return JSON.stringify(value);
      return typeof value === 'boolean' ? String(value) : undefined;
    case 'hexstring':
      return typeof value === 'string' ? value : undefined;
  }
}

export function makeJsonReader(spec: JsonSelectorSpec, labels: ReaderLabels): ValueReader {
  const { path, pathText, type, calculation, calculationText } = spec;
  const { subject, consequence } = labels;
  const noValue = (run: SenseRun, why: string): undefined => {
    run.warnings.push(`${subject}: ${why}; ${consequence}`);
    return undefined;
  };
  return (run) => {
    if (run.json === null) return noValue(run, `json selector "${pathText}" on a binary uplink`);
    const found = resolveJsonPath(run.json, path);
    if (found === undefined) return noValue(run, `json path "${pathText}" not found`);
    let value: JsonValue | undefined = found;
    if (type !== undefined) {
      value = convert(found, type);
      if (value === undefined) return noValue(run, `json path "${pathText}" holds ${describeJsonType(found)}, which cannot be read as ${type}`);
    }
    if (calculation === undefined) return value;
    if (typeof value !== 'number') return noValue(run, `calculation needs a number but json path "${pathText}" holds ${describeJsonType(value)}`);
    const result = calculation(value);
    if (result !== result) return noValue(run, `calculation "${calculationText}" failed for val = ${value} (division by zero or non-finite result)`);
    return result;
  };
}
