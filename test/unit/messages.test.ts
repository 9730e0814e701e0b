import { test } from 'node:test';
import assert from 'node:assert/strict';
import { valueProblem } from '../../src/ingest/messages.js';
import { ServiceError } from '../../src/core/errors.js';
import { jsonNestingOver, parseJson } from '../../src/core/json.js';

test('JSON nesting is counted outside strings, escapes included', () => {
  assert.equal(jsonNestingOver('[[[]]]', 3), false);
  assert.equal(jsonNestingOver('[[[[]]]]', 3), true);
  assert.equal(jsonNestingOver('{"a":"[[[[[[","b":"\\"[[[[["}', 1), false);
  assert.equal(jsonNestingOver('{"a":{"b":[1]}}', 2), true);
  assert.equal(jsonNestingOver('[' .repeat(100_000), 32), true);
});

test('parseJson refuses nesting beyond the limit with INVALID_JSON before parsing', () => {
  assert.deepEqual(parseJson('{"value":[[1]]}', 'body', 3), { value: [[1]] });
  assert.throws(
    () => parseJson(`{"value":${'['.repeat(32_000)}${']'.repeat(32_000)}}`, 'body', 32),
    (err: ServiceError) => err.code === 'INVALID_JSON' && /nested deeper than 32 levels/.test(err.message),
  );
});

test('valueProblem finds non-finite numbers with their path, and values nested beyond the limit', () => {
  assert.equal(valueProblem({ a: [1, 'x', null, { b: true }] }, 32), undefined);
  const inf = valueProblem(JSON.parse('{"a":[1,1e400]}'), 32)!;
  assert.equal(inf.code, 'PROFILE_MISMATCH');
  assert.match(inf.message, /value\/a\/1 must be a finite number/);
  assert.match(valueProblem(NaN, 32)!.message, /^value must be a finite number/);
  let deep: unknown = 1;
  for (let i = 0; i < 50_000; i++) deep = [deep];
  assert.equal(valueProblem(deep, 32)!.code, 'INVALID_MESSAGE');
});
