import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, api, cli, provision, startDaemon, type RunningDaemon } from '../helpers/daemon.js';

const ENV_ASSETS = [
  { name: 'temperature', is: 'sensor', profile: { type: 'number', minimum: -40, maximum: 85 } },
  { name: 'humidity', is: 'sensor', profile: { type: 'number', minimum: 0, maximum: 100 } },
  { name: 'battery', is: 'sensor', profile: { type: 'number' } },
];
const envDocument = readFileSync(join(ROOT, 'abcl', 'environment-sensor.abcl.json'), 'utf8');

describe('device codecs over HTTP', () => {
  let d: RunningDaemon;
  let device: { id: string; token: string };
  let app: { id: string; token: string };

  before(async () => {
    d = await startDaemon();
    ({ device, app } = provision(d.dataDir, ENV_ASSETS));
  });
  after(async () => {
    await d.stop();
  });

  test('an admin sets an ABCL codec; a custom binary device state is decoded, stored and kept raw', async () => {
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'abcl', document: envDocument } } });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.body.uplink.format, 'abcl');
    assert.ok(Array.isArray(set.body.warnings));
    const own = await api(d.url, 'GET', `/device/${device.id}/codec`, { token: device.token });
    assert.equal(own.status, 200, 'the device token may read its codec');
    assert.equal(own.body.uplink.format, 'abcl');
    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: device.token, json: { uplink: { format: 'cbor' } } })).status, 403);

    const put = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from('66085B100E', 'hex'), contentType: 'application/octet-stream' });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.states.temperature.value, 21.5);
    assert.equal(put.body.states.humidity.value, 45.5);
    assert.equal(put.body.states.battery.value, 3.6);
    const stored = await api(d.url, 'GET', `/device/${device.id}/asset/temperature/state`, { token: device.token });
    assert.equal(stored.body.state.value, 21.5);
    const uplinks = await api(d.url, 'GET', `/device/${device.id}/uplinks?limit=5`, { token: device.token });
    assert.equal(uplinks.status, 200);
    const version = uplinks.body.data[0].codec;
    assert.match(version, /^abcl:[0-9a-f]{12}$/);
    assert.deepEqual(uplinks.body.data[0], { id: uplinks.body.data[0].id, at: uplinks.body.data[0].at, payload: '66085B100E', source: 'http', decoded: true, codec: version });
  });

  test('a document that does not load is 422 CODEC_INVALID with every problem, and the old codec stays', async () => {
    const bad = await api(d.url, 'PUT', `/device/${device.id}/codec`, {
      token: app.token,
      json: { uplink: { format: 'abcl', document: '{"sense": [{"asset": "x", "value": {"byte": -1}}, {"asset": 5}]}' } },
    });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.code, 'CODEC_INVALID');
    assert.ok(bad.body.errors.length >= 2, JSON.stringify(bad.body.errors));
    const still = await api(d.url, 'GET', `/device/${device.id}/codec`, { token: app.token });
    assert.equal(still.body.uplink.format, 'abcl');
    const put = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from('2EFBC8540B', 'hex'), contentType: 'application/octet-stream' });
    assert.equal(put.body.states.temperature.value, -12.34, 'the previous document still decodes');
  });

  test('a JS codec that throws refuses the uplink but keeps its raw bytes', async () => {
    const script = `function decodeUplink(input) { if (input.bytes[0] === 0xff) throw new Error('bad frame'); return { data: { battery: input.bytes[0] / 10 } }; }`;
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script } } });
    assert.equal(set.status, 200, set.text);
    const ok = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from([33]), contentType: 'application/octet-stream' });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.states.battery.value, 3.3);
    const failed = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from([0xff, 1]), contentType: 'application/octet-stream' });
    assert.equal(failed.status, 422);
    assert.equal(failed.body.code, 'DECODE_FAILED');
    const uplinks = await api(d.url, 'GET', `/device/${device.id}/uplinks`, { token: app.token });
    assert.equal(uplinks.body.data[0].payload, 'FF01');
    assert.equal(uplinks.body.data[0].decoded, false);
  });

  test('the CLI sets a codec from a file under abcl/ and the running daemon uses it at once', async () => {
    const r = cli(['device', 'codec', device.id, '--uplink', 'abcl', '--file', join(ROOT, 'abcl', 'environment-sensor.abcl.json'), '--data', d.dataDir]);
    assert.equal(r.code, 0, r.stderr);
    const bad = cli(['device', 'codec', device.id, '--uplink', 'abcl', '--file', join(ROOT, 'package.json'), '--data', d.dataDir]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /CODEC_INVALID/);
    let status = 0;
    let body: any;
    // The daemon recompiles after noticing the CLI's commit (data_version poll, 250 ms).
    for (let i = 0; i < 40 && status !== 200; i++) {
      await new Promise((res) => setTimeout(res, 50));
      const put = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from('66085B100E', 'hex'), contentType: 'application/octet-stream' });
      status = put.status;
      body = put.body;
    }
    assert.equal(status, 200);
    assert.equal(body.states.humidity.value, 45.5);
  });

  test('codec settings may name a file under abcl/ by reference', async () => {
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'abcl', file: 'environment-sensor.abcl.json' } } });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.body.uplink.file, 'environment-sensor.abcl.json');
    const put = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from('66085B100E', 'hex'), contentType: 'application/octet-stream' });
    assert.equal(put.body.states.temperature.value, 21.5);
    const missing = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'abcl', file: 'no-such.abcl.json' } } });
    assert.equal(missing.status, 422);
    assert.equal(missing.body.code, 'CODEC_INVALID');
  });

  test('a JS codec that keeps timing out is disabled and reported, while the daemon keeps serving', async () => {
    const script = 'function decodeUplink(input) { for (;;) {} }';
    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script } } })).status, 200);
    for (let i = 0; i < 6; i++) {
      const r = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.from([i]), contentType: 'application/octet-stream' });
      assert.equal(r.status, 422);
      assert.equal(r.body.code, 'DECODE_FAILED');
      assert.equal((await api(d.url, 'GET', '/healthz')).status, 200);
    }
    const codec = await api(d.url, 'GET', `/device/${device.id}/codec`, { token: device.token });
    assert.equal(typeof codec.body.disabled, 'string', JSON.stringify(codec.body));
    const reset = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'cbor' } } });
    assert.equal(reset.status, 200);
    assert.equal((await api(d.url, 'GET', `/device/${device.id}/codec`, { token: device.token })).body.disabled, undefined);
  });

  test('a device without a binary codec refuses octet-stream with a clear error', async () => {
    const fresh = await api(d.url, 'POST', '/devices', { token: app.token, json: { name: 'plain' } });
    const r = await api(d.url, 'PUT', `/device/${fresh.body.id}/state`, { token: fresh.body.token, body: Buffer.from([1, 2]), contentType: 'application/octet-stream' });
    assert.equal(r.status, 422);
    assert.equal(r.body.code, 'DECODE_FAILED');
    assert.match(r.body.error, /no custom binary codec/);
  });
});
