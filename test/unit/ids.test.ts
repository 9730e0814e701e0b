import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ID_PATTERN, assetNameProblem, hashToken, newId, newTokenSecret, randomBase62, tokenKindOf } from '../../src/core/ids.js';

test('ids are 24 base62 characters and distinct', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const id = newId();
    assert.match(id, ID_PATTERN);
    seen.add(id);
  }
  assert.equal(seen.size, 2000);
});

test('base62 output uses the whole alphabet without bias towards early characters', () => {
  const counts = new Map<string, number>();
  for (const ch of randomBase62(62_000)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  assert.equal(counts.size, 62);
  // Each character is expected 1000 times; a modulo bias would push the first 8 to ~1250.
  for (const [ch, n] of counts) assert.ok(n > 800 && n < 1200, `${ch} appeared ${n} times`);
});

test('token secrets carry their kind prefix and at least 32 random characters', () => {
  for (const kind of ['device', 'app', 'gateway'] as const) {
    const secret = newTokenSecret(kind);
    assert.match(secret, new RegExp(`^${kind}:[A-Za-z0-9]{32,}$`));
    assert.equal(tokenKindOf(secret), kind);
  }
  assert.equal(tokenKindOf('device:short'), undefined);
  assert.equal(tokenKindOf('root:' + 'a'.repeat(40)), undefined);
  assert.equal(tokenKindOf('no-prefix'), undefined);
});

test('token hashes are stable, differ per token and do not contain the secret', () => {
  const a = newTokenSecret('device');
  const b = newTokenSecret('device');
  assert.equal(hashToken(a), hashToken(a));
  assert.notEqual(hashToken(a), hashToken(b));
  assert.ok(!hashToken(a).includes(a.slice(7)));
});

test('asset names follow the rules of docs/api.md', () => {
  assert.equal(assetNameProblem('temperature'), undefined);
  assert.equal(assetNameProblem('9'), undefined, 'all digits is allowed');
  assert.equal(assetNameProblem('x'.repeat(64)), undefined);
  for (const bad of ['', 'x'.repeat(65), 'a/b', 'a+b', 'a#b', 'a$b', 'a b', 'a\tb', 'a\0b', 42, null]) {
    assert.notEqual(assetNameProblem(bad), undefined, `${JSON.stringify(bad)} must be refused`);
  }
});

test('asset names must be valid Unicode: lone surrogates are refused, pairs are characters', () => {
  for (const name of ['\ud800', 'a\udc00', 'x\ud83d', '\ude00y']) assert.match(assetNameProblem(name)!, /valid Unicode/, JSON.stringify(name));
  assert.equal(assetNameProblem('smile😀'), undefined);
  assert.equal(assetNameProblem('température'), undefined);
});
