// Managing a fleet from the central (docs/sync.md): a real central and two real gateway daemons.
// Managed devices created, changed and deleted at the central reach their gateway, also one that
// was offline while the central restarted too; the central's device token works at the gateway over
// HTTP and MQTT; local edits get 409; unassigning removes the device; a device command goes down as
// one message (one LoRa frame for an ABP device); device events come up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { queryStore } from '../helpers/sqlite.js';
import mqtt from 'mqtt';
import { api, cli, cliJson } from '../helpers/daemon.js';
import { startFleet, type FleetGateway as Gateway } from '../helpers/fleet-rig.js';
import { ForwarderSimulator } from '../lpwan/forwarder.js';
import { readDownlink, uplinkFrame } from '../lpwan/frames.js';
import { sleep, until } from '../helpers/wait.js';


test('a fleet managed from the central', { timeout: 300_000 }, async (t) => {
  const fleet = await startFleet();
  t.after(() => fleet.close());
  const { centralDir, centralMqttPort, app } = fleet;
  const gatewayConfig = { limits: { rate: 0 }, upstream: { reconnectMinMs: 100, reconnectMaxMs: 500, statusIntervalSeconds: 1 } };
  const north = fleet.addGateway('north', gatewayConfig);
  const south = fleet.addGateway('south', gatewayConfig);
  const startGateway = (g: Gateway) => fleet.startGateway(g);
  const atCentral = (method: string, path: string, json?: unknown) => api(fleet.central.url, method, path, { token: app, json });
  const gatewayView = async (g: Gateway) => (await atCentral('GET', `/gateway/${g.id}`)).body as { connected: boolean; config: { managed: number; pending: number; lastAppliedAt: string | null } };
  const localDevice = (g: Gateway, id: string) => queryStore<{ id: string; name: string }>(g.dir, 'SELECT id, name FROM devices WHERE id = ?', id)[0];
  const localAssets = (g: Gateway, id: string) => queryStore<{ name: string }>(g.dir, 'SELECT name FROM assets WHERE device_id = ? ORDER BY name', id).map((a) => a.name);
  const createManaged = async (g: Gateway, name: string) => {
    const r = await atCentral('POST', '/devices', { name, gateway: g.id });
    assert.equal(r.status, 201, r.text);
    for (const [asset, is, type] of [['t', 'sensor', 'number'], ['valve', 'actuator', 'boolean'], ['level', 'actuator', 'integer']] as const) {
      const a = await atCentral('PUT', `/device/${r.body.id}/asset/${asset}`, { is, profile: { type } });
      assert.ok(a.status === 201 || a.status === 200, a.text);
    }
    return r.body as { id: string; token: string };
  };

  await startGateway(north);
  await startGateway(south);
  await fleet.untilConnected(north, south);

  const pump = await createManaged(north, 'pump');

  await t.test('a device created at the central reaches its gateway with the same ID, assets and token', async () => {
    await until('the device at the gateway', () => localAssets(north, pump.id).length === 3);
    assert.equal(localDevice(north, pump.id)!.name, 'pump');
    assert.deepEqual(localAssets(north, pump.id), ['level', 't', 'valve']);
    assert.equal(localDevice(south, pump.id), undefined, 'not at the other gateway');
    await until('applied', async () => (await gatewayView(north)).config.pending === 0);
    const view = await gatewayView(north);
    assert.equal(view.config.managed, 1);
    assert.ok(view.config.lastAppliedAt);
    // The token issued at the central works at the gateway, over HTTP and over MQTT.
    const put = await api(north.daemon!.url, 'PUT', `/device/${pump.id}/asset/t/state`, { token: pump.token, json: { value: 21.5 } });
    assert.equal(put.status, 200, put.text);
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${north.daemon!.mqttPort}`, { username: pump.token, reconnectPeriod: 0 });
    await client.publishAsync(`device/${pump.id}/asset/t/state`, JSON.stringify({ value: 22.5 }), { qos: 1 });
    await client.endAsync();
    // Its states flow up as any device's.
    await until('the states at the central', async () => (await atCentral('GET', `/device/${pump.id}/asset/t/state`)).body?.state?.value === 22.5);
    // Definitions (LoRaWAN keys included) reach only their own gateway's session.
    const granted = async (token: string, filter: string) => {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${centralMqttPort}`, { username: token, reconnectPeriod: 0 });
      const qos = await c.subscribeAsync(filter, { qos: 1 }).then(
        (g) => g[0]!.qos,
        (err: { packet?: { granted?: number[] } }) => err.packet?.granted?.[0],
      );
      await c.endAsync();
      return qos;
    };
    assert.equal(await granted(app, 'gateway/+/config/device/+'), 128);
    assert.equal(await granted(app, `gateway/${north.id}/config/#`), 128);
    assert.equal(await granted(south.token, `gateway/${north.id}/config/device/+`), 128);
    assert.equal(await granted(pump.token, `gateway/${north.id}/config/device/${pump.id}`), 128);
  });

  await t.test('local edits of a managed device get 409 MANAGED_BY_CENTRAL; the central changes it', async () => {
    const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'local', '--scopes', 'admin'], north.dir).token;
    const at = (method: string, path: string, json?: unknown) => api(north.daemon!.url, method, path, { token: admin, json });
    for (const [method, path, body] of [
      ['PUT', `/device/${pump.id}`, { name: 'renamed' }],
      ['DELETE', `/device/${pump.id}`, undefined],
      ['PUT', `/device/${pump.id}/asset/extra`, { is: 'sensor', profile: { type: 'number' } }],
      ['DELETE', `/device/${pump.id}/asset/t`, undefined],
      ['PUT', `/device/${pump.id}/codec`, { uplink: { format: 'cbor' } }],
    ] as const) {
      const r = await at(method, path, body);
      assert.equal(r.status, 409, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.code, 'MANAGED_BY_CENTRAL');
    }
    const byCli = cli(['device', 'delete', pump.id, '--data', north.dir]);
    assert.notEqual(byCli.code, 0);
    assert.match(byCli.stderr, /MANAGED_BY_CENTRAL/);
    // At the central: a change goes down, an asset removed there goes at the gateway too.
    assert.equal((await atCentral('PUT', `/device/${pump.id}`, { name: 'pump-2' })).status, 200);
    assert.equal((await atCentral('DELETE', `/device/${pump.id}/asset/level`)).status, 204);
    await until('the change at the gateway', () => localDevice(north, pump.id)?.name === 'pump-2' && localAssets(north, pump.id).length === 2);
  });

  await t.test('a device command at the central reaches the gateway as one message, delivered once', async () => {
    const local = await mqtt.connectAsync(`mqtt://127.0.0.1:${north.daemon!.mqttPort}`, { username: pump.token, reconnectPeriod: 0 });
    const got: Array<{ topic: string; body: Record<string, unknown> }> = [];
    local.on('message', (topic, p) => got.push({ topic, body: JSON.parse(p.toString()) }));
    await local.subscribeAsync(`device/${pump.id}/asset/+/command`, { qos: 1 });
    await atCentral('PUT', `/device/${pump.id}/asset/level`, { is: 'actuator', profile: { type: 'integer' } });
    await until('the asset back at the gateway', () => localAssets(north, pump.id).length === 3);
    // The device command message is for the gateway: an application's or the device's own wildcard at the central does not get it.
    const watchers = await Promise.all([app, pump.token].map((token) => mqtt.connectAsync(`mqtt://127.0.0.1:${centralMqttPort}`, { username: token, reconnectPeriod: 0 })));
    const seenAtCentral: string[] = [];
    for (const w of watchers) w.on('message', (topic) => seenAtCentral.push(topic));
    await watchers[0]!.subscribeAsync('device/+/+', { qos: 1 });
    await watchers[1]!.subscribeAsync(`device/${pump.id}/+`, { qos: 1 });
    const r = await atCentral('PUT', `/device/${pump.id}/command`, { valve: true, level: 7 });
    assert.equal(r.status, 202, r.text);
    assert.equal(r.body.delivered.gateway, 'sent');
    await until('both assets commanded at the gateway', () => got.length === 2);
    assert.deepEqual(got.map((m) => m.body.at), [r.body.at, r.body.at], "with the central's at");
    // One device command in the gateway's command log, not one per asset.
    const rows = queryStore<{ asset_id: string | null; value: string }>(north.dir, "SELECT asset_id, value FROM commands WHERE device_id = ? AND source = 'upstream'", pump.id);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.asset_id, null);
    assert.deepEqual(JSON.parse(rows[0]!.value), { valve: true, level: 7 });
    await local.endAsync();
    assert.deepEqual(seenAtCentral.filter((topic) => topic.endsWith('/command')), []);
    for (const w of watchers) await w.endAsync();
  });

  await t.test('south offline while devices are created, changed and deleted and the central restarts: it catches up in revision order', async () => {
    await fleet.stopGateway(south);
    await until('south offline', async () => !(await fleet.connected(south)));
    const a = await createManaged(south, 'a');
    const b = await createManaged(south, 'b');
    const c = await createManaged(south, 'c');
    assert.equal((await atCentral('PUT', `/device/${a.id}`, { name: 'a-2' })).status, 200);
    assert.equal((await atCentral('DELETE', `/device/${b.id}`)).status, 204);
    // A device created by the CLI in another process while the central is down is managed too.
    let d!: { id: string; token: string };
    await fleet.restartCentral(() => {
      d = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'd', '--gateway', south.id], centralDir);
    });
    assert.ok((await gatewayView(south)).config.pending >= 3);
    await startGateway(south);
    await until('south caught up', async () => (await gatewayView(south)).config.pending === 0);
    assert.equal(localDevice(south, a.id)?.name, 'a-2');
    assert.equal(localDevice(south, b.id), undefined, 'deleted at the central: gone');
    assert.deepEqual(localAssets(south, c.id), ['level', 't', 'valve']);
    assert.equal(localDevice(south, d.id)?.name, 'd');
    // Restarting the gateway changes nothing and resends nothing it applied.
    const applied = queryStore<{ device_id: string; revision: number }>(south.dir, 'SELECT device_id, revision FROM managed_here ORDER BY device_id');
    await south.daemon!.stop();
    await startGateway(south);
    await fleet.untilConnected(south);
    await sleep(500);
    assert.deepEqual(queryStore(south.dir, 'SELECT device_id, revision FROM managed_here ORDER BY device_id'), applied);
    assert.equal((await api(south.daemon!.url, 'PUT', `/device/${d.id}/asset/x/state`, { token: d.token, json: { value: 1 } })).status, 404, 'no asset x, but the token is known');
  });

  await t.test('kill -9 of a gateway in the middle of a catch-up: after its restart every change is applied', async () => {
    await fleet.stopGateway(south);
    await until('south offline', async () => !(await fleet.connected(south)));
    const ids: string[] = [];
    for (let i = 0; i < 150; i++) {
      const r = await atCentral('POST', '/devices', { name: `bulk-${i}`, gateway: south.id });
      assert.equal(r.status, 201, r.text);
      ids.push(r.body.id);
    }
    const applied = () => queryStore<{ n: number }>(south.dir, `SELECT count(*) AS n FROM managed_here WHERE device_id IN (${ids.map(() => '?').join(',')})`, ...ids)[0]!.n;
    await startGateway(south);
    await until('the catch-up under way', () => applied() > 0, 20_000);
    await fleet.stopGateway(south, 'SIGKILL');
    const atKill = applied();
    await startGateway(south);
    await until('every change applied after the restart', async () => (await gatewayView(south)).config.pending === 0 && applied() === ids.length, 30_000);
    assert.equal(queryStore<{ n: number }>(south.dir, `SELECT count(*) AS n FROM devices WHERE id IN (${ids.map(() => '?').join(',')})`, ...ids)[0]!.n, ids.length);
    console.log(`kill -9 mid catch-up: ${atKill} of ${ids.length} applied when killed`);
  });

  await t.test('unassigning removes the device from its gateway; assigning moves it', async () => {
    const r = await atCentral('PUT', `/device/${pump.id}/gateway`, { gateway: south.id });
    assert.equal(r.status, 200, r.text);
    await until('moved', () => localDevice(north, pump.id) === undefined && localAssets(south, pump.id).length === 3);
    assert.equal((await api(south.daemon!.url, 'PUT', `/device/${pump.id}/asset/t/state`, { token: pump.token, json: { value: 30 } })).status, 200);
    const none = cli(['device', 'assign', pump.id, '--none', '--data', centralDir]);
    assert.equal(none.code, 0, none.stderr);
    await until('removed from south', () => localDevice(south, pump.id) === undefined);
    const view = await atCentral('GET', `/device/${pump.id}`);
    assert.equal(view.status, 200, 'it stays at the central');
    assert.equal(view.body.gatewayId ?? null, null);
    assert.equal((await atCentral('PUT', `/device/${pump.id}/gateway`, { gateway: 'nosuchgatewaynosuchgatew' })).status, 404);
  });

  await t.test('a device created at the gateway becomes managed: its local token keeps working; the central issues and rotates its own', async () => {
    const legacy = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'legacy'], north.dir);
    cliJson(['asset', 'create', legacy.id, '--name', 't', '--is', 'sensor', '--profile', '{"type":"number"}'], north.dir);
    const putAt = (g: Gateway, token: string, value: number) => api(g.daemon!.url, 'PUT', `/device/${legacy.id}/asset/t/state`, { token, json: { value } });
    assert.equal((await putAt(north, legacy.token, 1)).status, 200);
    await until('the catalog at the central', async () => (await atCentral('GET', `/device/${legacy.id}/asset/t/state`)).body?.state?.value === 1);
    assert.equal((await atCentral('PUT', `/device/${legacy.id}/gateway`, { gateway: north.id })).status, 200);
    await until('managed at the gateway', () => queryStore(north.dir, 'SELECT 1 FROM managed_here WHERE device_id = ? AND deleted = 0', legacy.id).length === 1);
    assert.equal((await putAt(north, legacy.token, 2)).status, 200, 'the token issued at the gateway still works');
    const first = (await atCentral('POST', `/device/${legacy.id}/token`)).body.token as string;
    await until('the central token works at the gateway', async () => (await putAt(north, first, 3)).status === 200);
    const second = (await atCentral('POST', `/device/${legacy.id}/token`)).body.token as string;
    await until('the rotated token works at the gateway', async () => (await putAt(north, second, 4)).status === 200);
    assert.equal((await putAt(north, first, 5)).status, 401, "the central's previous token stops");
    assert.equal((await putAt(north, legacy.token, 6)).status, 200);
    // Still managed: local changes refused; its data keeps flowing up.
    assert.equal((await api(north.daemon!.url, 'DELETE', `/device/${legacy.id}/asset/t`, { token: legacy.token })).status, 409);
    await until('its states at the central', async () => (await atCentral('GET', `/device/${legacy.id}/asset/t/state`)).body?.state?.value === 6);
  });

  await t.test('an ABP device: its settings go down, a device command is one LoRa frame, its events come up', async () => {
    const node = await createManaged(north, 'node');
    const keys = { devAddr: '26011BDA', nwkSKey: Buffer.from('11'.repeat(16), 'hex'), appSKey: Buffer.from('22'.repeat(16), 'hex') };
    const lw = await atCentral('PUT', `/device/${node.id}/lorawan`, { activation: 'abp', devAddr: keys.devAddr, nwkSKey: keys.nwkSKey.toString('hex'), appSKey: keys.appSKey.toString('hex') });
    assert.equal(lw.status, 200, lw.text);
    await until('the LoRaWAN settings at the gateway', () => queryStore(north.dir, 'SELECT 1 FROM lorawan_devices WHERE device_id = ?', node.id).length === 1);
    const reader = await mqtt.connectAsync(`mqtt://127.0.0.1:${centralMqttPort}`, { username: app, reconnectPeriod: 0 });
    const events: Array<Record<string, unknown>> = [];
    reader.on('message', (_t, p) => events.push(JSON.parse(p.toString())));
    await reader.subscribeAsync(`device/${node.id}/events`, { qos: 0 });
    const fwd = new ForwarderSimulator('b827ebfffe000002');
    await fwd.connect(north.daemon!.gwmpPort);
    await fwd.pull();
    const command = await atCentral('PUT', `/device/${node.id}/command`, { valve: true, level: 3 });
    assert.equal(command.status, 202, command.text);
    assert.notEqual(command.body.delivered.lpwan, 'queued', `not queued on the central's own radio: ${command.text}`);
    assert.deepEqual((await atCentral('GET', `/device/${node.id}/downlinks`)).body.data, [], "nothing in the central's downlink queue");
    await until('the command queued at the gateway', () => queryStore(north.dir, "SELECT 1 FROM downlinks WHERE device_id = ? AND status = 'queued'", node.id).length >= 1);
    await fwd.push([{ payload: uplinkFrame(keys, { fCnt: 1, fPort: 1, payload: Buffer.from([1]) }) }]);
    await until('an uplink event at the central', () => events.some((e) => e.type === 'uplink'), 10_000);
    await until('one downlink', () => fwd.pullResps().length >= 1, 10_000);
    await sleep(1500);
    const frames = fwd.pullResps();
    assert.equal(frames.length, 1, 'one frame for the device command, not one per asset');
    const frame = readDownlink(keys, Buffer.from(frames[0]!.txpk.data, 'base64'), 0);
    assert.ok(frame.micValid, "a frame for this device");
    assert.ok(frame.payload.length > 0);
    assert.ok(events.some((e) => e.type === 'downlink'), `downlink outcome at the central: ${JSON.stringify(events)}`);
    fwd.close();
    await reader.endAsync();
    // Its counters go up (on connect, then at most once a minute): moved to another gateway, it keeps them.
    await north.daemon!.stop();
    await startGateway(north);
    await until('the counters at the central', async () => (await atCentral('GET', `/device/${node.id}/lorawan`)).body.fCntUp === 2);
    assert.equal((await atCentral('PUT', `/device/${node.id}/gateway`, { gateway: south.id })).status, 200);
    await until('the device at the other gateway with its counters', () =>
      queryStore<{ f_cnt_up: number }>(south.dir, 'SELECT f_cnt_up FROM lorawan_devices WHERE device_id = ?', node.id)[0]?.f_cnt_up === 2,
    );
    // The two gateways apply the move independently: the first may still be removing it.
    await until('the device gone from the first gateway', () => localDevice(north, node.id) === undefined);
  });
});
