// Upstream sync to an Outpost central started by the test: the gateway catalog, outages of the
// central, kill -9 of a gateway in the middle of a drain, commands back down (also to an offline
// gateway), gateway status, and what a gateway token may not touch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { queryStore } from '../helpers/sqlite.js';
import mqtt from 'mqtt';
import { api, cli, cliJson, type RunningDaemon } from '../helpers/daemon.js';
import { startFleet } from '../helpers/fleet-rig.js';
import { sleep, until } from '../helpers/wait.js';

const OUTAGE_MS = Number(process.env.OUTPOST_SYNC_OUTAGE_S ?? 8) * 1000;
const WINDOW = 32;


/** Values of one asset at the central, in the order they were stored. */
function storedValues(dataDir: string, deviceId: string, asset: string): number[] {
  const postgres = process.env.OUTPOST_TEST_POSTGRES_URL;
  if (postgres) {
    // A central node on PostgreSQL keeps its states there, not in its SQLite file (docs/scale-out.md).
    const [row] = queryStore<{ id: string }>(dataDir, 'SELECT id FROM assets WHERE device_id = ? AND name = ?', deviceId, asset);
    if (!row) return [];
    const out = spawnSync('psql', [postgres, '-v', 'ON_ERROR_STOP=1', '-At', '-c', `SELECT value FROM states WHERE asset_id = '${row.id}' ORDER BY id`], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`psql failed: ${out.stderr}`);
    return out.stdout.split('\n').filter((line) => line !== '').map((v) => JSON.parse(v) as number);
  }
  return queryStore<{ value: string }>(dataDir, 'SELECT s.value FROM states s JOIN assets a ON a.id = s.asset_id WHERE a.device_id = ? AND a.name = ? ORDER BY s.seq', deviceId, asset).map(
    (r) => JSON.parse(r.value) as number,
  );
}

