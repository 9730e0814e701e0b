// What one device, or one gateway token, can do to sync (docs/security.md, "Sync limits"): a device
// with three 60 KB asset descriptions, a state larger than the upstream takes, and a state that
// makes the central close the link must not stop other devices' states; one gateway cannot create
// more than central.devicesPerGateway devices at the central.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import mqtt from 'mqtt';
import { api, cliJson } from '../helpers/daemon.js';
import { startFleet } from '../helpers/fleet-rig.js';
import { until } from '../helpers/wait.js';

test('sync limits between a gateway and its central', { timeout: 180_000 }, async (t) => {
  const fleet = await startFleet({ centralConfig: { central: { devicesPerGateway: 5 } } });
  t.after(() => fleet.close());
  const { central, app } = fleet;
  // The gateway takes large bodies itself; it believes the central takes 140 000-byte messages,
  // where the central's packet limit is its payloadLimit (64 KiB) + 65 539: 135 000 bytes close the link there.
  const g1 = fleet.addGateway('north', {
    http: { bodyLimit: 400_000 },
    limits: { rate: 0 },
    upstream: { reconnectMinMs: 100, reconnectMaxMs: 500, statusIntervalSeconds: 1, maxMessageBytes: 140_000 },
  });
  const g2 = fleet.addGateway('south');

  await t.test('three 60 KB descriptions, a state over maxMessageBytes and one the central closes the link on: the other devices still sync', async () => {
    const gateway = await fleet.startGateway(g1);
    const gwDir = g1.dir;
    const gwConfig = g1.configFile!;
    const noisy = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'noisy'], gwDir);
    const quiet = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'quiet'], gwDir);
    cliJson(['asset', 'create', quiet.id, '--name', 't', '--is', 'sensor', '--profile', '{"type":"number"}'], gwDir);
    // The device's own token writes its assets' descriptions.
    for (const name of ['a', 'b', 'c']) {
      const r = await api(gateway.url, 'PUT', `/device/${noisy.id}/asset/${name}`, {
        token: noisy.token,
        json: { is: 'sensor', profile: { type: 'string' }, description: name.repeat(60_000) },
      });
      assert.ok(r.status === 201 || r.status === 200, r.text);
    }
    const big = (n: number) => api(gateway.url, 'PUT', `/device/${noisy.id}/asset/a/state`, { token: noisy.token, json: { value: 'x'.repeat(n) } });
    assert.equal((await big(150_000)).status, 200, 'over maxMessageBytes: set aside before it is sent');
    assert.equal((await big(135_000)).status, 200, 'under maxMessageBytes, over what the central takes: the link closes on it');
    assert.equal((await api(gateway.url, 'PUT', `/device/${noisy.id}/asset/b/state`, { token: noisy.token, json: { value: 'small' } })).status, 200);
    for (let i = 0; i < 20; i++) {
      assert.equal((await api(gateway.url, 'PUT', `/device/${quiet.id}/asset/t/state`, { token: quiet.token, json: { value: i } })).status, 200);
    }
    await until(
      "the quiet device's states at the central",
      async () => {
        const r = await api(central.url, 'GET', `/device/${quiet.id}/asset/t/state`, { token: app });
        return r.status === 200 && r.body.state.value === 19;
      },
      60_000,
    );
    const status = async () => (await api(gateway.url, 'GET', '/healthz')).body.upstream as { depth: number; setAside: number; link: string };
    await until('the outbox drained', async () => (await status()).depth === 0, 60_000);
    const up = await status();
    assert.equal(up.setAside, 2, 'the two rows the central cannot take are set aside and counted');
    const metrics = (await api(gateway.url, 'GET', '/metrics')).text;
    assert.match(metrics, /^outpost_outbox_set_aside_total 2$/m);
    // The noisy device reached the central with its descriptions cut, and its small state too.
    const view = await api(central.url, 'GET', `/device/${noisy.id}`, { token: app });
    assert.equal(view.status, 200, view.text);
    const a = view.body.assets.find((x: { name: string }) => x.name === 'a');
    assert.ok(a.description.length <= 1024 && a.description.endsWith('…'), `description cut (${a.description.length})`);
    const small = await api(central.url, 'GET', `/device/${noisy.id}/asset/b/state`, { token: app });
    assert.equal(small.body.state.value, 'small');
    const cliStatus = cliJson<{ setAside: number }>(['outbox', 'status', '--config', gwConfig], gwDir);
    await until('the counter persisted', () => cliJson<{ setAside: number }>(['outbox', 'status', '--config', gwConfig], gwDir).setAside === 2, 5000);
    assert.ok(cliStatus.setAside >= 0);
  });

  await t.test('central.devicesPerGateway: the device beyond the limit is refused on gateway/<id>/errors', async () => {
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${central.mqttPort}`, { username: g2.token, reconnectPeriod: 0 });
    const errors: Array<{ code: string; error: string; topic: string }> = [];
    client.on('message', (_t, p) => errors.push(JSON.parse(p.toString())));
    await client.subscribeAsync(`gateway/${g2.id}/errors`, { qos: 1 });
    const ids = Array.from({ length: 7 }, (_, i) => `limitdevice${String(i).padStart(13, '0')}`);
    for (const id of ids) await client.publishAsync(`gateway/${g2.id}/device/${id}`, JSON.stringify({ id, name: id, assets: [] }), { qos: 1 });
    await until('two refusals', () => errors.length >= 2, 10_000);
    assert.deepEqual(
      errors.map((e) => e.code),
      ['GATEWAY_DEVICE_LIMIT', 'GATEWAY_DEVICE_LIMIT'],
    );
    assert.match(errors[0]!.error, /central\.devicesPerGateway/);
    assert.equal(errors[0]!.topic, `gateway/${g2.id}/device/${ids[5]}`);
    const gw = await api(central.url, 'GET', `/gateway/${g2.id}`, { token: app });
    assert.deepEqual([...gw.body.devices].sort(), ids.slice(0, 5).sort());
    // A device it already has still updates.
    await client.publishAsync(`gateway/${g2.id}/device/${ids[0]}`, JSON.stringify({ id: ids[0], name: 'renamed', assets: [] }), { qos: 1 });
    await until('renamed', async () => (await api(central.url, 'GET', `/device/${ids[0]}`, { token: app })).body.name === 'renamed');
    assert.equal(errors.length, 2);
    // An event for a device the central does not know behind it is dropped; the connection stays.
    const closed = new Promise<boolean>((resolve) => {
      client.once('close', () => resolve(true));
      setTimeout(() => resolve(false), 1000);
    });
    client.publish('device/NotBehindThisGatewayXXXX/events', JSON.stringify({ type: 'uplink', at: new Date().toISOString() }), { qos: 0 });
    await client.publishAsync(`gateway/${g2.id}/device/${ids[1]}`, JSON.stringify({ id: ids[1], name: 'still-here', assets: [] }), { qos: 1 });
    assert.equal(await closed, false, 'connection kept');
    await client.endAsync();
    // Managed devices count too: creating or assigning one more is refused.
    const created = await api(central.url, 'POST', '/devices', { token: app, json: { name: 'one-more', gateway: g2.id } });
    assert.equal(created.status, 400, created.text);
    assert.equal(created.body.code, 'GATEWAY_DEVICE_LIMIT');
    const free = await api(central.url, 'POST', '/devices', { token: app, json: { name: 'free' } });
    assert.equal(free.status, 201);
    const assigned = await api(central.url, 'PUT', `/device/${free.body.id}/gateway`, { token: app, json: { gateway: g2.id } });
    assert.equal(assigned.status, 400, assigned.text);
    assert.equal(assigned.body.code, 'GATEWAY_DEVICE_LIMIT');
  });
});
