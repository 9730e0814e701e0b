// PostgreSQL is the record of a central's catalog, each node's SQLite a cache of it
// (docs/scale-out.md, "How the nodes share"), with two real central nodes on one real PostgreSQL:
// conflicts decided across the nodes (one of two simultaneous creations wins, the limits hold),
// a write answered only once PostgreSQL has it (refused with 503 and nothing cached while it is
// away), visible at the other node within 2 s, and a node whose data directory is wiped gets the
// whole catalog back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { api, cli, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';
import { sleep, until } from '../helpers/wait.js';

const CATALOG = ['gateways', 'devices', 'assets', 'tokens', 'managed_devices'];

/** The catalog rows of a node's SQLite file, table by table, in key order. */
function cachedCatalog(dataDir: string): Record<string, unknown[]> {
  const db = new Database(join(dataDir, 'outpost.db'), { readonly: true, fileMustExist: true });
  try {
    return Object.fromEntries(CATALOG.map((table) => [table, db.prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).all()]));
  } finally {
    db.close();
  }
}

test('the catalog of central nodes on PostgreSQL: PostgreSQL the record, each node\'s SQLite a cache', { timeout: 240_000 }, async (t) => {
  const pg = await startPostgres();
  const url = await pg.createDatabase();
  const dbName = url.split('/').pop()!;
  const dirs = { a: tempDataDir(), b: tempDataDir(), config: mkdtempSync(join(tmpdir(), 'outpost-config-')) };
  const configFile = join(dirs.config, 'config.json');
  writeFileSync(configFile, JSON.stringify({ version: 1, role: 'central', central: { devicesPerGateway: 4 }, limits: { assetsPerDevice: 50 } }));
  const env = { OUTPOST_POSTGRES_URL: url, OUTPOST_RATE_LIMIT: '0' };
  const start = (dataDir: string) => startDaemon({ dataDir, env, args: ['--config', configFile] });
  let [a, b]: RunningDaemon[] = await Promise.all([start(dirs.a), start(dirs.b)]);
  t.after(async () => {
    await Promise.all([a.stop(), b.stop()]);
    await pg.dispose();
    for (const d of Object.values(dirs)) removeDir(d);
  });
  const cliEnv = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url };
  const app = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,command,admin'], dirs.a, cliEnv).token;
  const post = (node: RunningDaemon, path: string, json: unknown) => api(node.url, 'POST', path, { token: app, json });

  let device!: { id: string; token: string };
  await t.test('an answered write is served by the other node within 2 s, its token works there', async () => {
    await until('the CLI-created token at node B', async () => (await api(b.url, 'GET', '/devices', { token: app })).status === 200, 2000);
    const created = await post(a, '/devices', { name: 'boiler' });
    assert.equal(created.status, 201, created.text);
    const answeredAt = Date.now();
    device = created.body;
    // In PostgreSQL when answered: no node's disk alone holds it.
    assert.equal(pg.psql(`SELECT count(*) FROM catalog_rows WHERE tbl = 'devices' AND pk = '["${device.id}"]' AND row IS NOT NULL`, dbName), '1');
    await until('the device at node B', async () => (await api(b.url, 'GET', `/device/${device.id}`, { token: app })).status === 200, 2000);
    t.diagnostic(`device created at node A served by node B after ${Date.now() - answeredAt} ms`);
    const asset = await post(b, `/device/${device.id}/assets`, { name: 't', is: 'sensor', profile: { type: 'number' } });
    assert.equal(asset.status, 201, asset.text);
    await until('the asset at node A', async () => (await api(a.url, 'GET', `/device/${device.id}`, { token: app })).body?.assets?.length === 1, 2000);
    const put = await api(b.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 21.5 } });
    assert.equal(put.status, 200, put.text);
  });

  await t.test('the same asset name created at once on both nodes: exactly one succeeds, the other is told ASSET_EXISTS', async () => {
    for (let round = 0; round < 8; round++) {
      const name = `valve${round}`;
      const body = { name, is: 'actuator', profile: { type: 'boolean' } };
      const answers = await Promise.all([post(a, `/device/${device.id}/assets`, body), post(b, `/device/${device.id}/assets`, body)]);
      const statuses = answers.map((r) => r.status).sort();
      assert.deepEqual(statuses, [201, 400], answers.map((r) => r.text).join(' / '));
      const refused = answers.find((r) => r.status === 400)!;
      assert.equal(refused.body.code, 'ASSET_EXISTS', refused.text);
      assert.equal(pg.psql(`SELECT count(*) FROM catalog_rows WHERE tbl = 'assets' AND row->>'device_id' = '${device.id}' AND row->>'name' = '${name}'`, dbName), '1');
    }
    // Both caches hold the same single asset of each name.
    await until('both nodes list the same assets', async () => {
      const [onA, onB] = await Promise.all([a, b].map(async (n) => ((await api(n.url, 'GET', `/device/${device.id}/assets`, { token: app })).body as Array<{ id: string; name: string }>).map((x) => `${x.name}:${x.id}`).sort()));
      return onA!.length === 9 && JSON.stringify(onA) === JSON.stringify(onB);
    }, 2000);
  });

  await t.test('the same device id created at once on both nodes: one wins, the other is told DEVICE_EXISTS', async () => {
    for (let round = 0; round < 5; round++) {
      const id = `Concurrent${String(round).padStart(14, '0')}`;
      const answers = await Promise.all([post(a, '/devices', { id, name: 'first' }), post(b, '/devices', { id, name: 'second' })]);
      assert.deepEqual(answers.map((r) => r.status).sort(), [201, 400], answers.map((r) => r.text).join(' / '));
      assert.equal(answers.find((r) => r.status === 400)!.body.code, 'DEVICE_EXISTS');
      const winner = answers.find((r) => r.status === 201)!.body as { name: string; token: string };
      // The winner's token is the device's token on both nodes (the loser's never existed).
      await until('the winner served by both nodes', async () => {
        const views = await Promise.all([a, b].map((n) => api(n.url, 'GET', `/device/${id}`, { token: winner.token })));
        return views.every((v) => v.status === 200 && v.body.name === winner.name);
      }, 2000);
    }
  });

  await t.test('central.devicesPerGateway holds across the nodes', async () => {
    const gateway = (await post(a, '/gateways', { name: 'north' })).body as { id: string };
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => post(i % 2 ? a : b, '/devices', { name: `behind-${i}`, gateway: gateway.id })));
    const created = answers.filter((r) => r.status === 201).length;
    assert.equal(created, 4, answers.map((r) => r.status).join(','));
    for (const r of answers.filter((x) => x.status !== 201)) assert.equal(r.body.code, 'GATEWAY_DEVICE_LIMIT', r.text);
    assert.equal(pg.psql(`SELECT count(*) FROM catalog_rows WHERE tbl = 'devices' AND row->>'gateway_id' = '${gateway.id}'`, dbName), '4');
  });

  await t.test('limits.assetsPerDevice holds across the nodes', async () => {
    const crowded = (await post(b, '/devices', { name: 'crowded' })).body as { id: string };
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => post(i % 2 ? a : b, `/device/${crowded.id}/assets`, { name: `a${i}`, is: 'sensor', profile: { type: 'number' } })));
    assert.equal(answers.filter((r) => r.status === 201).length, 50, answers.map((r) => r.status).join(','));
    for (const r of answers.filter((x) => x.status !== 201)) assert.equal(r.body.code, 'TOO_MANY_ASSETS', r.text);
    assert.equal(pg.psql(`SELECT count(*) FROM catalog_rows WHERE tbl = 'assets' AND row->>'device_id' = '${crowded.id}'`, dbName), '50');
  });

  await t.test('PostgreSQL stopped: catalog writes are refused with 503 STORE_UNAVAILABLE and the node\'s cache is unchanged', async () => {
    await sleep(300);
    const before = cachedCatalog(dirs.a);
    await pg.stop('fast');
    try {
      const attempt = async (label: string, call: () => ReturnType<typeof api>) => {
        try {
          return await call();
        } catch (err) {
          throw new Error(`${label}: ${(err as Error).message}`);
        }
      };
      const tries = [
        await attempt('create a device', () => post(a, '/devices', { name: 'refused' })),
        await attempt('create an asset', () => post(a, `/device/${device.id}/assets`, { name: 'refused', is: 'sensor', profile: { type: 'number' } })),
        await attempt('rename a device', () => api(a.url, 'PUT', `/device/${device.id}`, { token: app, json: { name: 'renamed' } })),
        await attempt('delete an asset', () => api(a.url, 'DELETE', `/device/${device.id}/asset/t`, { token: app })),
        await attempt('rotate a device token', () => api(a.url, 'POST', `/device/${device.id}/token`, { token: app })),
        await attempt('create a token', () => post(a, '/tokens', { name: 'refused', scopes: ['read'] })),
        await attempt('create a gateway', () => post(a, '/gateways', { name: 'refused' })),
      ];
      for (const r of tries) {
        assert.equal(r.status, 503, r.text);
        assert.equal(r.body.code, 'STORE_UNAVAILABLE', r.text);
      }
      const fromCli = cli(['device', 'create', '--name', 'refused', '--data', dirs.a], cliEnv);
      assert.equal(fromCli.code, 1, fromCli.stderr);
      assert.match(fromCli.stderr, /STORE_UNAVAILABLE/);
      assert.deepEqual(cachedCatalog(dirs.a), before, 'nothing changed in the node\'s SQLite');
    } finally {
      await pg.start();
    }
    await until('catalog writes taken again', async () => (await post(a, '/devices', { name: 'after' })).status === 201, 15_000);
  });

  await t.test('a node whose data directory is wiped gets the whole catalog back from PostgreSQL; tokens made at the other node work there', async () => {
    const late = (await post(a, '/devices', { name: 'late' })).body as { id: string; token: string };
    await b.stop();
    removeDir(dirs.b);
    b = await start(dirs.b);
    // Ready means caught up: the catalog is there before the node serves.
    assert.equal((await api(b.url, 'GET', `/device/${late.id}`, { token: late.token })).status, 200);
    assert.equal((await api(b.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 22 } })).status, 200);
    assert.equal((await api(b.url, 'GET', '/devices', { token: app })).status, 200);
    // Rebuilt from PostgreSQL alone, the cache is the other node's, row for row.
    await until('both caches the same', async () => JSON.stringify(cachedCatalog(dirs.a)) === JSON.stringify(cachedCatalog(dirs.b)), 2000);
    // And it follows the cluster: a token revoked at node A is refused at the rebuilt node within 2 s.
    assert.equal((await api(a.url, 'POST', `/device/${late.id}/token`, { token: app })).status, 201);
    const revokedAt = Date.now();
    await until('the old token refused at node B', async () => (await api(b.url, 'GET', `/device/${late.id}`, { token: late.token })).status === 401, 2000);
    t.diagnostic(`token rotated at node A refused at the rebuilt node B after ${Date.now() - revokedAt} ms`);
  });
});
