import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProfileValidators, normalizeProfile } from '../../src/core/profiles.js';
import { ServiceError } from '../../src/core/errors.js';

const validators = new ProfileValidators();
const check = (profile: unknown, value: unknown) => validators.validatorFor(normalizeProfile(profile))(value);

test('type: each of the six profile types accepts its values and refuses others', () => {
  const cases: Array<[string, unknown[], unknown[]]> = [
    ['string', ['a', ''], [1, true, null]],
    ['boolean', [true, false], ['true', 0]],
    ['integer', [0, -5, 1e6], [1.5, '1']],
    ['number', [1.5, 2], ['1.5', null]],
    ['object', [{}, { a: 1 }], [[], 'x']],
    ['array', [[], [1]], [{}, 'x']],
  ];
  for (const [type, good, bad] of cases) {
    for (const v of good) assert.equal(check({ type }, v).ok, true, `${type} accepts ${JSON.stringify(v)}`);
    for (const v of bad) {
      const r = check({ type }, v);
      assert.equal(r.ok, false, `${type} refuses ${JSON.stringify(v)}`);
      assert.match(r.error!, /\(type\)/);
    }
  }
});

test('enum, minimum, maximum and pattern name their rule', () => {
  assert.match(check({ type: 'string', enum: ['on', 'off'] }, 'dim').error!, /\(enum\)/);
  assert.equal(check({ type: 'string', enum: ['on', 'off'] }, 'on').ok, true);
  assert.match(check({ type: 'number', minimum: 0 }, -1).error!, />= 0 \(minimum\)/);
  assert.match(check({ type: 'number', maximum: 10 }, 11).error!, /<= 10 \(maximum\)/);
  assert.equal(check({ type: 'number', minimum: 0, maximum: 10 }, 10).ok, true);
  assert.match(check({ type: 'string', pattern: '^[A-F0-9]+$' }, 'xyz').error!, /\(pattern\)/);
});

test('properties, required and items validate nested values with their path', () => {
  const geo = { type: 'object', properties: { lat: { type: 'number', minimum: -90, maximum: 90 }, lng: { type: 'number' } }, required: ['lat', 'lng'] };
  assert.equal(check(geo, { lat: 1, lng: 2 }).ok, true);
  assert.match(check(geo, { lat: 1 }).error!, /"lng" \(required\)/);
  assert.match(check(geo, { lat: 91, lng: 0 }).error!, /value\/lat must be <= 90 \(maximum\)/);
  const list = { type: 'array', items: { type: 'integer' } };
  assert.equal(check(list, [1, 2]).ok, true);
  assert.match(check(list, [1, 'x']).error!, /value\/1 .*\(type\)/);
});

test('unit, title, threshold and unknown keywords are kept and not validated', () => {
  const profile = normalizeProfile({ type: 'number', unit: '°C', title: 'T', threshold: 'abc', 'x-vendor': { any: 1 } });
  assert.equal(profile.unit, '°C');
  assert.deepEqual(profile['x-vendor'], { any: 1 });
  assert.equal(validators.validatorFor(profile)(21.5).ok, true);
});

test('profile keys are read case-insensitively (SDKs send Type)', () => {
  assert.equal(normalizeProfile({ Type: 'integer' }).type, 'integer');
});

test('invalid profiles are refused naming the problem', () => {
  const refuse = (p: unknown, pattern: RegExp) =>
    assert.throws(() => normalizeProfile(p), (e: unknown) => e instanceof ServiceError && e.code === 'INVALID_PROFILE' && pattern.test(e.message));
  refuse({}, /profile\.type is required/);
  refuse({ type: 'float' }, /profile\.type must be one of/);
  refuse({ type: 'number', minimum: 'zero' }, /profile\.minimum must be a number/);
  refuse({ type: 'string', pattern: '(' }, /profile\.pattern is not a valid regular expression/);
  refuse({ type: 'object', properties: { a: { type: 'nope' } } }, /profile\.properties\.a\.type/);
  refuse({ type: 'string', enum: [] }, /profile\.enum/);
  refuse('integer', /must be an object/);
});

