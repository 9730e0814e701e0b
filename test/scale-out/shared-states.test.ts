// Every central node reads states from PostgreSQL (docs/scale-out.md, "How the nodes share"): a
// state PUT at node A is in node B's very next answer (no copy, no lag), pages and cursors are
// interchangeable between nodes, a node keeps no states in its own SQLite file, and a node whose
// data directory was deleted answers the whole history, latest states, retained feed, status and
// the CLI's views at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { api, cli, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

function localStates(dataDir: string): number {
  const db = new Database(join(dataDir, 'outpost.db'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT (SELECT count(*) FROM states) + (SELECT count(*) FROM latest_states)').pluck().get() as number;
  } finally {
    db.close();
  }
}

/** Every page of an asset's history at a node, each page asked with the previous page's cursor. */
async function allPages(node: RunningDaemon, token: string, path: string, limit: number): Promise<Array<{ data: unknown[]; next: string | null }>> {
  const pages = [];
  let next: string | null = '';
  while (next !== null && pages.length < 100) {
    const r = await api(node.url, 'GET', `${path}?limit=${limit}${next ? `&cursor=${next}` : ''}`, { token });
    assert.equal(r.status, 200, r.text);
    pages.push(r.body);
    next = r.body.next;
  }
  return pages;
}

test('central nodes read states from PostgreSQL', { timeout: 180_000 }, async (t) => {
  const pg = await startPostgres();
  const url = await pg.createDatabase();
  const dirs = { a: tempDataDir(), b: tempDataDir(), fresh: tempDataDir(), trim: tempDataDir() };
  const env = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url, OUTPOST_RATE_LIMIT: '0' };
  const a = await startDaemon({ dataDir: dirs.a, env });
  let b = await startDaemon({ dataDir: dirs.b, env });
  t.after(async () => {
    await Promise.all([a.stop(), b.stop()]);
    await pg.dispose();
    for (const d of Object.values(dirs)) removeDir(d);
  });
  const app = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,admin'], dirs.a, env).token;
  await until('the token at node B', async () => (await api(b.url, 'GET', '/devices', { token: app })).status === 200, 10_000);
  const created = await api(a.url, 'POST', '/devices', { token: app, json: { name: 'tank' } });
  assert.equal(created.status, 201, created.text);
  const device = created.body as { id: string; token: string };
  assert.equal((await api(a.url, 'POST', `/device/${device.id}/assets`, { token: app, json: { name: 'level', is: 'sensor', profile: { type: 'number' } } })).status, 201);
  await until('the asset at node B', async () => (await api(b.url, 'GET', `/device/${device.id}/asset/level`, { token: app })).status === 200, 10_000);
  const statePath = `/device/${device.id}/asset/level/state`;
  const historyPath = `/device/${device.id}/asset/level/states`;

  await t.test('a state PUT at one node is in the other node\'s next answer: latest, history, asset view', async () => {
    for (let i = 0; i < 10; i++) {
      const [writer, reader] = i % 2 === 0 ? [a, b] : [b, a];
      const put = await api(writer.url, 'PUT', statePath, { token: device.token, json: { value: i } });
      assert.equal(put.status, 200, put.text);
      // No waiting: the reader asks right after the writer answered.
      const latest = await api(reader.url, 'GET', statePath, { token: app });
      assert.equal(latest.body.state.value, i, `state ${i} at the other node at once`);
      const history = await api(reader.url, 'GET', `${historyPath}?limit=1`, { token: app });
      assert.equal(history.body.data[0].value, i);
      const view = await api(reader.url, 'GET', `/device/${device.id}/asset/level`, { token: app });
      assert.equal(view.body.state.value, i);
    }
    // Neither node stored a state in its own SQLite file.
    assert.equal(localStates(dirs.a), 0);
    assert.equal(localStates(dirs.b), 0);
  });

  await t.test('pages and cursors are the same at both nodes, and a cursor from one node works at the other', async () => {
    const start = Date.UTC(2026, 9, 31, 23, 0);
    // 40 states an hour apart across the October/November boundary, written at both nodes.
    for (let i = 0; i < 40; i++) {
      const node = i % 2 ? a : b;
      const r = await api(node.url, 'PUT', statePath, { token: device.token, json: { value: 100 + i, at: new Date(start + (i - 20) * 600_000).toISOString() } });
      assert.equal(r.status, 200, r.text);
    }
    const atA = await allPages(a, app, historyPath, 7);
    const atB = await allPages(b, app, historyPath, 7);
    assert.deepEqual(atB, atA);
    assert.equal(atA.flatMap((p) => p.data).length, 50);
    const second = await api(b.url, 'GET', `${historyPath}?limit=7&cursor=${atA[0]!.next}`, { token: app });
    assert.deepEqual(second.body, atA[1]);
    const devicesA = (await api(a.url, 'GET', '/devices', { token: app })).body;
    const devicesB = (await api(b.url, 'GET', '/devices', { token: app })).body;
    assert.deepEqual(devicesB, devicesA);
  });

  await t.test("a node whose data directory was deleted answers the whole history, latest state, retained feed and status at once", async () => {
    const before = await allPages(a, app, historyPath, 1000);
    const latest = (await api(a.url, 'GET', statePath, { token: app })).body;
    await b.stop();
    removeDir(dirs.b);
    b = await startDaemon({ dataDir: dirs.fresh, env });
    assert.deepEqual(await allPages(b, app, historyPath, 1000), before);
    assert.deepEqual((await api(b.url, 'GET', statePath, { token: app })).body, latest);
    // The retained feed message is rebuilt from PostgreSQL's latest states.
    const subscriber = await mqtt.connectAsync(`mqtt://127.0.0.1:${b.mqttPort}`, { username: app, reconnectPeriod: 0 });
    try {
      const retained = new Promise<{ value: unknown; retain: boolean }>((resolve) =>
        subscriber.on('message', (_topic, payload, packet) => resolve({ value: JSON.parse(payload.toString()).value, retain: packet.retain })),
      );
      await subscriber.subscribeAsync(`device/${device.id}/asset/level/feed`, { qos: 1 });
      assert.deepEqual(await retained, { value: latest.state.value, retain: true });
    } finally {
      await subscriber.endAsync();
    }
    const status = cliJson<{ states: { stored: number }; lastUplinkAt: string | null }>(['status', '--json'], dirs.fresh);
    assert.equal(status.states.stored, 50);
    assert.ok(status.lastUplinkAt !== null);
    assert.equal(localStates(dirs.fresh), 0);
    // The CLI on a node's data directory shows PostgreSQL's states too.
    const cliEnv = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url };
    const got = cli(['state', 'get', device.id, 'level', '--json', '--data', dirs.fresh], cliEnv);
    assert.equal(got.code, 0, got.stderr);
    assert.deepEqual(JSON.parse(got.stdout).state, latest.state);
    const shown = cli(['device', 'show', device.id, '--json', '--data', dirs.fresh], cliEnv);
    assert.equal(shown.code, 0, shown.stderr);
    assert.deepEqual(JSON.parse(shown.stdout).assets[0].state, latest.state);
    const listed = cli(['asset', 'list', device.id, '--json', '--data', dirs.fresh], cliEnv);
    assert.deepEqual(JSON.parse(listed.stdout)[0].state, latest.state);
    const devices = cli(['device', 'list', '--json', '--data', dirs.fresh], cliEnv);
    assert.deepEqual(JSON.parse(devices.stdout).find((d: { id: string }) => d.id === device.id).assets[0].state, latest.state);
  });

  await t.test('a device deleted at one node takes its history and latest states out of PostgreSQL, as on SQLite', async () => {
    const assetId = (await api(a.url, 'GET', `/device/${device.id}/asset/level`, { token: app })).body.id as string;
    const held = () => pg.psql(`SELECT (SELECT count(*) FROM states WHERE asset_id = '${assetId}') + (SELECT count(*) FROM latest_states WHERE asset_id = '${assetId}')`, url.split('/').pop());
    assert.equal(held(), '51');
    assert.equal((await api(b.url, 'DELETE', `/device/${device.id}`, { token: app })).status, 204);
    await until('the states gone from PostgreSQL', () => held() === '0', 10_000);
  });

  await t.test('limits.historyPerAsset: the node that took the states trims the asset in PostgreSQL', async () => {
    const config = join(dirs.trim, 'config.json');
    writeFileSync(config, JSON.stringify({ version: 1, limits: { historyPerAsset: 5 }, store: { pruneIntervalSeconds: 1 } }));
    const trimming = await startDaemon({ dataDir: dirs.trim, args: ['--config', config], env });
    try {
      const meter = (await api(a.url, 'POST', '/devices', { token: app, json: { name: 'meter' } })).body as { id: string; token: string };
      assert.equal((await api(a.url, 'POST', `/device/${meter.id}/assets`, { token: app, json: { name: 'kwh', is: 'sensor', profile: { type: 'number' } } })).status, 201);
      await until('the asset at the trimming node', async () => (await api(trimming.url, 'GET', `/device/${meter.id}/asset/kwh`, { token: app })).status === 200, 10_000);
      for (let i = 0; i < 12; i++) assert.equal((await api(trimming.url, 'PUT', `/device/${meter.id}/asset/kwh/state`, { token: meter.token, json: { value: i } })).status, 200);
      const kept = async () => ((await api(a.url, 'GET', `/device/${meter.id}/asset/kwh/states`, { token: app })).body.data as Array<{ value: number }>).map((s) => s.value);
      await until('five states left', async () => (await kept()).length === 5, 10_000);
      assert.deepEqual(await kept(), [11, 10, 9, 8, 7]);
      // Deleted with the CLI: its states go too.
      const kwh = (await api(a.url, 'GET', `/device/${meter.id}/asset/kwh`, { token: app })).body.id as string;
      const deleted = cli(['device', 'delete', meter.id, '--data', dirs.a], { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url });
      assert.equal(deleted.code, 0, deleted.stderr);
      assert.equal(pg.psql(`SELECT (SELECT count(*) FROM states WHERE asset_id = '${kwh}') + (SELECT count(*) FROM latest_states WHERE asset_id = '${kwh}')`, url.split('/').pop()), '0');
    } finally {
      await trimming.stop();
    }
  });
});
