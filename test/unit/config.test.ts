import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, DEFAULT_CONFIG, loadConfig } from '../../src/core/config.js';

const dir = mkdtempSync(join(tmpdir(), 'outpost-config-'));
const file = (content: unknown) => {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
};
const refused = (fn: () => unknown, pattern: RegExp) => assert.throws(fn, (e: unknown) => e instanceof ConfigError && pattern.test(e.message));

test('no file and no environment gives the embedded defaults', () => {
  const c = loadConfig({ env: {} });
  assert.equal(c.http.port, DEFAULT_CONFIG.http.port);
  assert.equal(c.mqtt.port, 1883);
  assert.equal(c.limits.rate, 1000);
  assert.ok(c.dataDir.endsWith('data'));
});

test('a file overrides defaults key by key, the environment overrides the file', () => {
  const path = file({ version: 1, http: { port: 9000 }, limits: { burst: 10 } });
  const c = loadConfig({ file: path, env: { OUTPOST_MQTT_PORT: '2883', OUTPOST_RATE_LIMIT: '0', OUTPOST_LOG_LEVEL: 'warn' } });
  assert.equal(c.http.port, 9000);
  assert.equal(c.http.bodyLimit, 65536, 'sibling keys keep their defaults');
  assert.equal(c.limits.burst, 10);
  assert.equal(c.mqtt.port, 2883);
  assert.equal(c.limits.rate, 0);
  assert.equal(c.log.level, 'warn');
  assert.equal(loadConfig({ file: path, env: { OUTPOST_HTTP_PORT: '9100' } }).http.port, 9100);
  assert.equal(loadConfig({ env: { OUTPOST_CONFIG: path } }).http.port, 9000, 'OUTPOST_CONFIG names the file');
});

test('invalid values name the key and the rule', () => {
  refused(() => loadConfig({ file: file({ http: { port: 70000 } }), env: {} }), /http\.port.*<= 65535.*maximum/);
  refused(() => loadConfig({ file: file({ http: { port: 'x' } }), env: {} }), /http\.port.*integer/);
  refused(() => loadConfig({ file: file({ role: 'edge' }), env: {} }), /role.*"gateway", "central".*enum/);
  refused(() => loadConfig({ file: file({ htp: {} }), env: {} }), /unknown key "htp"/);
  refused(() => loadConfig({ file: file({ version: 2 }), env: {} }), /version/);
  refused(() => loadConfig({ file: file('{ not json'), env: {} }), /not valid JSON/);
  refused(() => loadConfig({ file: join(dir, 'missing.json'), env: {} }), /cannot be read/);
  refused(() => loadConfig({ env: { OUTPOST_HTTP_PORT: 'eighty' } }), /OUTPOST_HTTP_PORT: must be an integer/);
  refused(() => loadConfig({ env: { OUTPOST_RATE_LIMIT: '-1' } }), /limits\.rate.*minimum/);
  refused(() => loadConfig({ env: { OUTPOST_ROLE: 'cloud' } }), /role/);
});

test('upstream: environment overrides, and the rules across its keys', () => {
  const id = 'A'.repeat(24);
  const c = loadConfig({ env: { OUTPOST_UPSTREAM_URL: 'mqtt://central:1883', OUTPOST_UPSTREAM_GATEWAY_ID: id, OUTPOST_UPSTREAM_TOKEN: `gateway:${'x'.repeat(40)}` } });
  assert.equal(c.upstream.url, 'mqtt://central:1883');
  assert.equal(c.upstream.gatewayId, id);
  assert.equal(c.upstream.window, 64);
  assert.equal(c.upstream.whenFull, 'drop-oldest');
  refused(() => loadConfig({ env: { OUTPOST_UPSTREAM_URL: 'mqtt://central:1883' } }), /upstream.*"gatewayId" and "token".*"devices"/);
  refused(() => loadConfig({ env: { OUTPOST_UPSTREAM_URL: 'mqtt://c', OUTPOST_UPSTREAM_GATEWAY_ID: id, OUTPOST_UPSTREAM_TOKEN: `device:${'x'.repeat(40)}` } }), /upstream\.token.*gateway token/);
  refused(() => loadConfig({ env: { OUTPOST_UPSTREAM_URL: 'http://c' } }), /upstream\.url.*pattern/);
  refused(() => loadConfig({ file: file({ upstream: { whenFull: 'block' } }), env: {} }), /upstream\.whenFull.*"drop-oldest", "reject-new"/);
  refused(() => loadConfig({ file: file({ upstream: { url: 'mqtt://c', devices: { d1: { id: 'x' } } } }), env: {} }), /upstream\.devices\.d1.*token/);
  const third = loadConfig({ file: file({ upstream: { url: 'mqtts://c:8883', devices: { d1: { id: 'r1', token: 't' } } } }), env: {} });
  assert.deepEqual(third.upstream.devices, { d1: { id: 'r1', token: 't' } });
});
