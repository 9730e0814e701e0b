// SIGHUP re-reads the config file: log level and limits change at once, connections stay up, and
// one log line says what changed and what needs a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, provision, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
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
