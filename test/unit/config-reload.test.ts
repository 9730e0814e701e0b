import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_CONFIG, type OutpostConfig } from '../../src/core/config.js';
import { ConfigReloader, changedKeys } from '../../src/ops/reload.js';

const edit = (change: (c: OutpostConfig) => void): OutpostConfig => {
  const c = structuredClone(DEFAULT_CONFIG);
  change(c);
  return c;
};

test('changedKeys lists leaf keys that differ, sorted', () => {
  assert.deepEqual(changedKeys(DEFAULT_CONFIG, DEFAULT_CONFIG), []);
  const next = edit((c) => {
    c.mqtt.tls.port = 9999;
    c.log.level = 'debug';
  });
  assert.deepEqual(changedKeys(DEFAULT_CONFIG, next), ['log.level', 'mqtt.tls.port']);
});

test('the most specific applier takes a key; keys nobody applies need a restart; a failed applier keeps the old value', async () => {
  const reloader = new ConfigReloader(DEFAULT_CONFIG);
  const calls: Array<[string, string[]]> = [];
  reloader.register('http', (_n, keys) => void calls.push(['http', keys]));
  reloader.register('http.bodyLimit', (_n, keys) => void calls.push(['http.bodyLimit', keys]));
  reloader.register('codec', () => {
    throw new Error('sandbox busy');
  });
  const next = edit((c) => {
    c.http.bodyLimit = 10;
    c.http.port = 1;
    c.store.pruneIntervalSeconds = 5;
    c.codec.js.timeoutMs = 5;
  });
  const outcome = await reloader.reload(next);
  assert.deepEqual(calls, [['http.bodyLimit', ['http.bodyLimit']], ['http', ['http.port']]]);
  assert.deepEqual(outcome.applied, ['http.bodyLimit', 'http.port']);
  assert.deepEqual(outcome.needsRestart, ['store.pruneIntervalSeconds']);
  assert.deepEqual(outcome.failed, [{ key: 'codec.js.timeoutMs', error: 'sandbox busy' }]);

  // The same file again: applied keys are current now; the others are still reported.
  calls.length = 0;
  const again = await reloader.reload(next);
  assert.deepEqual(again.applied, []);
  assert.deepEqual(again.needsRestart, ['store.pruneIntervalSeconds']);
  assert.deepEqual(again.failed.map((f) => f.key), ['codec.js.timeoutMs']);
  assert.deepEqual(calls, []);
});
