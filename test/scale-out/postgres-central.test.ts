// A central node on PostgreSQL (docs/scale-out.md) with a real gateway: the schema migrated by the
// first start, states acknowledged only after PostgreSQL committed them, duplicates refused by the
// unique index and counted, PostgreSQL stopped under load (503 STORE_UNAVAILABLE, no PUBACK, the
// gateway's outbox waits) and back (recovery without a restart, nothing acknowledged lost).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { api, cli, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { CentralDatabase } from '../../src/scale-out/postgres.js';
import { pruneHistory } from '../../src/scale-out/pg-retention.js';
import { StatePartitions } from '../../src/scale-out/pg-partitions.js';
import { POSTGRES_SCHEMA_VERSION } from '../../src/scale-out/schema.js';
import { createLogger } from '../../src/ops/logger.js';
import { sleep, until } from '../helpers/wait.js';

function pgValues(pg: TestPostgres, db: string, deviceAssetId: string): number[] {
  const out = pg.psql(`SELECT value FROM states WHERE asset_id = '${deviceAssetId}' ORDER BY id`, db);
  return out === '' ? [] : out.split('\n').map(Number);
}

async function upstream(daemon: RunningDaemon) {
  return (await api(daemon.url, 'GET', '/healthz')).body.upstream as { link: string; depth: number };
}