test('identical profiles share one compiled validator', () => {
  const v = new ProfileValidators();
  const a = v.validatorFor(normalizeProfile({ type: 'integer', minimum: 0 }));
  const b = v.validatorFor(normalizeProfile({ type: 'integer', minimum: 0 }));
  assert.equal(a(-1).ok, false);
  assert.equal(b(5).ok, true);
});

test('patterns run on a linear-time engine: catastrophic patterns answer at once', () => {
  const attack = 'a'.repeat(5000) + '!';
  for (const pattern of ['^(a+)+$', '^(a|aa)+$', '^(a|a?)+$', '^(.*a){20}$', '(x+x+)+y']) {
    const r = check({ type: 'string', pattern }, attack);
    assert.equal(r.ok, false, pattern);
    assert.match(r.error!, /\(pattern\)/);
  }
});

test('two patterns in one profile keep their own meaning (compiled patterns are shared by name)', () => {
  const profile = { type: 'object', properties: { a: { type: 'string', pattern: '^a+$' }, b: { type: 'string', pattern: '^b+$' } } };
  assert.equal(check(profile, { a: 'aa', b: 'bb' }).ok, true);
  assert.match(check(profile, { a: 'aa', b: 'aa' }).error!, /value\/b must match pattern/);
});

test('ECMAScript escapes (\\uXXXX, \\u{…}) keep working on RE2; lookaround and backreferences cannot be compiled', () => {
  assert.equal(check({ type: 'string', pattern: '^\\u0041\\u{1F600}[\\u0030-\\u0039]$' }, 'A😀5').ok, true);
  assert.equal(check({ type: 'string', pattern: '^\\\\u0041$' }, '\\u0041').ok, true, 'an escaped backslash stays a backslash');
  for (const pattern of ['(?=a)', '(a)\\1', '(?<!a)b']) {
    assert.throws(() => validators.assertCompiles(normalizeProfile({ type: 'string', pattern })), (err: ServiceError) => err.code === 'PROFILE_UNSUPPORTED');
    const stored = validators.validatorFor(normalizeProfile({ type: 'string', pattern }))('a');
    assert.equal(stored.ok, false);
    assert.equal(stored.code, 'PROFILE_UNSUPPORTED');
  }
});

test('a property named __proto__ is refused (the validator would skip it); inherited members are not checked', () => {
  const profile = JSON.parse('{"type":"object","properties":{"__proto__":{"type":"number"}}}');
  assert.throws(() => normalizeProfile(profile), (err: ServiceError) => err.code === 'PROFILE_UNSUPPORTED' && /__proto__/.test(err.message));
  assert.equal(check({ type: 'object', properties: { toString: { type: 'number' } } }, {}).ok, true);
  assert.match(check({ type: 'object', required: ['constructor'] }, {}).error!, /"constructor" \(required\)/);
});

test('numbers must be finite', () => {
  for (const v of [Infinity, -Infinity, NaN]) assert.equal(check({ type: 'number' }, v).ok, false);
});

test('enum with objects that have a toString or valueOf member refuses instead of throwing (found by the fuzzer)', () => {
  const profile = { type: 'object', enum: [JSON.parse('{"toString": 1}'), 3] };
  for (const value of [JSON.parse('{"toString": 2}'), JSON.parse('{"valueOf": "x"}')]) {
    const r = check(profile, value);
    assert.equal(r.ok, false);
    assert.match(r.error!, /\(enum\)/);
  }
  // Where the comparison already fails while compiling, the profile is refused when it is set.
  const unusable = normalizeProfile({ type: 'object', enum: [JSON.parse('{"valueOf": 1}'), JSON.parse('{"valueOf": 2}')] });
  assert.throws(() => validators.assertCompiles(unusable), (err: ServiceError) => err.code === 'PROFILE_UNSUPPORTED');
});
