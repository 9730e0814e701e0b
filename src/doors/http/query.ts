// Query-string parameters as the API reads them (docs/api.md): each refusal names the parameter and its rule.
import { ServiceError } from '../../core/errors.js';
import { parseTimestamp } from '../../core/time.js';

function invalid(message: string): never {
  throw new ServiceError('INVALID_QUERY', message);
}

/** An ISO 8601 timestamp with a zone, as epoch milliseconds; `undefined` when absent. */
export function queryTime(query: URLSearchParams, key: string): number | undefined {
  const raw = query.get(key);
  if (raw === null) return undefined;
  const ms = parseTimestamp(raw);
  if (ms === undefined) invalid(`query "${key}" must be an ISO 8601 timestamp with a zone`);
  return ms;
}

/** `limit`: an integer from 1 to `max`; `fallback` when absent. */
export function queryLimit(query: URLSearchParams, fallback: number, max: number): number {
  const raw = query.get('limit');
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) invalid(`query "limit" must be an integer from 1 to ${max}`);
  return n;
}

/** A flag: `1`, `true` or present without a value turn it on; `0`, `false` or absent leave it off. */
export function queryFlag(query: URLSearchParams, key: string): boolean {
  const raw = query.get(key);
  if (raw === null || raw === '0' || raw === 'false') return false;
  if (raw === '' || raw === '1' || raw === 'true') return true;
  invalid(`query "${key}" must be 1 or 0`);
}

/** A JSON value in the query (e.g. a command's `meta`); `undefined` when absent. */
export function queryJson(query: URLSearchParams, key: string): unknown {
  const text = query.get(key);
  if (text === null) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    invalid(`query "${key}" must be a JSON object`);
  }
}

/**
 * The cursor of the next page, as a previous page returned it in `next` (accepted as `cursor` or
 * `next`); `undefined` for the first page. `decode` answers `undefined` for text it did not issue.
 */
export function queryCursor<T>(query: URLSearchParams, decode: (text: string) => T | undefined, options: { emptyIsFirstPage?: boolean } = {}): T | undefined {
  const text = query.get('cursor') ?? query.get('next');
  if (text === null || (text === '' && options.emptyIsFirstPage)) return undefined;
  const cursor = decode(text);
  if (cursor === undefined) invalid('query "cursor" is not a cursor this service returned');
  return cursor;
}