test('a central node on PostgreSQL with a real gateway', { timeout: 240_000 }, async (t) => {
  const pg = await startPostgres();
  const url = await pg.createDatabase();
  const dbName = url.split('/').pop()!;
  const centralDir = tempDataDir();
  const gwDir = tempDataDir();
  const env = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url };
  let central: RunningDaemon | undefined;
  let gateway: RunningDaemon | undefined;
  t.after(async () => {
    await gateway?.stop();
    await central?.stop();
    await pg.dispose();
    removeDir(centralDir);
    removeDir(gwDir);
  });

  await t.test('outpost migrate creates the schema; running it again changes nothing', () => {
    const first = cli(['migrate', '--data', centralDir, '--json'], env);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(JSON.parse(first.stdout), { from: 0, to: POSTGRES_SCHEMA_VERSION });
    const again = cli(['migrate', '--data', centralDir, '--json'], env);
    assert.deepEqual(JSON.parse(again.stdout), { from: POSTGRES_SCHEMA_VERSION, to: POSTGRES_SCHEMA_VERSION });
    assert.equal(pg.psql('SELECT version FROM outpost_schema', dbName), String(POSTGRES_SCHEMA_VERSION));
  });

  central = await startDaemon({ dataDir: centralDir, env });
  const app = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,command,admin'], centralDir, env).token;
  const gw = cliJson<{ id: string; token: string }>(['gateway', 'create', '--name', 'north'], centralDir, env);
  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'pump'], gwDir);
  cliJson(['asset', 'create', device.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], gwDir);
  const config = join(gwDir, 'config.json');
  writeFileSync(config, JSON.stringify({ version: 1, upstream: { window: 32, reconnectMinMs: 100, reconnectMaxMs: 1000, statusIntervalSeconds: 1 } }));
  const startGateway = () =>
    startDaemon({
      dataDir: gwDir,
      args: ['--config', config],
      env: { OUTPOST_RATE_LIMIT: '0', OUTPOST_UPSTREAM_URL: `mqtt://127.0.0.1:${central!.mqttPort}`, OUTPOST_UPSTREAM_GATEWAY_ID: gw.id, OUTPOST_UPSTREAM_TOKEN: gw.token },
    });
  gateway = await startGateway();
  const sent: number[] = [];
  const put = async (value: number) => {
    const r = await api(gateway!.url, 'PUT', `/device/${device.id}/asset/n/state`, { token: device.token, json: { value } });
    assert.equal(r.status, 200, r.text);
    sent.push(value);
  };
  let assetId = '';

  await t.test('states from the gateway are stored in PostgreSQL and served by the node', async () => {
    for (let i = 0; i < 50; i++) await put(i);
    await until('the asset at the central', async () => (await api(central!.url, 'GET', `/device/${device.id}`, { token: app })).status === 200);
    const view = await api(central!.url, 'GET', `/device/${device.id}`, { token: app });
    assetId = view.body.assets.find((a: { name: string }) => a.name === 'n').id;
    await until('50 states in PostgreSQL', () => pgValues(pg, dbName, assetId).length === 50);
    assert.deepEqual(pgValues(pg, dbName, assetId), sent);
    await until('the latest state at the node', async () => (await api(central!.url, 'GET', `/device/${device.id}/asset/n/state`, { token: app })).body?.state?.value === 49);
    const health = (await api(central!.url, 'GET', '/healthz')).body;
    assert.equal(health.postgres.status, 'ok');
    assert.equal(health.postgres.schemaVersion, POSTGRES_SCHEMA_VERSION);
    // The catalog the node keeps is in PostgreSQL too.
    assert.equal(pg.psql(`SELECT row->>'name' FROM catalog_rows WHERE tbl = 'devices' AND pk = '["${device.id}"]'`, dbName), 'pump');
  });

  await t.test('a state re-sent with the same at and value is acknowledged, refused by the unique index and counted', async () => {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${central!.mqttPort}`, { username: gw.token, reconnectPeriod: 0 });
    const at = new Date(Date.now() - 60_000).toISOString();
    for (let i = 0; i < 3; i++) await c.publishAsync(`device/${device.id}/asset/n/state`, JSON.stringify({ value: 1000, at }), { qos: 1 });
    await c.endAsync();
    assert.equal(pg.psql(`SELECT count(*) FROM states WHERE asset_id = '${assetId}' AND value = '1000'`, dbName), '1');
    const metrics = (await api(central!.url, 'GET', '/metrics')).text;
    const dup = Number(/^outpost_sync_duplicates_total (\d+)/m.exec(metrics)?.[1]);
    assert.ok(dup >= 2, `duplicates counted: ${dup}`);
    pg.psql(`DELETE FROM states WHERE value = '1000'`, dbName);
  });

  await t.test('PostgreSQL stopped under load: 503 STORE_UNAVAILABLE, no PUBACK, healthz failing; back: drained without a restart, nothing lost', async () => {
    let running = true;
    let next = 50;
    const loop = (async () => {
      while (running) {
        await put(next++);
        await sleep(5);
      }
    })();
    const direct = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'direct'], centralDir, env);
    cliJson(['asset', 'create', direct.id, '--name', 'x', '--is', 'sensor', '--profile', '{"type":"integer"}'], centralDir, env);
    await sleep(800);
    await pg.stop('fast');
    // A device writing straight to the node is refused, with the code and a Retry-After.
    await until('the node refuses writes', async () => {
      const r = await api(central!.url, 'PUT', `/device/${direct.id}/asset/x/state`, { token: direct.token, json: { value: 1 } });
      return r.status === 503 && r.body?.code === 'STORE_UNAVAILABLE';
    });
    // Catalog writes too: nothing is taken that the other nodes could not see.
    const create = await api(central!.url, 'POST', '/devices', { token: app, json: { name: 'refused' } });
    assert.equal(create.status, 503, create.text);
    assert.equal(create.body.code, 'STORE_UNAVAILABLE');
    assert.ok(create.headers.get('retry-after'));
    const health = await api(central!.url, 'GET', '/healthz');
    assert.equal(health.status, 200);
    assert.equal(health.body.postgres.status, 'failing');
    assert.equal(health.body.status, 'degraded');
    await until('states wait in the gateway outbox', async () => (await upstream(gateway!)).depth > 5, 15_000);
    await sleep(1500);
    await pg.start();
    await sleep(1000);
    // A crash this time (pg_ctl stop -m immediate: no shutdown checkpoint, recovery at start).
    await pg.stop('immediate');
    await until('writes refused again', async () => (await api(central!.url, 'POST', '/devices', { token: app, json: { name: 'refused' } })).status === 503, 10_000);
    await sleep(1000);
    await pg.start();
    await sleep(1000);
    running = false;
    await loop;
    await until('outbox drained', async () => (await upstream(gateway!)).depth === 0, 60_000);
    await until('healthz ok again', async () => (await api(central!.url, 'GET', '/healthz')).body.postgres.status === 'ok', 10_000);
    const stored = pgValues(pg, dbName, assetId);
    assert.equal(new Set(stored).size, stored.length, 'none stored twice');
    assert.deepEqual([...stored].sort((a, b) => a - b), sent, 'every acknowledged state stored');
    const r = await api(central!.url, 'PUT', `/device/${direct.id}/asset/x/state`, { token: direct.token, json: { value: 2 } });
    assert.equal(r.status, 200, r.text);
    assert.equal((await api(central!.url, 'POST', '/devices', { token: app, json: { name: 'taken' } })).status, 201);
  });

  await t.test("a gateway's catalog message is acknowledged only once the other nodes can see it (PostgreSQL away: no PUBACK yet)", async () => {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${central!.mqttPort}`, { username: gw.token, clientId: 'catalog-probe', reconnectPeriod: 0 });
    const id = 'Cat' + 'x'.repeat(17) + String(Date.now() % 10000).padStart(4, '0');
    await pg.stop('fast');
    let acked = false;
    const publish = c.publishAsync(`gateway/${gw.id}/device/${id}`, JSON.stringify({ id, name: 'late', assets: [] }), { qos: 1 }).then(() => (acked = true));
    await sleep(2000);
    assert.equal(acked, false, 'no PUBACK while PostgreSQL is away');
    await pg.start();
    await publish;
    assert.equal(pg.psql(`SELECT row->>'name' FROM catalog_rows WHERE tbl = 'devices' AND pk = '["${id}"]'`, dbName), 'late', 'in PostgreSQL when acknowledged');
    await c.endAsync();
  });

  await t.test('history older than limits.historyDays is pruned from PostgreSQL (whole months dropped, the rest in chunks); newer states stay', async () => {
    const old = Date.now() - 3 * 86_400_000;
    const db = new CentralDatabase(url);
    const partitions = new StatePartitions(db);
    try {
      await partitions.ensureFor([old]);
      pg.psql(`INSERT INTO states (asset_id, at, value, value_md5, received_at, node) SELECT 'old-asset', ${old} + g, g::text, md5(g::text)::uuid, ${old}, 'test' FROM generate_series(1, 25000) g`, dbName);
      const before = Number(pg.psql('SELECT count(*) FROM states', dbName));
      const { removed, dropped } = await pruneHistory(db, partitions, 2, Date.now(), createLogger('silent'));
      // Three days back is this month (rows deleted) or, early in a month, the last one (dropped whole).
      assert.ok(removed === 25_000 || dropped.length > 0, `removed ${removed}, dropped ${dropped.join(', ')}`);
      assert.equal(Number(pg.psql('SELECT count(*) FROM states', dbName)), before - 25_000);
    } finally {
      await db.close();
    }
    assert.equal(pg.psql(`SELECT count(*) FROM states WHERE asset_id = '${assetId}'`, dbName), String(sent.length));
  });

  await t.test('outpost migrate --copy moves a SQLite central into PostgreSQL: a new node serves its devices, tokens and history', async () => {
    const oldDir = tempDataDir();
    const newDir = tempDataDir();
    try {
      const single = await startDaemon({ dataDir: oldDir, env: { OUTPOST_ROLE: 'central' } });
      const ops = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,admin'], oldDir).token;
      const pump = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'old-pump'], oldDir);
      cliJson(['asset', 'create', pump.id, '--name', 'p', '--is', 'sensor', '--profile', '{"type":"number"}'], oldDir);
      for (const value of [1.5, 2.5, 3.5]) assert.equal((await api(single.url, 'PUT', `/device/${pump.id}/asset/p/state`, { token: pump.token, json: { value } })).status, 200);
      await single.stop();
      const target = await pg.createDatabase();
      const copy = cli(['migrate', '--copy', '--data', oldDir, '--json'], { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: target });
      assert.equal(copy.code, 0, copy.stderr);
      const copied = JSON.parse(copy.stdout);
      assert.equal(copied.states, 3);
      assert.ok(copied.catalogRows >= 4, `${copied.catalogRows} catalog rows`);
      // Run again (an interrupted copy): nothing twice.
      assert.equal(JSON.parse(cli(['migrate', '--copy', '--data', oldDir, '--json'], { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: target }).stdout).duplicates, 3);
      const node = await startDaemon({ dataDir: newDir, env: { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: target } });
      try {
        const view = await api(node.url, 'GET', `/device/${pump.id}`, { token: ops });
        assert.equal(view.status, 200, view.text);
        assert.equal(view.body.name, 'old-pump');
        await until('the history at the new node', async () => (await api(node.url, 'GET', `/device/${pump.id}/asset/p/states`, { token: ops })).body?.data?.length === 3, 5000);
        const put = await api(node.url, 'PUT', `/device/${pump.id}/asset/p/state`, { token: pump.token, json: { value: 4.5 } });
        assert.equal(put.status, 200, 'the device token works at the new node');
      } finally {
        await node.stop();
      }
    } finally {
      removeDir(oldDir);
      removeDir(newDir);
    }
  });
});
