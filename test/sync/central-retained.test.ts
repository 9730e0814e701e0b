// What the central keeps for readers who subscribe later (docs/sync.md, "Gateway status"): the
// retained status of a gateway that connected before the reader subscribed, and the gateway's last
// will when it disappears without a clean stop (it must not be taken for a protocol violation).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import mqtt from 'mqtt';
import { api, cliJson } from '../helpers/daemon.js';
import { startFleet } from '../helpers/fleet-rig.js';
import { sleep, until } from '../helpers/wait.js';

test('retained gateway status and the last will at the central', { timeout: 120_000 }, async (t) => {
  const fleet = await startFleet();
  t.after(() => fleet.close());
  const { central, centralDir } = fleet;
  const app = cliJson<{ token: string }>(['token', 'create', '--name', 'reader', '--scopes', 'read'], centralDir).token;
  // No config: the default status refresh (60 s), so only the status published on connect can be seen within the test.
  const g = fleet.addGateway('north');
  await fleet.startGateway(g);
  await until('the gateway connected', () => central.logs.some((l) => l.includes('"gateway connected"')));
  await sleep(500);

  const reader = await mqtt.connectAsync(`mqtt://127.0.0.1:${central.mqttPort}`, { username: app, reconnectPeriod: 0 });
  const statuses: Array<{ retain: boolean; body: Record<string, unknown> }> = [];
  reader.on('message', (_topic, payload, packet) => statuses.push({ retain: packet.retain, body: JSON.parse(payload.toString()) }));
  await reader.subscribeAsync('gateway/+/status', { qos: 1 });
  await until('the retained status of a gateway that connected earlier', () => statuses.length > 0, 5000);
  assert.equal(statuses[0]!.retain, true);
  assert.equal(statuses[0]!.body.online, true);

  await t.test('kill -9 of the gateway: its last will reaches readers as {"online": false}', async () => {
    await fleet.stopGateway(g, 'SIGKILL');
    await until('the will', () => statuses.some((s) => s.body.online === false), 10_000);
    assert.ok(!central.logs.some((l) => l.includes('packet id 0')), 'the will is not a protocol violation');
    // And it is what a later reader gets.
    const late = await mqtt.connectAsync(`mqtt://127.0.0.1:${central.mqttPort}`, { username: app, reconnectPeriod: 0 });
    const got = new Promise<Record<string, unknown>>((resolve) => late.once('message', (_t, p) => resolve(JSON.parse(p.toString()))));
    await late.subscribeAsync(`gateway/${g.id}/status`, { qos: 1 });
    assert.deepEqual(await got, { online: false });
    await late.endAsync();
  });

  await t.test('a clean stop publishes offline and logs no protocol violation at the central', async () => {
    await fleet.startGateway(g);
    await until('online again', () => statuses.filter((s) => s.body.online === true).length >= 2, 10_000);
    await fleet.stopGateway(g);
    await until('offline', () => statuses.at(-1)!.body.online === false, 10_000);
    await sleep(500);
    assert.ok(!central.logs.some((l) => l.includes('protocol violation')), central.logs.filter((l) => l.includes('violation')).join('\n'));
  });
  await reader.endAsync();

  await t.test('a deleted gateway leaves no retained status behind', async () => {
    const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'admin', '--scopes', 'admin'], centralDir).token;
    assert.equal((await api(central.url, 'DELETE', `/gateway/${g.id}`, { token: admin })).status, 204);
    const late = await mqtt.connectAsync(`mqtt://127.0.0.1:${central.mqttPort}`, { username: app, reconnectPeriod: 0 });
    const got: string[] = [];
    late.on('message', (topic) => got.push(topic));
    await late.subscribeAsync('gateway/+/status', { qos: 1 });
    await sleep(500);
    assert.deepEqual(got, []);
    await late.endAsync();
  });
});
