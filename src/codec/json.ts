import type { JsonValue } from '../core/json.js';

export function decodeFailure(message: string): { states: Record<string, never>; warnings: string[]; errors: string[] } {
  return { states: {}, warnings: [], errors: [message] };
}

export function describeJsonType(value: JsonValue | undefined): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
