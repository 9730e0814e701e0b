// Two central nodes on one PostgreSQL and one Redis (docs/scale-out.md) with a real gateway: the
// same API on both, MQTT across nodes, a token revoked on one node refused on the other within
// 2 s, a node kill -9'd during a gateway's drain with every acknowledged state stored exactly
// once, and commands for a gateway delivered exactly once whichever node takes them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { api, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/mosquitto.js';
import { startPostgres } from '../helpers/postgres.js';
import { startRedis } from '../helpers/redis.js';
import { CentralDatabase } from '../../src/scale-out/postgres.js';
import { migratePostgres } from '../../src/scale-out/schema.js';
import { PostgresPendingCommands } from '../../src/scale-out/pg-ports.js';
import { sleep, until } from '../helpers/wait.js';

function gatewayCommands(dataDir: string, value: string): number {
  const db = new Database(join(dataDir, 'outpost.db'), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT count(*) FROM commands WHERE source = 'upstream' AND value = ?").pluck().get(value) as number) ?? 0;
  } finally {
    db.close();
  }
}

test('two central nodes on PostgreSQL and Redis', { timeout: 300_000 }, async (t) => {
  const pg = await startPostgres();
  const redis = await startRedis();
  const url = await pg.createDatabase();
  const dbName = url.split('/').pop()!;
  const dirs = { a: tempDataDir(), b: tempDataDir(), gw: tempDataDir() };
  const env = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url, OUTPOST_REDIS_URL: redis.url, OUTPOST_RATE_LIMIT: '0' };
  // Started together: both try to migrate, the advisory lock lets one do it.
  let [a, b] = await Promise.all([startDaemon({ dataDir: dirs.a, env }), startDaemon({ dataDir: dirs.b, env })]);
  let gateway: RunningDaemon | undefined;
  t.after(async () => {
    await gateway?.stop();
    await Promise.all([a.stop(), b.stop()]);
    await redis.stop();
    await pg.dispose();
    for (const d of Object.values(dirs)) removeDir(d);
  });
  const app = cliJson<{ id: string; token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,command,admin'], dirs.a, env);
  let device!: { id: string; token: string };

  await t.test('the same API on both nodes: what one node creates, the other serves', async () => {
    for (const node of [a, b]) {
      const health = (await api(node.url, 'GET', '/healthz')).body;
      assert.equal(health.postgres.status, 'ok');
      assert.equal(health.redis.status, 'ok');
    }
    await until('the token created at node A works at node B', async () => (await api(b.url, 'GET', '/devices', { token: app.token })).status === 200, 5000);
    const created = await api(b.url, 'POST', '/devices', { token: app.token, json: { name: 'boiler' } });
    assert.equal(created.status, 201, created.text);
    device = created.body;
    await until('the device at node A', async () => (await api(a.url, 'GET', `/device/${device.id}`, { token: app.token })).status === 200, 5000);
    const asset = await api(a.url, 'POST', `/device/${device.id}/assets`, { token: app.token, json: { name: 't', is: 'sensor', profile: { type: 'number' } } });
    assert.equal(asset.status, 201, asset.text);
    await until('the asset at node B', async () => (await api(b.url, 'GET', `/device/${device.id}`, { token: app.token })).body?.assets?.length === 1, 5000);
    const viewA = (await api(a.url, 'GET', `/device/${device.id}`, { token: app.token })).body;
    const viewB = (await api(b.url, 'GET', `/device/${device.id}`, { token: app.token })).body;
    assert.deepEqual(viewB, viewA);
  });

  await t.test('MQTT across nodes: a subscriber on node A receives a state published on node B; the history is the same on both', async () => {
    const subscriber = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.mqttPort}`, { username: app.token, reconnectPeriod: 0 });
    const feed: Array<{ value: number }> = [];
    subscriber.on('message', (_t, p) => feed.push(JSON.parse(p.toString())));
    await subscriber.subscribeAsync(`device/${device.id}/asset/t/feed`, { qos: 1 });
    const publisher = await mqtt.connectAsync(`mqtt://127.0.0.1:${b.mqttPort}`, { username: device.token, reconnectPeriod: 0 });
    for (const value of [20.5, 21, 21.5]) await publisher.publishAsync(`device/${device.id}/asset/t/state`, JSON.stringify({ value }), { qos: 1 });
    await until('three feed messages at node A', () => feed.length === 3, 5000);
    assert.deepEqual(
      feed.map((m) => m.value),
      [20.5, 21, 21.5],
    );
    await until('the history at node A', async () => (await api(a.url, 'GET', `/device/${device.id}/asset/t/states`, { token: app.token })).body?.data?.length === 3, 5000);
    assert.equal(pg.psql(`SELECT count(*) FROM states`, dbName), '3');
    // A new subscriber on node A gets the latest state as the retained feed message.
    const late = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.mqttPort}`, { username: app.token, reconnectPeriod: 0 });
    const retained = new Promise<{ value: number; retain: boolean }>((resolve) => late.on('message', (_t, p, packet) => resolve({ ...JSON.parse(p.toString()), retain: packet.retain })));
    await late.subscribeAsync(`device/${device.id}/asset/t/feed`, { qos: 1 });
    const latest = await retained;
    assert.equal(latest.value, 21.5);
    assert.equal(latest.retain, true);
    await Promise.all([subscriber.endAsync(), publisher.endAsync(), late.endAsync()]);
  });

  await t.test('a token revoked at node A stops working at node B within 2 s (its MQTT session there is closed)', async () => {
    const reader = (await api(a.url, 'POST', '/tokens', { token: app.token, json: { name: 'reader', scopes: ['read'] } })).body as { id: string; token: string };
    await until('the reader token at node B', async () => (await api(b.url, 'GET', '/devices', { token: reader.token })).status === 200, 5000);
    const session = await mqtt.connectAsync(`mqtt://127.0.0.1:${b.mqttPort}`, { username: reader.token, reconnectPeriod: 0 });
    const closed = new Promise<number>((resolve) => session.once('close', () => resolve(Date.now())));
    const revokedAt = Date.now();
    assert.equal((await api(a.url, 'DELETE', `/tokens/${reader.id}`, { token: app.token })).status, 204);
    const closedAt = await Promise.race([closed, sleep(5000).then(() => Infinity)]);
    assert.ok(closedAt - revokedAt < 2000, `session at node B closed ${closedAt - revokedAt} ms after the revocation at node A`);
    assert.equal((await api(b.url, 'GET', '/devices', { token: reader.token })).status, 401);
    session.end(true);
    console.log(`revocation across nodes: ${closedAt - revokedAt} ms`);
  });

  await t.test('Redis away: both nodes say so and keep storing; back: messages cross nodes again without a restart', async () => {
    await redis.stop();
    for (const node of [a, b]) {
      await until('redis failing in /healthz', async () => (await api(node.url, 'GET', '/healthz')).body.redis.status === 'failing', 10_000);
      const health = await api(node.url, 'GET', '/healthz');
      assert.equal(health.status, 200);
      assert.equal(health.body.status, 'degraded');
    }
    const put = await api(b.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 30 } });
    assert.equal(put.status, 200, 'states are still stored (PostgreSQL)');
    await redis.start();
    for (const node of [a, b]) await until('redis ok again', async () => (await api(node.url, 'GET', '/healthz')).body.redis.status === 'ok', 15_000);
    const subscriber = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.mqttPort}`, { username: app.token, reconnectPeriod: 0 });
    const got = new Promise<{ value: number }>((resolve) => subscriber.on('message', (_t, p, packet) => !packet.retain && resolve(JSON.parse(p.toString()))));
    await subscriber.subscribeAsync(`device/${device.id}/asset/t/feed`, { qos: 1 });
    // The emitter re-subscribes on its own once reconnected: publish until one crosses.
    let crossed: { value: number } | undefined;
    got.then((m) => (crossed = m));
    for (let i = 0; i < 50 && !crossed; i++) {
      await api(b.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 31 + i } });
      await sleep(100);
    }
    assert.ok(crossed && crossed.value >= 31, 'a state published at node B reached node A through Redis again');
    await subscriber.endAsync();
  });

  const gw = cliJson<{ id: string; token: string }>(['gateway', 'create', '--name', 'north'], dirs.a, env);
  const local = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'pump'], dirs.gw);
  cliJson(['asset', 'create', local.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], dirs.gw);
  cliJson(['asset', 'create', local.id, '--name', 'valve', '--is', 'actuator', '--profile', '{"type":"boolean"}'], dirs.gw);
  const config = join(dirs.gw, 'config.json');
  const startGateway = async (urls: string[]) => {
    writeFileSync(config, JSON.stringify({ version: 1, upstream: { url: urls, gatewayId: gw.id, token: gw.token, window: 32, reconnectMinMs: 100, reconnectMaxMs: 1000, statusIntervalSeconds: 1 } }));
    return startDaemon({ dataDir: dirs.gw, args: ['--config', config], env: { OUTPOST_RATE_LIMIT: '0' } });
  };
  const outbox = async () => (await api(gateway!.url, 'GET', '/healthz')).body.upstream as { link: string; depth: number };
  const backlog = 4000;
  let bStderr = '';

  await t.test('node B kill -9ed during a gateway drain: the gateway goes on at node A, every acknowledged state stored exactly once', async () => {
    // The backlog, while the gateway's only central URL leads nowhere.
    gateway = await startGateway([`mqtt://127.0.0.1:${await freePort()}`]);
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${gateway.mqttPort}`, { username: local.token, reconnectPeriod: 0 });
    await Promise.all(Array.from({ length: backlog }, (_, i) => client.publishAsync(`device/${local.id}/asset/n/state`, JSON.stringify({ value: i }), { qos: 1 })));
    await client.endAsync();
    await gateway.stop();
    gateway = await startGateway([`mqtt://127.0.0.1:${b.mqttPort}`, `mqtt://127.0.0.1:${a.mqttPort}`]);
    const stored = () => Number(pg.psql(`SELECT count(*) FROM states s WHERE s.asset_id IN (SELECT pk::json->>0 FROM catalog_rows WHERE tbl = 'assets' AND row->>'device_id' = '${local.id}')`, dbName));
    await until('the drain under way at node B', () => stored() > 300, 60_000);
    b.proc.kill('SIGKILL');
    await b.exited;
    const atKill = stored();
    assert.ok(atKill < backlog, `killed in the middle of the drain (${atKill} of ${backlog})`);
    await until('the outbox drained through node A', async () => (await outbox()).depth === 0, 90_000);
    const values = pg.psql(`SELECT value FROM states WHERE asset_id IN (SELECT pk::json->>0 FROM catalog_rows WHERE tbl = 'assets' AND row->>'device_id' = '${local.id}' AND row->>'name' = 'n')`, dbName).split('\n').map(Number);
    assert.equal(values.length, backlog, 'each state once');
    assert.deepEqual(new Set(values).size, backlog, 'nothing lost, nothing twice');
    const duplicates = Number(/^outpost_sync_duplicates_total (\d+)/m.exec((await api(a.url, 'GET', '/metrics')).text)?.[1] ?? 0);
    console.log(`kill -9 of node B mid-drain: ${atKill} of ${backlog} stored when killed; node A dropped ${duplicates} duplicates`);
    b = await startDaemon({ dataDir: dirs.b, env });
    b.proc.stderr!.on('data', (d: Buffer) => (bStderr += d.toString()));
  });

  await t.test('commands for the gateway are delivered exactly once, whichever node they are sent at and whichever node it is on', async () => {
    await until('the gateway connected', async () => (await outbox()).link === 'up');
    // Connected to node A: both nodes say so.
    for (const node of [a, b]) await until('connected seen by every node', async () => (await api(node.url, 'GET', `/gateway/${gw.id}`, { token: app.token })).body.connected === true, 5000);
    // Live on node A, sent at node B: kept in PostgreSQL, taken by node A (NOTIFY).
    const sent = await api(b.url, 'PUT', `/device/${local.id}/asset/valve/command`, { token: app.token, json: { value: true } });
    assert.equal(sent.status, 202, sent.text);
    await until('the command at the gateway', () => gatewayCommands(dirs.gw, '{"valve":true}') === 1, 10_000);
    // Offline, sent at node A: delivered when the gateway comes back at node B.
    await gateway!.stop();
    for (const node of [a, b]) await until('gateway offline on every node', async () => (await api(node.url, 'GET', `/gateway/${gw.id}`, { token: app.token })).body.connected === false, 10_000);
    const queued = await api(a.url, 'PUT', `/device/${local.id}/asset/valve/command`, { token: app.token, json: { value: false } });
    assert.equal(queued.body.delivered.gateway, 'queued');
    gateway = await startGateway([`mqtt://127.0.0.1:${b.mqttPort}`, `mqtt://127.0.0.1:${a.mqttPort}`]);
    await until('the kept command at the gateway', () => gatewayCommands(dirs.gw, '{"valve":false}') === 1, 15_000);
    await sleep(1500);
    assert.equal(gatewayCommands(dirs.gw, '{"valve":true}'), 1, 'not twice');
    assert.equal(gatewayCommands(dirs.gw, '{"valve":false}'), 1, 'not twice');
    assert.equal(pg.psql('SELECT count(*) FROM gateway_commands', dbName), '0');
  });

  await t.test('a managed device created at the node the gateway is not connected to reaches the gateway', async () => {
    await until('the gateway connected to node B', async () => (await outbox()).link === 'up');
    const managed = await api(a.url, 'POST', '/devices', { token: app.token, json: { name: 'soil-7', gateway: gw.id } });
    assert.equal(managed.status, 201, managed.text);
    const asset = await api(a.url, 'POST', `/device/${managed.body.id}/assets`, { token: app.token, json: { name: 'moisture', is: 'sensor', profile: { type: 'number' } } });
    assert.equal(asset.status, 201, asset.text);
    await until(
      'the managed device and its asset at the gateway',
      async () => (await api(gateway!.url, 'GET', `/device/${managed.body.id}`, { token: managed.body.token })).body?.assets?.length === 1,
      15_000,
    );
    const put = await api(gateway!.url, 'PUT', `/device/${managed.body.id}/asset/moisture/state`, { token: managed.body.token, json: { value: 0.31 } });
    assert.equal(put.status, 200, 'its token works at the gateway');
    await until('its state at the central', () => pg.psql(`SELECT count(*) FROM states WHERE value = '0.31'`, dbName) === '1', 15_000);
  });

  await t.test('SIGTERM: a node closes its PostgreSQL and Redis connections and exits 0', async () => {
    const code = await Promise.race([b.stop(), sleep(10_000).then(() => 'still running after 10 s')]);
    assert.equal(code, 0, `${b.logs.slice(-6).join('\n')}\n${bStderr}`);
  });

  await t.test('FOR UPDATE SKIP LOCKED: nodes taking the same gateway\'s commands at once never both get one', async () => {
    const nodes = [new CentralDatabase(url), new CentralDatabase(url), new CentralDatabase(url)];
    try {
      await migratePostgres(nodes[0]!);
      const commands = nodes.map((db) => new PostgresPendingCommands(db));
      const total = 300;
      for (let i = 0; i < total; i++) await commands[i % 3]!.queue({ gatewayId: 'G-race', deviceId: 'd', topic: 'device/d/command', payload: String(i), expiresAt: Date.now() + 60_000 });
      const taken: string[] = [];
      await Promise.all(
        commands.map(async (c) => {
          for (let round = 0; round < 20; round++) for (const command of await c.take('G-race', Date.now())) taken.push(command.payload);
        }),
      );
      assert.equal(taken.length, total, 'each command taken once');
      assert.equal(new Set(taken).size, total);
    } finally {
      await Promise.all(nodes.map((db) => db.close()));
    }
  });
});
