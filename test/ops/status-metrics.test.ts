// `outpost status` from the running daemon (control socket) and the documented /metrics list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { api, cli, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { connectClient } from '../mqtt/helpers.js';

test('outpost status asks the running daemon over its control socket', async () => {
  const daemon = await startDaemon();
  try {
    const { device } = provision(daemon.dataDir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    assert.equal((await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: { value: 1 } })).status, 200);
    const socket = join(daemon.dataDir, 'outpost.sock');
    assert.ok(statSync(socket).isSocket());
    assert.equal(statSync(socket).mode & 0o777, 0o600, 'only the daemon user (and root) may ask');

    const r = cli(['status', '--json', '--data', daemon.dataDir]);
    assert.equal(r.code, 0, r.stderr);
    const status = JSON.parse(r.stdout);
    for (const key of ['version', 'uptimeSeconds', 'devices', 'states', 'radio', 'upstream', 'lastUplinkAt']) assert.ok(key in status, key);
    assert.equal(status.devices, 1);
    assert.equal(status.states.stored, 1);
    assert.equal(status.states.acceptedSinceStart, 1);
    assert.equal(status.radio.devices, 0);
    assert.equal(status.radio.sources[0].source, 'gwmp');
    assert.equal(status.upstream, null);
    assert.ok(Math.abs(Date.parse(status.lastUplinkAt) - Date.now()) < 60_000);
    assert.deepEqual(status.ports, { http: daemon.httpPort, mqtt: daemon.mqttPort, gwmp: daemon.gwmpPort, basicStation: daemon.basicStationPort });
    assert.equal(status.pid, daemon.proc.pid);

    const human = cli(['status', '--data', daemon.dataDir]);
    assert.equal(human.code, 0);
    assert.match(human.stdout, /devices +1/);
    assert.match(human.stdout, /upstream +not configured/);
  } finally {
    assert.equal(await daemon.stop(), 0);
  }
  assert.throws(() => statSync(join(daemon.dataDir, 'outpost.sock')), 'the socket is removed on stop');
  const none = cli(['status', '--data', daemon.dataDir]);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /no daemon runs on/);
  removeDir(daemon.dataDir);
});

test('every series on /metrics is in the documented list of docs/operations.md', async () => {
  const daemon = await startDaemon();
  try {
    const { device } = provision(daemon.dataDir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const client = await connectClient(daemon.mqttPort, device.token);
    await client.client.publishAsync(`device/${device.id}/asset/level/state`, '{"value": 2}', { qos: 1 });
    await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: { value: 3 } });
    await client.end();
    const res = await api(daemon.url, 'GET', '/metrics');
    assert.equal(res.status, 200);
    const names = [...new Set(res.text.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]!))];
    for (const expected of ['outpost_event_loop_lag_seconds', 'process_resident_memory_bytes', 'outpost_store_bytes', 'outpost_http_requests_total', 'outpost_mqtt_connections', 'outpost_states_ingested_total', 'outpost_build_info']) {
      assert.ok(names.includes(expected), `${expected} is exposed`);
    }
    const lag = res.text.match(/^outpost_event_loop_lag_seconds\{quantile="0.99"\} ([0-9.e-]+)$/m);
    assert.ok(lag && Number(lag[1]) >= 0 && Number(lag[1]) < 10, 'event-loop lag is a number of seconds');
    assert.match(res.text, /^outpost_states_ingested_total 2$/m);
    assert.match(res.text, /# TYPE outpost_states_ingested_total counter/);

    const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('## Metrics'));
    for (const name of names) assert.ok(section.includes(`\`${name}\``), `${name} is listed in docs/operations.md, "Metrics"`);
  } finally {
    await daemon.stop();
    removeDir(daemon.dataDir);
  }
});

test('every series the source code registers is in the documented list (also those of optional parts)', () => {
  const src = new URL('../../src/', import.meta.url);
  const files = (readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
  const registered = new Set<string>();
  for (const file of files) {
    const text = readFileSync(new URL(file, src), 'utf8');
    for (const m of text.matchAll(/\.(?:counter|gauge|histogram|counterFrom)\(\s*'((?:outpost|process)_[a-z0-9_]+)'/g)) registered.add(m[1]!);
  }
  assert.ok(registered.size > 20, `found the registrations (${registered.size})`);
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('## Metrics'));
  for (const name of registered) assert.ok(section.includes(`\`${name}\``), `${name} is listed in docs/operations.md, "Metrics"`);
});