async function metric(daemon: RunningDaemon, name: string): Promise<number> {
  const text = (await api(daemon.url, 'GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

async function upstream(daemon: RunningDaemon) {
  return (await api(daemon.url, 'GET', '/healthz')).body.upstream as { link: string; depth: number; sent: number };
}

/** What the CLI needs besides the data directory to change a central's catalog (its PostgreSQL, when there is one). */
const centralEnv = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: process.env.OUTPOST_TEST_POSTGRES_URL };

test('an Outpost central and its gateways', { timeout: 300_000 }, async (t) => {
  // test/scale-out/same-suite.test.ts runs this file again against a central node on PostgreSQL.
  const fleet = await startFleet({ centralEnv });
  t.after(() => fleet.close());
  const { centralDir } = fleet;
  const g1 = fleet.addGateway('north', { upstream: { window: WINDOW, reconnectMinMs: 100, reconnectMaxMs: 1000, statusIntervalSeconds: 1 } }, { OUTPOST_RATE_LIMIT: '0' });
  const gwDir = g1.dir;
  const g2 = (await api(fleet.central.url, 'POST', '/gateways', { token: fleet.app, json: { name: 'south' } })).body as { id: string; token: string };
  assert.match(g1.token, /^gateway:/);
  assert.match(g2.token, /^gateway:/);

  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'pump'], gwDir);
  cliJson(['asset', 'create', device.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], gwDir);
  cliJson(['asset', 'create', device.id, '--name', 'valve', '--is', 'actuator', '--profile', '{"type":"boolean"}'], gwDir);
  let gateway = await fleet.startGateway(g1);
  const sent: number[] = [];
  let next = 0;
  const put = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const r = await api(gateway.url, 'PUT', `/device/${device.id}/asset/n/state`, { token: device.token, json: { value: next } });
      assert.equal(r.status, 200, r.text);
      sent.push(next++);
    }
  };

  try {
    await t.test('the catalog creates the device at the central with the same ID, before its states', async () => {
      await put(20);
      await until('states at the central', () => storedValues(centralDir, device.id, 'n').length === 20);
      const view = await api(fleet.central.url, 'GET', `/device/${device.id}`, { token: fleet.app });
      assert.equal(view.status, 200, view.text);
      assert.equal(view.body.name, 'pump');
      assert.equal(view.body.gatewayId, g1.id);
      assert.deepEqual(view.body.assets.map((a: { name: string }) => a.name).sort(), ['n', 'valve']);
      const gw = await api(fleet.central.url, 'GET', `/gateway/${g1.id}`, { token: fleet.app });
      assert.equal(gw.body.connected, true);
      assert.deepEqual(gw.body.devices, [device.id]);
      assert.ok(gw.body.lastSeen);
      const list = await api(fleet.central.url, 'GET', '/gateways', { token: fleet.app });
      assert.deepEqual(list.body.map((g: { id: string }) => g.id).sort(), [g1.id, g2.id].sort());
      // An asset added at the gateway reaches the central too.
      cliJson(['asset', 'create', device.id, '--name', 'temp', '--is', 'sensor', '--profile', '{"type":"number"}'], gwDir);
      await until('the new asset at the central', async () => {
        const v = await api(fleet.central.url, 'GET', `/device/${device.id}`, { token: fleet.app });
        return v.body.assets.some((a: { name: string }) => a.name === 'temp');
      });
    });

    await t.test('gateway status is retained at the central', async () => {
      const reader = await mqtt.connectAsync(`mqtt://127.0.0.1:${fleet.centralMqttPort}`, { username: fleet.app, reconnectPeriod: 0 });
      const statuses: Array<Record<string, unknown>> = [];
      reader.on('message', (_t, p) => statuses.push(JSON.parse(p.toString())));
      await reader.subscribeAsync('gateway/+/status', { qos: 1 });
      await until('a retained status', () => statuses.length > 0, 10_000);
      const s = statuses[0]!;
      assert.equal(s.online, true);
      assert.equal(typeof s.version, 'string');
      assert.ok(s.outbox && typeof (s.outbox as { depth: number }).depth === 'number');
      await reader.endAsync();
    });

    await t.test(`continuous ingest while the central is stopped for ${OUTAGE_MS / 1000} s: every state arrives, in order, none twice`, async () => {
      let running = true;
      const loop = (async () => {
        while (running) {
          await put(1);
          await sleep(10);
        }
      })();
      await sleep(1000);
      await fleet.restartCentral(async () => {
        await until('link down', async () => (await upstream(gateway)).link === 'down');
        assert.equal((await api(gateway.url, 'GET', '/healthz')).status, 200, 'degraded, not failed');
        await sleep(OUTAGE_MS);
      });
      await sleep(1500);
      running = false;
      await loop;
      await until('outbox drained', async () => (await upstream(gateway)).depth === 0, 60_000);
      const stored = storedValues(centralDir, device.id, 'n');
      assert.deepEqual(stored, sent, 'every state once, in the order accepted');
    });

    await t.test('kill -9 of the gateway in the middle of a drain: nothing lost, duplicates bounded and dropped by the central', async () => {
      const backlog = 5000;
      await fleet.restartCentral(async () => {
        // A backlog while the central is away, published fast over MQTT.
        const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${gateway.mqttPort}`, { username: device.token, reconnectPeriod: 0 });
        await Promise.all(
          Array.from({ length: backlog }, (_, i) => client.publishAsync(`device/${device.id}/asset/n/state`, JSON.stringify({ value: next + i }), { qos: 1 })),
        );
        for (let i = 0; i < backlog; i++) sent.push(next++);
        await client.endAsync();
        assert.equal((await upstream(gateway)).depth, backlog);
      });
      const before = sent.length - backlog;
      await until('the drain under way', () => storedValues(centralDir, device.id, 'n').length > before + 200, 60_000);
      await fleet.stopGateway(g1, 'SIGKILL');
      const atKill = storedValues(centralDir, device.id, 'n').length;
      assert.ok(atKill < sent.length, `killed in the middle of the drain (${atKill} of ${sent.length})`);
      gateway = await fleet.startGateway(g1);
      await until('outbox drained after the restart', async () => (await upstream(gateway)).depth === 0, 60_000);
      const stored = storedValues(centralDir, device.id, 'n');
      assert.deepEqual(new Set(stored).size, stored.length, 'no state stored twice');
      assert.deepEqual([...stored].sort((a, b) => a - b), sent, 'nothing lost');
      const duplicates = await metric(fleet.central, 'outpost_sync_duplicates_total');
      assert.ok(duplicates <= 2 * WINDOW, `${duplicates} duplicates, bounded by the window`);
      console.log(`kill -9 mid-drain: ${atKill} of ${sent.length} at the central when killed, ${duplicates} duplicates dropped`);
    });

    await t.test('a command sent at the central reaches a local MQTT subscriber behind the gateway; an offline gateway gets it later', async () => {
      const local = await mqtt.connectAsync(`mqtt://127.0.0.1:${gateway.mqttPort}`, { username: device.token, reconnectPeriod: 0 });
      const got = new Promise<{ value: boolean; at: string }>((resolve) => local.on('message', (_t, p) => resolve(JSON.parse(p.toString()))));
      await local.subscribeAsync(`device/${device.id}/asset/valve/command`, { qos: 1 });
      await until('gateway connected', async () => (await api(fleet.central.url, 'GET', `/gateway/${g1.id}`, { token: fleet.app })).body.connected === true);
      const r = await api(fleet.central.url, 'PUT', `/device/${device.id}/asset/valve/command`, { token: fleet.app, json: { value: true } });
      assert.equal(r.status, 202, r.text);
      assert.equal(r.body.delivered.gateway, 'sent');
      const command = await got;
      assert.deepEqual(command, { value: true, at: r.body.at }, "delivered with the central's at");
      await local.endAsync();

      await gateway.stop();
      await until('gateway offline at the central', async () => (await api(fleet.central.url, 'GET', `/gateway/${g1.id}`, { token: fleet.app })).body.connected === false);
      const queued = await api(fleet.central.url, 'PUT', `/device/${device.id}/asset/valve/command`, { token: fleet.app, json: { value: false } });
      assert.equal(queued.body.delivered.gateway, 'queued');
      gateway = await fleet.startGateway(g1);
      // Kept as the one device command message it goes down as (docs/sync.md).
      const kept = `SELECT at, value, source FROM commands WHERE source = 'upstream' AND value = '{"valve":false}'`;
      await until('the kept command delivered at the gateway', () => queryStore<{ at: number; value: string; source: string }>(gwDir, kept).length === 1);
      const [row] = queryStore<{ at: number }>(gwDir, kept);
      assert.equal(new Date(row!.at).toISOString(), queued.body.at);
    });

    await t.test('a gateway token cannot touch a device of another gateway', async () => {
      const other = cliJson<{ id: string }>(['device', 'create', '--name', 'theirs', '--gateway', g2.id], centralDir, centralEnv);
      cliJson(['asset', 'create', other.id, '--name', 'valve', '--is', 'actuator', '--profile', '{"type":"boolean"}'], centralDir, centralEnv);
      cliJson(['asset', 'create', other.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], centralDir, centralEnv);
      const g1client = await mqtt.connectAsync(`mqtt://127.0.0.1:${fleet.centralMqttPort}`, { username: g1.token, reconnectPeriod: 0 });
      const messages: Array<{ topic: string; text: string }> = [];
      g1client.on('message', (topic, p) => messages.push({ topic, text: p.toString() }));
      const refused = await g1client.subscribeAsync(`device/${other.id}/asset/+/command`, { qos: 1 }).then(
        (g) => g[0]!.qos,
        (err: { packet?: { granted?: number[] } }) => err.packet?.granted?.[0],
      );
      assert.equal(refused, 128, "another gateway's device topic is refused");
      assert.equal((await g1client.subscribeAsync(`gateway/${g2.id}/errors`, { qos: 1 }).catch((e: { packet?: { granted?: number[] } }) => [{ qos: e.packet?.granted?.[0] }]))[0]!.qos, 128);
      await g1client.subscribeAsync(['device/+/asset/+/command', `gateway/${g1.id}/errors`], { qos: 1 });
      // A command for the other gateway's device is not delivered on this session; one for its own is.
      await api(fleet.central.url, 'PUT', `/device/${other.id}/asset/valve/command`, { token: fleet.app, json: { value: true } });
      await api(fleet.central.url, 'PUT', `/device/${device.id}/asset/valve/command`, { token: fleet.app, json: { value: true } });
      await until('own command', () => messages.some((m) => m.topic.includes(device.id)));
      assert.ok(!messages.some((m) => m.topic.includes(other.id)), 'nothing of the other gateway\'s device');
      // A state for the other gateway's device: acknowledged, not stored, reported on the gateway's errors topic.
      await g1client.publishAsync(`device/${other.id}/asset/n/state`, '{"value": 7}', { qos: 1 });
      await until('refusal reported', () => messages.some((m) => m.topic === `gateway/${g1.id}/errors` && m.text.includes('DEVICE_NOT_ASSIGNED')));
      assert.deepEqual(storedValues(centralDir, other.id, 'n'), []);
      // Its catalog cannot claim the device either.
      await g1client.publishAsync(`gateway/${g1.id}/device/${other.id}`, JSON.stringify({ id: other.id, name: 'stolen', assets: [] }), { qos: 1 });
      await until('catalog refusal reported', () => messages.filter((m) => m.text.includes('DEVICE_NOT_ASSIGNED')).length >= 2);
      const theirs = await api(fleet.central.url, 'GET', `/device/${other.id}`, { token: fleet.app });
      assert.equal(theirs.body.name, 'theirs');
      assert.equal(theirs.body.gatewayId, g2.id);
      // Over HTTP the token reads its own devices only.
      assert.equal((await api(fleet.central.url, 'GET', `/device/${other.id}`, { token: g1.token })).status, 403);
      assert.equal((await api(fleet.central.url, 'GET', `/device/${device.id}`, { token: g1.token })).status, 200);
      // Publishing under another gateway's topics closes the connection.
      const closed = new Promise<void>((resolve) => g1client.once('close', () => resolve()));
      g1client.publish(`gateway/${g2.id}/status`, '{"online":true}', { qos: 1 });
      await closed;
      g1client.end(true);
    });

    await t.test('a device created at the central for the gateway arrives there by itself; chosen IDs; a device deleted at the gateway keeps its data at the central', async () => {
      // Created with --gateway at the central it is managed from there (docs/sync.md): no command on the gateway.
      const pre = cliJson<{ id: string }>(['device', 'create', '--name', 'planned', '--gateway', g1.id], centralDir, centralEnv);
      await until('the managed device at the gateway', () => queryStore(gwDir, 'SELECT 1 FROM devices WHERE id = ? AND name = ?', pre.id, 'planned').length === 1);
      const taken = cli(['device', 'create', '--name', 'again', '--id', pre.id, '--data', gwDir]);
      assert.notEqual(taken.code, 0);
      assert.match(taken.stderr, /DEVICE_EXISTS/);
      const app = cliJson<{ token: string }>(['token', 'create', '--name', 'gw-admin', '--scopes', 'admin'], gwDir).token;
      const dup = await api(gateway.url, 'POST', '/devices', { token: app, json: { name: 'x', id: pre.id } });
      assert.equal(dup.status, 400);
      assert.equal(dup.body.code, 'DEVICE_EXISTS');
      const bad = await api(gateway.url, 'POST', '/devices', { token: app, json: { name: 'x', id: 'short' } });
      assert.equal(bad.status, 400);
      const chosen = await api(gateway.url, 'POST', '/devices', { token: app, json: { name: 'mine', id: 'ChosenIdChosenIdChosen00' } });
      assert.equal(chosen.status, 201, chosen.text);
      assert.equal(chosen.body.id, 'ChosenIdChosenIdChosen00');

      cli(['device', 'delete', device.id, '--data', gwDir]);
      await until('removedAtGateway at the central', async () => {
        const v = await api(fleet.central.url, 'GET', `/device/${device.id}`, { token: fleet.app });
        return typeof v.body.removedAtGateway === 'string';
      });
      assert.ok(storedValues(centralDir, device.id, 'n').length > 0, 'its data stays');
    });

    await t.test('gateway status goes offline on a clean stop; gateway delete revokes its token', async () => {
      const reader = await mqtt.connectAsync(`mqtt://127.0.0.1:${fleet.centralMqttPort}`, { username: fleet.app, reconnectPeriod: 0 });
      const statuses: Array<Record<string, unknown>> = [];
      reader.on('message', (_t, p) => statuses.push(JSON.parse(p.toString())));
      await reader.subscribeAsync(`gateway/${g1.id}/status`, { qos: 1 });
      await gateway.stop();
      await until('offline status', () => statuses.some((s) => s.online === false));
      await reader.endAsync();
      const del = await api(fleet.central.url, 'DELETE', `/gateway/${g2.id}`, { token: fleet.app });
      assert.equal(del.status, 204);
      assert.equal((await api(fleet.central.url, 'GET', `/gateway/${g2.id}`, { token: fleet.app })).status, 404);
      const refused = await mqtt.connectAsync(`mqtt://127.0.0.1:${fleet.centralMqttPort}`, { username: g2.token, reconnectPeriod: 0 }).then(
        (c) => (c.end(true), 'connected'),
        (err: Error) => err.message,
      );
      assert.match(refused, /Bad username or password|Not authorized/i);
    });
  } finally {
    // t.after stops both daemons
  }
});
