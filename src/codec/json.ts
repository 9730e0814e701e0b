import type { JsonObject, JsonValue } from './types.js';

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/**
 * Sets an own member even when the key is `__proto__`: plain assignment would replace the
 * object's prototype instead, and member names come from devices and documents.
 */
export function setMember<T>(target: { [key: string]: T }, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

export function hasMember(target: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(target, key);
}

export function decodeFailure(message: string): { states: Record<string, never>; warnings: string[]; errors: string[] } {
  return { states: {}, warnings: [], errors: [message] };
}

export function describeJsonType(value: JsonValue | undefined): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
