// upstream.url as a list of central URLs tried in turn (docs/sync.md): config validation, and a
// gateway whose first central URL is dead reaching the second with every state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, upstreamUrls } from '../../src/core/config.js';
import { api, cliJson, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { freePort } from '../helpers/mosquitto.js';

const dir = mkdtempSync(join(tmpdir(), 'outpost-urls-'));
const file = (content: unknown) => {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
};
const gatewayKeys = { gatewayId: 'G0123456789abcdefghijklm', token: 'gateway:abc' };

test('upstream.url takes one URL, a list, or a comma-separated list; a bad entry is named', () => {
  assert.deepEqual(upstreamUrls(loadConfig({ file: file({ version: 1, upstream: { url: 'mqtt://a:1883', ...gatewayKeys } }), env: {} }).upstream.url), ['mqtt://a:1883']);
  const list = loadConfig({ file: file({ version: 1, upstream: { url: ['mqtt://a:1883', 'mqtts://b:8883'], ...gatewayKeys } }), env: {} });
  assert.deepEqual(upstreamUrls(list.upstream.url), ['mqtt://a:1883', 'mqtts://b:8883']);
  const env = loadConfig({ env: { OUTPOST_UPSTREAM_URL: 'mqtt://a:1883, mqtt://b:1883', OUTPOST_UPSTREAM_GATEWAY_ID: 'G0123456789abcdefghijklm', OUTPOST_UPSTREAM_TOKEN: 'gateway:abc' } });
  assert.deepEqual(upstreamUrls(env.upstream.url), ['mqtt://a:1883', 'mqtt://b:1883']);
  assert.throws(
    () => loadConfig({ file: file({ version: 1, upstream: { url: ['mqtt://a:1883', 'http://b'], ...gatewayKeys } }), env: {} }),
    (e: unknown) => e instanceof ConfigError && /upstream\.url/.test(e.message),
  );
  assert.throws(
    () => loadConfig({ env: { OUTPOST_UPSTREAM_URL: 'mqtt://a:1883,ftp://b', OUTPOST_UPSTREAM_GATEWAY_ID: 'G0123456789abcdefghijklm', OUTPOST_UPSTREAM_TOKEN: 'gateway:abc' } }),
    (e: unknown) => e instanceof ConfigError && /upstream\.url: URL 2 \("ftp:\/\/b"\)/.test(e.message),
  );
  assert.throws(() => loadConfig({ file: file({ version: 1, upstream: { url: [], ...gatewayKeys } }), env: {} }), (e: unknown) => e instanceof ConfigError && /upstream\.url/.test(e.message));
});

test('a gateway whose first central URL is dead syncs through the second', { timeout: 60_000 }, async (t) => {
  const centralDir = tempDataDir();
  const gwDir = tempDataDir();
  const central = await startDaemon({ dataDir: centralDir, env: { OUTPOST_ROLE: 'central' } });
  const dead = await freePort();
  const gw = cliJson<{ id: string; token: string }>(['gateway', 'create', '--name', 'north'], centralDir);
  const app = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read'], centralDir).token;
  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'pump'], gwDir);
  cliJson(['asset', 'create', device.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], gwDir);
  const config = file({
    version: 1,
    upstream: { url: [`mqtt://127.0.0.1:${dead}`, `mqtt://127.0.0.1:${central.mqttPort}`], gatewayId: gw.id, token: gw.token, reconnectMinMs: 100, reconnectMaxMs: 500 },
  });
  const gateway = await startDaemon({ dataDir: gwDir, args: ['--config', config] });
  t.after(async () => {
    await gateway.stop();
    await central.stop();
    removeDir(centralDir);
    removeDir(gwDir);
  });
  for (let i = 0; i < 5; i++) assert.equal((await api(gateway.url, 'PUT', `/device/${device.id}/asset/n/state`, { token: device.token, json: { value: i } })).status, 200);
  const deadline = Date.now() + 20_000;
  let history: number[] = [];
  while (Date.now() < deadline) {
    const r = await api(central.url, 'GET', `/device/${device.id}/asset/n/states`, { token: app });
    history = r.status === 200 ? r.body.data.map((s: { value: number }) => s.value) : [];
    if (history.length === 5) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(history.sort(), [0, 1, 2, 3, 4]);
  assert.equal((await api(gateway.url, 'GET', '/healthz')).body.upstream.link, 'up');
});
