import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, ROOT, api, cli, provision, startDaemon, tempDataDir } from '../helpers/daemon.js';

test('devices, assets and states survive a restart of the daemon', async () => {
  const first = await startDaemon();
  const { device, app } = provision(first.dataDir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
  assert.equal((await api(first.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: { value: 3.5 } })).status, 200);
  const readyLine = first.logs.find((l) => l.includes('"msg":"ready"'))!;
  assert.ok(JSON.parse(readyLine).ports.http > 0, 'the ready line carries the bound ports');
  assert.equal(await first.stop('SIGINT'), 0, 'SIGINT exits 0 too');
  assert.ok(first.logs.some((l) => l.includes('"msg":"stopped"')));

  const second = await startDaemon({ dataDir: first.dataDir });
  try {
    const got = await api(second.url, 'GET', `/device/${device.id}`, { token: app.token });
    assert.equal(got.status, 200);
    assert.equal(got.body.assets[0].state.value, 3.5);
  } finally {
    assert.equal(await second.stop(), 0);
  }
});

test('an invalid configuration exits 2 naming the key and the rule', () => {
  const dir = tempDataDir();
  const file = join(dir, 'bad.json');
  writeFileSync(file, JSON.stringify({ version: 1, mqtt: { port: -1 } }));
  const r = cli(['run', '--config', file, '--data', dir]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /mqtt\.port/);
  assert.match(r.stderr, /minimum/);
  const env = spawnSync(process.execPath, [CLI, 'run', '--data', dir], { cwd: ROOT, env: { ...process.env, OUTPOST_HTTP_PORT: 'x' }, encoding: 'utf8' });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /OUTPOST_HTTP_PORT/);
});

test('the CLI prints readable tables and refuses bad usage with exit 2', () => {
  const dir = tempDataDir();
  const created = cli(['device', 'create', '--name', 'thermo', '--data', dir]);
  assert.equal(created.code, 0);
  assert.match(created.stdout, /device [A-Za-z0-9]{24} created/);
  const id = /device ([A-Za-z0-9]{24})/.exec(created.stdout)![1]!;
  assert.equal(cli(['asset', 'create', id, '--name', 't', '--is', 'sensor', '--profile', '{"type":"number"}', '--data', dir]).code, 0);
  const list = cli(['device', 'list', '--data', dir]);
  assert.match(list.stdout, /^ID\s+NAME\s+ASSETS\s+CREATED/);
  assert.match(list.stdout, /thermo\s+1/);
  const show = cli(['device', 'show', id, '--data', dir]);
  assert.match(show.stdout, /t\s+sensor\s+number/);
  assert.equal(cli(['asset', 'create', id, '--name', 'u', '--is', 'sensor', '--profile', 'nope', '--data', dir]).code, 2);
  assert.equal(cli(['frobnicate', '--data', dir]).code, 2);
  const missing = cli(['device', 'show', 'AAAAAAAAAAAAAAAAAAAAAAAA', '--data', dir]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /not found/);
});

test('503 with Retry-After when the store is full; acknowledged states stay and the daemon keeps serving', async () => {
  const dir = tempDataDir();
  const configFile = join(dir, 'small.json');
  writeFileSync(configFile, JSON.stringify({ version: 1, store: { maxBytes: 256 * 1024 } }));
  const d = await startDaemon({ dataDir: join(dir, 'data'), args: ['--config', configFile], env: { OUTPOST_RATE_LIMIT: '0' } });
  try {
    const { device } = provision(d.dataDir, [{ name: 'log', is: 'sensor', profile: { type: 'string' } }]);
    let full: Awaited<ReturnType<typeof api>> | undefined;
    let stored = 0;
    for (let i = 0; i < 200 && !full; i++) {
      const r = await api(d.url, 'PUT', `/device/${device.id}/asset/log/state`, { token: device.token, json: { value: `${i}:` + 'x'.repeat(4000) } });
      if (r.status === 200) stored++;
      else full = r;
    }
    assert.ok(full, 'the store filled up');
    assert.equal(full.status, 503);
    assert.equal(full.body.code, 'STORAGE_UNAVAILABLE');
    assert.ok(Number(full.headers.get('retry-after')) >= 1);
    assert.ok(stored > 10);
    const health = await api(d.url, 'GET', '/healthz');
    assert.equal(health.status, 200, 'a full store still serves: degraded, not failing');
    assert.equal(health.body.status, 'degraded');
    assert.match(health.body.reason, /store: writes refused for lack of space .*SQLITE_FULL/);
    assert.equal(health.body.store.maxBytes, 256 * 1024);
    // The log is written asynchronously (pino): wait for the line rather than expect it at once.
    const warned = () => d.logs.some((l) => l.includes('"level":40') && l.includes('raise store.maxBytes'));
    for (let i = 0; i < 100 && !warned(); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(warned(), 'one warning says what to do:\n' + d.logs.join('\n'));
    const latest = await api(d.url, 'GET', `/device/${device.id}/asset/log/state`, { token: device.token });
    assert.equal(latest.status, 200, 'reads still work');
    assert.ok(latest.body.state.value.startsWith(`${stored - 1}:`), 'the last acknowledged state is the latest');
    const history = await api(d.url, 'GET', `/device/${device.id}/asset/log/states?limit=1000`, { token: device.token });
    assert.equal(history.body.data.length, stored, 'every acknowledged state is stored, nothing else');
  } finally {
    assert.equal(await d.stop(), 0);
  }
});
