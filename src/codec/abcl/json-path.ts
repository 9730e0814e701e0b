import { isJsonObject, type JsonValue } from '../../core/json.js';
// Paths into JSON uplinks (docs/codecs.md, "Writing an ABCL document"): split once at load time, resolved per message.

export type PathStep = { kind: 'name'; name: string; allDigits: boolean } | { kind: 'index'; index: number; key: string };

export type PathParseResult = { ok: true; steps: PathStep[] } | { ok: false; error: string };

const SEGMENT = /^([^.[\]]*)((?:\[\d+\])*)$/;

export function parseJsonPath(path: string): PathParseResult {
  if (path === '') return { ok: false, error: 'is an empty path' };
  const steps: PathStep[] = [];
  for (const segment of path.split('.')) {
    const m = SEGMENT.exec(segment);
    if (segment === '' || m === null) return { ok: false, error: `has a bad segment "${segment}"` };
    const name = m[1]!;
    if (name !== '') steps.push({ kind: 'name', name, allDigits: /^\d+$/.test(name) });
    for (const index of m[2]!.match(/\d+/g) ?? []) steps.push({ kind: 'index', index: Number(index), key: index });
  }
  return { ok: true, steps };
}

/** The selected value, or undefined when the path is not found. */
export function resolveJsonPath(root: JsonValue, steps: readonly PathStep[]): JsonValue | undefined {
  let current: JsonValue = root;
  for (const step of steps) {
    if (step.kind === 'name') {
      if (step.allDigits && Array.isArray(current)) {
        const index = Number(step.name);
        if (index >= current.length) return undefined;
        current = current[index]!;
      } else if (isJsonObject(current) && Object.hasOwn(current, step.name)) {
        current = current[step.name]!;
      } else {
        return undefined;
      }
    } else if (Array.isArray(current)) {
      if (step.index >= current.length) return undefined;
      current = current[step.index]!;
    } else if (isJsonObject(current)) {
      if (!Object.hasOwn(current, step.key)) return undefined;
      current = current[step.key]!;
    } else if (typeof current === 'number' && Number.isSafeInteger(current)) {
      // [n] on an integer selects bit n; BigInt shifts are arithmetic, i.e. two's complement.
      current = Number((BigInt(current) >> BigInt(step.index)) & 1n);
    } else {
      return undefined;
    }
  }
  return current;
}
