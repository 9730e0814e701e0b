// The same behaviour on both engines (docs/scale-out.md): the single-machine central's end-to-end
// test (test/sync/central.test.ts: the gateway catalog, a central outage under continuous ingest,
// kill -9 of a gateway mid-drain, commands to an online and an offline gateway, what a gateway
// token may not touch) runs again, unchanged, against a central node on PostgreSQL; and one script
// of state writes and reads gets the same answers from a central on SQLite and one on PostgreSQL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { ROOT, api, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';

test('test/sync/central.test.ts passes against a central on PostgreSQL', { timeout: 400_000 }, async (t) => {
  const pg = await startPostgres();
  t.after(() => pg.dispose());
  const url = await pg.createDatabase();
  const env: NodeJS.ProcessEnv = { ...process.env, OUTPOST_TEST_POSTGRES_URL: url };
  delete env.NODE_TEST_CONTEXT; // a child test run of its own, reporting here
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', 'test/sync/central.test.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  assert.equal(code, 0, output.slice(-6000));
  // It did run against PostgreSQL: the states are there.
  assert.ok(Number(pg.psql('SELECT count(*) FROM states', url.split('/').pop())) > 1000, 'states stored in PostgreSQL');
  assert.match(output, /pass [1-9]/);
});

/**
 * One central's answers to a fixed script of state writes and reads: latest state, history pages
 * walked with their cursors (across a month boundary, ties on `at`, a from/to range, provenance),
 * the errors, the asset views and the device list's last seen. Ids the two
 * engines choose differently (device, asset, token) are replaced by names; cursors are kept as
 * they are: on a fresh store both number states 1, 2, 3… in the order they were stored.
 */
async function statesTranscript(node: RunningDaemon, env: Record<string, string> = {}): Promise<unknown[]> {
  const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,admin'], node.dataDir, env).token;
  const created = await api(node.url, 'POST', '/devices', { token: admin, json: { name: 'meter' } });
  assert.equal(created.status, 201, created.text);
  const device = created.body as { id: string; token: string };
  for (const name of ['t', 'u']) assert.equal((await api(node.url, 'POST', `/device/${device.id}/assets`, { token: admin, json: { name, is: 'sensor', profile: { type: 'number' } } })).status, 201);
  const assetIds = new Map<string, string>();
  const names = (value: unknown): unknown => JSON.parse(JSON.stringify(value).replaceAll(device.id, '<device>').replace(/"id":"[^"]+"/g, (m) => (assetIds.has(m) ? assetIds.get(m)! : m)));
  const out: unknown[] = [];
  const record = async (label: string, method: 'GET' | 'PUT', path: string, json?: unknown) => {
    const r = await api(node.url, method, path, { token: method === 'PUT' ? device.token : admin, json });
    out.push({ label, status: r.status, body: r.body });
    return r;
  };
  await record('no state yet', 'GET', `/device/${device.id}/asset/t/state`);
  const nov1 = Date.UTC(2026, 10, 1);
  // Across October and November, ties on `at`, one state later in time written first.
  const script: Array<[string, number, number]> = [
    ['t', nov1 + 3_600_000, 1],
    ['t', nov1 - 2 * 86_400_000, 2],
    ['t', nov1 - 1, 3],
    ['u', nov1 - 1, 40],
    ['t', nov1 - 1, 4],
    ['t', nov1, 5],
    ['t', nov1 + 1, 6],
    ['t', nov1 - 1, 7],
    ['u', nov1 + 5, 41],
  ];
  for (const [asset, at, value] of script) await record(`put ${asset} ${value}`, 'PUT', `/device/${device.id}/asset/${asset}/state`, { value, at: new Date(at).toISOString() });
  const view = await api(node.url, 'GET', `/device/${device.id}`, { token: admin });
  const idOf = new Map((view.body.assets as Array<{ id: string; name: string }>).map((a) => [a.name, a.id]));
  for (const [name, id] of idOf) assetIds.set(`"id":"${id}"`, `"id":"<asset ${name}>"`);
  out.push({ label: 'device view', body: ({ ...view.body, link: undefined, managed: undefined, createdOn: undefined, updatedOn: undefined, assets: view.body.assets.map((a: object) => ({ ...a, createdOn: undefined, updatedOn: undefined })) }) });
  await record('latest t', 'GET', `/device/${device.id}/asset/t/state`);
  await record('latest u by asset id', 'GET', `/asset/${idOf.get('u')}/state`);
  const walk = async (label: string, query: string) => {
    let next: string | null = '';
    for (let page = 0; next !== null && page < 20; page++) {
      const r = await record(`${label} page ${page}`, 'GET', `/device/${device.id}/asset/t/states?${query}${next ? `&cursor=${next}` : ''}`);
      next = r.status === 200 ? (r.body.next as string | null) : null;
    }
  };
  await walk('all by 3', 'limit=3');
  await walk('one month boundary by 2', `limit=2&from=${new Date(nov1 - 1).toISOString()}&to=${new Date(nov1).toISOString()}`);
  await walk('with provenance', 'limit=4&provenance=1');
  await record('a cursor this service did not issue', 'GET', `/device/${device.id}/asset/t/states?cursor=bm9wZQ`);
  await record('a bad limit', 'GET', `/device/${device.id}/asset/t/states?limit=0`);
  await record('a bad from', 'GET', `/device/${device.id}/asset/t/states?from=yesterday`);
  await record('an unknown asset', 'GET', `/device/${device.id}/asset/nope/states`);
  const list = await api(node.url, 'GET', '/devices', { token: admin });
  out.push({ label: 'last seen', body: (list.body as Array<{ id: string; lastSeen: string | null }>).filter((d) => d.id === device.id).map((d) => d.lastSeen) });
  return out.map(names);
}

test('the same states answers on SQLite and on PostgreSQL: latest, history pages and cursors across a month, errors, views', { timeout: 120_000 }, async (t) => {
  const pg = await startPostgres();
  const dirs = [tempDataDir(), tempDataDir()];
  const single = await startDaemon({ dataDir: dirs[0], env: { OUTPOST_ROLE: 'central', OUTPOST_RATE_LIMIT: '0' } });
  const pgEnv = { OUTPOST_ROLE: 'central', OUTPOST_RATE_LIMIT: '0', OUTPOST_POSTGRES_URL: await pg.createDatabase() };
  const node = await startDaemon({ dataDir: dirs[1], env: pgEnv });
  t.after(async () => {
    await Promise.all([single.stop(), node.stop()]);
    await pg.dispose();
    for (const d of dirs) removeDir(d);
  });
  const onSqlite = await statesTranscript(single);
  const onPostgres = await statesTranscript(node, pgEnv);
  assert.deepEqual(onPostgres, onSqlite);
  // The script did reach what it means to test: several pages, a refused cursor, states of both months.
  const text = JSON.stringify(onSqlite);
  assert.match(text, /"label":"all by 3 page 2","status":200/);
  assert.match(text, /"label":"a cursor this service did not issue","status":400/);
  assert.match(text, /2026-10-31T23:59:59.999Z/);
  assert.match(text, /"label":"no state yet","status":404/);
});
