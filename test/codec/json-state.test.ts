// The one JSON device-state reader (src/codec/json-state.ts) under its two policies.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceError } from '../../src/core/errors.js';
import { assetEntry, decodeJsonDeviceStateBytes, looksLikeJsonObject, statesFromJsonBytes, statesFromJsonObject } from '../../src/codec/json-state.js';

const utf8 = (text: string) => new TextEncoder().encode(text);

describe('asset entries', () => {
  test('an object with a value member; API input matches names ignoring case, the codec exactly', () => {
    assert.deepEqual(assetEntry({ Value: 1, At: 'x' }, 'ignoring case'), { value: 1, at: 'x' });
    assert.equal(assetEntry({ Value: 1 }, 'exact'), undefined);
    assert.deepEqual(assetEntry({ value: null }, 'exact'), { value: null, at: undefined });
    for (const member of [1, 'value', null, [1], { at: 'x' }]) assert.equal(assetEntry(member, 'ignoring case'), undefined, JSON.stringify(member));
  });

  test('JSON-vs-CBOR detection looks at the first non-blank byte', () => {
    assert.equal(looksLikeJsonObject(utf8(' \r\n\t{}')), true);
    assert.equal(looksLikeJsonObject(utf8('[]')), false);
    assert.equal(looksLikeJsonObject(new Uint8Array([0xa1, 0x61, 0x61, 0x01])), false);
    assert.equal(looksLikeJsonObject(new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d])), false, 'a byte-order mark is not JSON');
    assert.equal(looksLikeJsonObject(new Uint8Array(0)), false);
  });
});

describe('API policy: refused by name later, never dropped here', () => {
  test('SDK casing, bare values and `at` left as sent for the pipeline to check', () => {
    const states = statesFromJsonBytes(utf8('{"t": {"Value": 21.5, "At": "not a time"}, "h": 45, "o": {"value": {"x": 1}}}'), 'body');
    assert.deepEqual(states, { t: { value: 21.5, at: 'not a time' }, h: { value: 45 }, o: { value: { x: 1 }, at: undefined } });
  });

  test('__proto__ is an asset name like any other, not the prototype of the result', () => {
    const states = statesFromJsonBytes(utf8('{"__proto__": {"value": 1}}'), 'body');
    assert.deepEqual(Object.keys(states), ['__proto__']);
    assert.equal(Object.getPrototypeOf(states), Object.prototype);
  });

  test('not an object, not JSON, or nested too deeply: one error naming where', () => {
    const refused = (run: () => unknown, code: string, pattern: RegExp) =>
      assert.throws(run, (err: ServiceError) => err instanceof ServiceError && err.code === code && pattern.test(err.message));
    refused(() => statesFromJsonObject([1], 'device state'), 'INVALID_MESSAGE', /^device state: a device state must be a JSON object of asset names$/);
    refused(() => statesFromJsonBytes(utf8('{"a": '), 'body'), 'INVALID_JSON', /^body: not valid JSON/);
    refused(() => statesFromJsonBytes(utf8(`{"a": {"value": ${'['.repeat(3)}1${']'.repeat(3)}}}`), 'body', 4), 'INVALID_JSON', /nested deeper than 4 levels/);
  });
});

describe('codec policy: warned and dropped', () => {
  test('members that are not {value, at?}, exact names only, `at` needs a zone', () => {
    const result = decodeJsonDeviceStateBytes(utf8('{"a": {"value": 1, "at": "2024-05-01T10:00:00+02:00"}, "b": 2, "c": {"Value": 3}, "d": {"value": 4, "at": "2024-05-01 10:00"}, "e": {"value": 5, "at": null}}'));
    assert.deepEqual(result.states, { a: { value: 1, at: '2024-05-01T08:00:00.000Z' }, e: { value: 5 } });
    assert.deepEqual(result.warnings, [
      'asset "b": not a state object {"value", "at"?}; dropped',
      'asset "c": not a state object {"value", "at"?}; dropped',
      'asset "d": at "2024-05-01 10:00" is not an ISO 8601 timestamp with a zone; dropped',
    ]);
    assert.deepEqual(result.errors, []);
  });

  test('bytes that are not a UTF-8 JSON object are one error', () => {
    for (const bytes of [utf8('[1]'), utf8('{"a":'), new Uint8Array([0x7b, 0xff, 0x7d]), new Uint8Array([0xa0])]) {
      assert.deepEqual(decodeJsonDeviceStateBytes(bytes), { states: {}, warnings: [], errors: ['the payload is not a JSON object'] });
    }
  });
});
