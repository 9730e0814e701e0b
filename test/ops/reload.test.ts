// SIGHUP re-reads the config file: log level and limits change at once, connections stay up, and
// one log line says what changed and what needs a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { api, cliJson, provision, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient } from '../mqtt/helpers.js';

async function waitForLog(daemon: RunningDaemon, pred: (entry: Record<string, any>) => boolean, after: number, what: string) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const found = daemon.logs.slice(after).map((l) => JSON.parse(l) as Record<string, any>).find(pred);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${what} log line; logs:\n${daemon.logs.slice(after).join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('SIGHUP changes the log level and a limit without dropping a connected MQTT client', async () => {
  const dir = tempDataDir();
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, '// reload test\n{ "version": 1, "log": { "level": "info" }, "http": { "bodyLimit": 65536 } }\n');
  // No OUTPOST_LOG_LEVEL: the environment would win over the file.
  const daemon = await startDaemon({ dataDir: join(dir, 'data'), args: ['--config', configFile], env: { OUTPOST_LOG_LEVEL: undefined } });
  try {
    const { device } = provision(daemon.dataDir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const first = await connectClient(daemon.mqttPort, device.token);
    let dropped = false;
    first.client.on('close', () => (dropped = true));
    const big = { value: 1, padding: 'x'.repeat(2000) };
    const before = await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: big });
    assert.notEqual(before.status, 413, 'a 2 kB body is within the 64 KiB limit');
    assert.ok(!daemon.logs.some((l) => l.includes('mqtt session opened')), 'debug lines are not logged at level info');

    writeFileSync(configFile, '{ "version": 1, "log": { "level": "debug" }, "http": { "bodyLimit": 1000 }, "store": { "pruneIntervalSeconds": 30 }, }\n');
    const mark = daemon.logs.length;
    daemon.proc.kill('SIGHUP');
    const line = await waitForLog(daemon, (e) => e.msg === 'config reloaded', mark, '"config reloaded"');
    assert.deepEqual(line.changed, ['http.bodyLimit', 'log.level']);
    assert.deepEqual(line.needsRestart, ['store.pruneIntervalSeconds'], 'keys that need a restart are named');

    const after = await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: big });
    assert.equal(after.status, 413, 'the new body limit applies at once');
    const second = await connectClient(daemon.mqttPort, device.token, { clientId: 'second-client' });
    await waitForLog(daemon, (e) => e.msg === 'mqtt session opened', mark, 'debug "mqtt session opened"');
    await second.end();

    // The first client lived through the reload: it still publishes and gets its PUBACK.
    await first.client.publishAsync(`device/${device.id}/asset/level/state`, JSON.stringify({ value: 7 }), { qos: 1 });
    const state = await api(daemon.url, 'GET', `/device/${device.id}/asset/level/state`, { token: device.token });
    assert.equal(state.body.state?.value ?? state.body.value, 7);
    assert.equal(dropped, false, 'the MQTT connection was not dropped');

    // A bad edit is refused with the key named; the daemon keeps its running configuration.
    writeFileSync(configFile, '{ "version": 1, "http": { "bodyLimit": -5 } }\n');
    const mark2 = daemon.logs.length;
    daemon.proc.kill('SIGHUP');
    const refused = await waitForLog(daemon, (e) => e.msg?.startsWith('config reload refused'), mark2, '"config reload refused"');
    assert.match(refused.error, /http\.bodyLimit/);
    assert.equal((await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: big })).status, 413, 'still the last good limit');
    assert.equal((await api(daemon.url, 'GET', '/healthz')).status, 200);
    await first.end();
    assert.equal(await daemon.stop(), 0);
  } finally {
    await daemon.stop();
    removeDir(dir);
  }
});

test('SIGHUP points upstream sync at a new URL: the outbox drains there, status shows the link', async () => {
  const dir = tempDataDir();
  const gatewayDir = join(dir, 'gateway');
  // The upstream: another Outpost, used as a third-party upstream with one device token.
  const central = await startDaemon({ dataDir: join(dir, 'central') });
  const closed = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
  let gateway: RunningDaemon | undefined;
  try {
    const remote = provision(central.dataDir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const local = provision(gatewayDir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const configFile = join(dir, 'gateway.json');
    const upstream = (url: string) => JSON.stringify({ version: 1, upstream: { url, reconnectMinMs: 200, reconnectMaxMs: 500, devices: { [local.device.id]: { id: remote.device.id, token: remote.device.token } } } });
    writeFileSync(configFile, upstream(`mqtt://127.0.0.1:${closed}`));
    gateway = await startDaemon({ dataDir: gatewayDir, args: ['--config', configFile] });
    assert.equal((await api(gateway.url, 'PUT', `/device/${local.device.id}/asset/level/state`, { token: local.device.token, json: { value: 42 } })).status, 200);
    const down = cliJson<{ upstream: { link: string; depth: number } }>(['status'], gatewayDir);
    assert.equal(down.upstream.link, 'down');
    assert.ok(down.upstream.depth >= 1, 'the state waits in the outbox');

    writeFileSync(configFile, upstream(`mqtt://127.0.0.1:${central.mqttPort}`));
    const mark = gateway.logs.length;
    gateway.proc.kill('SIGHUP');
    const line = await waitForLog(gateway, (e) => e.msg === 'config reloaded', mark, '"config reloaded"');
    assert.deepEqual(line.changed, ['upstream.url']);
    assert.deepEqual(line.needsRestart, []);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const got = await api(central.url, 'GET', `/device/${remote.device.id}/asset/level/state`, { token: remote.app.token });
      if ((got.body?.state?.value ?? got.body?.value) === 42) break;
      if (Date.now() > deadline) throw new Error(`the state did not reach the new upstream: ${got.text}\n${gateway.logs.slice(mark).join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const up = cliJson<{ upstream: { link: string } }>(['status'], gatewayDir);
    assert.equal(up.upstream.link, 'up');
    assert.equal(await gateway.stop(), 0);
  } finally {
    await gateway?.stop();
    await central.stop();
    removeDir(dir);
  }
});
