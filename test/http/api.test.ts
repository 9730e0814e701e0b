import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { encode as encodeCbor } from 'cbor-x';
import { api, cli, cliJson, provision, startDaemon, type RunningDaemon } from '../helpers/daemon.js';

const ASSETS = [
  { name: 'counter', is: 'sensor', profile: { type: 'integer', minimum: 0 } },
  { name: 'temp', is: 'sensor', profile: { type: 'number', minimum: -40, maximum: 85, unit: '°C' } },
  { name: 'mode', is: 'sensor', profile: { type: 'string', enum: ['auto', 'manual'] } },
  { name: 'geo', is: 'sensor', profile: { type: 'object', properties: { lat: { type: 'number' }, lng: { type: 'number' } }, required: ['lat', 'lng'] } },
  { name: 'switch', is: 'actuator', profile: { type: 'boolean' } },
];

describe('HTTP API against the compiled daemon', () => {
  let d: RunningDaemon;
  let device: { id: string; token: string };
  let app: { id: string; token: string };
  let other: { id: string; token: string };
  const url = () => d.url;

  before(async () => {
    d = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
    ({ device, app } = provision(d.dataDir, ASSETS));
    other = cliJson(['device', 'create', '--name', 'other'], d.dataDir);
  });
  after(async () => {
    assert.equal(await d.stop(), 0, 'SIGTERM exits 0');
  });

  test('GET /healthz reports the version without a token; /metrics is Prometheus text', async () => {
    const h = await api(url(), 'GET', '/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.body.status, 'ok');
    assert.match(h.body.version, /^\d+\.\d+\.\d+/);
    const m = await api(url(), 'GET', '/metrics');
    assert.equal(m.status, 200);
    assert.match(m.headers.get('content-type')!, /text\/plain/);
    assert.match(m.text, /# TYPE outpost_http_requests_total counter/);
    assert.match(m.text, /outpost_store_bytes \d+/);
    assert.match(m.text, /outpost_states_ingested_total \d+/);
  });

  test('GET /device/<id> returns the device with its assets, as the SDKs expect', async () => {
    const r = await api(url(), 'GET', `/device/${device.id}`, { token: device.token });
    assert.equal(r.status, 200);
    assert.equal(r.body.id, device.id);
    for (const key of ['name', 'title', 'description', 'createdOn', 'updatedOn', 'assets']) assert.ok(key in r.body, key);
    assert.deepEqual(r.body.assets.map((a: { name: string }) => a.name).sort(), ASSETS.map((a) => a.name).sort());
    const counter = r.body.assets.find((a: { name: string }) => a.name === 'counter');
    assert.deepEqual(Object.keys(counter).sort(), ['createdOn', 'description', 'deviceId', 'id', 'is', 'name', 'profile', 'state', 'title', 'updatedOn']);
    assert.match(counter.id, /^[A-Za-z0-9]{24}$/);
  });

  test('POST /device/<id>/assets creates (201, Location) with case-insensitive keys; a duplicate is 400 ASSET_EXISTS', async () => {
    const body = { Name: 'humidity', Is: 'sensor', Profile: { type: 'number' }, Title: null, Description: null };
    const r = await api(url(), 'POST', `/device/${device.id}/assets`, { token: device.token, json: body });
    assert.equal(r.status, 201);
    assert.equal(r.body.name, 'humidity');
    assert.equal(r.body.is, 'sensor');
    assert.equal(r.body.state, null);
    assert.equal(r.headers.get('location'), `/device/${device.id}/asset/humidity`);
    const dup = await api(url(), 'POST', `/device/${device.id}/assets`, { token: device.token, json: body });
    assert.equal(dup.status, 400);
    assert.equal(dup.body.code, 'ASSET_EXISTS');
    assert.deepEqual(Object.keys(dup.body).sort(), ['code', 'error', 'status']);
    assert.equal(dup.body.status, 400);
    const list = await api(url(), 'GET', `/device/${device.id}/assets`, { token: device.token });
    assert.equal(list.status, 200);
    assert.ok(list.body.some((a: { name: string }) => a.name === 'humidity'));
  });

  test('PUT and DELETE /device/<id>/asset/<name>: a device token creates, updates and deletes its own assets', async () => {
    const created = await api(url(), 'PUT', `/device/${device.id}/asset/9`, { token: device.token, json: { profile: { type: 'integer' } } });
    assert.equal(created.status, 201);
    assert.equal(created.body.is, 'sensor', 'is defaults to sensor');
    const updated = await api(url(), 'PUT', `/device/${device.id}/asset/9`, { token: device.token, json: { title: 'Nine', profile: { type: 'number' } } });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.title, 'Nine');
    assert.equal(updated.body.profile.type, 'number');
    assert.equal(updated.body.is, 'sensor', 'is unchanged on update');
    const mismatch = await api(url(), 'PUT', `/device/${device.id}/asset/9`, { token: device.token, json: { name: '10', profile: { type: 'number' } } });
    assert.equal(mismatch.status, 400);
    const got = await api(url(), 'GET', `/device/${device.id}/asset/9`, { token: device.token });
    assert.equal(got.status, 200);
    assert.equal(got.body.name, '9');
    const byId = await api(url(), 'GET', `/asset/${got.body.id}`, { token: app.token });
    assert.equal(byId.body.name, '9');
    const del = await api(url(), 'DELETE', `/device/${device.id}/asset/9`, { token: device.token });
    assert.equal(del.status, 204);
    assert.equal((await api(url(), 'GET', `/device/${device.id}/asset/9`, { token: device.token })).status, 404);
  });

  test('PUT asset state by name and by id; GET returns the latest; timestamps in any fraction and zone', async () => {
    const put = await api(url(), 'PUT', `/device/${device.id}/asset/counter/state`, { token: device.token, json: { value: 5, at: '2025-06-01T00:00:00Z' } });
    assert.equal(put.status, 200);
    assert.equal(put.body.state.value, 5);
    assert.equal(put.body.state.at, '2025-06-01T00:00:00.000Z');
    const receiveTime = await api(url(), 'PUT', `/device/${device.id}/asset/mode/state`, { token: device.token, json: { value: 'manual' } });
    assert.match(receiveTime.body.state.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.ok(Math.abs(Date.parse(receiveTime.body.state.at) - Date.now()) < 60_000, 'a missing at is the receive time');
    const assetId = put.body.id;
    const byId = await api(url(), 'PUT', `/asset/${assetId}/state`, { token: device.token, json: { value: 6, at: '2026-01-01T01:00:00.123456789+01:00' } });
    assert.equal(byId.status, 200);
    assert.equal(byId.body.state.at, '2026-01-01T00:00:00.123Z');
    const got = await api(url(), 'GET', `/device/${device.id}/asset/counter/state`, { token: device.token });
    assert.deepEqual(got.body, { id: assetId, state: { value: 6, at: '2026-01-01T00:00:00.123Z' } });
    const older = await api(url(), 'PUT', `/device/${device.id}/asset/counter/state`, { token: device.token, json: { Value: 7, At: '2020-01-01T00:00:00Z' } });
    assert.equal(older.status, 200, 'keys are case-insensitive');
    const latest = await api(url(), 'GET', `/asset/${assetId}/state`, { token: app.token });
    assert.equal(latest.body.state.value, 6, 'the latest is the greatest at, not the last received');
    const obj = await api(url(), 'PUT', `/device/${device.id}/asset/geo/state`, { token: device.token, json: { value: { lat: 51.2, lng: 4.4 } } });
    assert.equal(obj.status, 200);
  });

  test('GET .../states pages newest first with from/to/limit and a cursor', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await api(url(), 'PUT', `/device/${device.id}/asset/temp/state`, { token: device.token, json: { value: 20 + i, at: `2026-01-01T00:00:0${i}Z` } });
      assert.equal(r.status, 200);
    }
    const first = await api(url(), 'GET', `/device/${device.id}/asset/temp/states?limit=2`, { token: device.token });
    assert.deepEqual(first.body.data.map((s: { value: number }) => s.value), [24, 23]);
    assert.ok(first.body.next);
    const second = await api(url(), 'GET', `/device/${device.id}/asset/temp/states?limit=2&cursor=${first.body.next}`, { token: device.token });
    assert.deepEqual(second.body.data.map((s: { value: number }) => s.value), [22, 21]);
    const ranged = await api(url(), 'GET', `/device/${device.id}/asset/temp/states?from=2026-01-01T00:00:01Z&to=2026-01-01T00:00:02Z`, { token: device.token });
    assert.deepEqual(ranged.body.data.map((s: { value: number }) => s.value), [22, 21]);
    assert.equal(ranged.body.next, null);
    const bad = await api(url(), 'GET', `/device/${device.id}/asset/temp/states?limit=0`, { token: device.token });
    assert.equal(bad.status, 400);
  });

  test('PUT /device/<id>/state in JSON and CBOR stores every asset', async () => {
    const json = await api(url(), 'PUT', `/device/${device.id}/state`, {
      token: device.token,
      json: { counter: { value: 10 }, mode: { value: 'auto', at: '2026-05-01T10:00:00+02:00' } },
    });
    assert.equal(json.status, 200);
    assert.equal(json.body.states.counter.value, 10);
    assert.equal(json.body.states.mode.at, '2026-05-01T08:00:00.000Z');
    const cbor = await api(url(), 'PUT', `/device/${device.id}/state`, {
      token: device.token,
      body: new Uint8Array(encodeCbor({ counter: 11, switch: true })),
      contentType: 'application/cbor',
    });
    assert.equal(cbor.status, 200, cbor.text);
    assert.deepEqual(Object.keys(cbor.body.states).sort(), ['counter', 'switch']);
    const got = await api(url(), 'GET', `/device/${device.id}/asset/counter/state`, { token: device.token });
    assert.equal(got.body.state.value, 11);
  });

  test('a device state with one invalid asset stores the valid ones and names the invalid one (422)', async () => {
    const r = await api(url(), 'PUT', `/device/${device.id}/state`, {
      token: device.token,
      json: { counter: { value: 12 }, temp: { value: 500 }, ghost: { value: 1 } },
    });
    assert.equal(r.status, 422);
    assert.equal(r.body.code, 'STATES_REFUSED', 'two different reasons');
    assert.match(r.body.error, /temp/);
    assert.match(r.body.error, /maximum/);
    assert.match(r.body.error, /ghost/);
    assert.deepEqual(r.body.refused.map((x: { asset: string }) => x.asset).sort(), ['ghost', 'temp']);
    assert.equal(r.body.states.counter.value, 12);
    const got = await api(url(), 'GET', `/device/${device.id}/asset/counter/state`, { token: device.token });
    assert.equal(got.body.state.value, 12, 'the valid asset was stored');
    const unknownOnly = await api(url(), 'PUT', `/device/${device.id}/state`, { token: device.token, json: { ghost: { value: 1 } } });
    assert.equal(unknownOnly.status, 422, 'an unknown asset inside a device state is 422, not 404');
    const badAt = await api(url(), 'PUT', `/device/${device.id}/state`, { token: device.token, json: { counter: { value: 1, at: 'noon' } } });
    assert.equal(badAt.status, 422);
    assert.equal(badAt.body.refused[0].code, 'INVALID_TIMESTAMP');
  });

  test('commands: 202 with delivery counts for an actuator; 422 for a sensor or a value off the profile', async () => {
    const r = await api(url(), 'PUT', `/device/${device.id}/asset/switch/command`, { token: app.token, json: { value: true, meta: { port: 5 } } });
    assert.equal(r.status, 202);
    assert.equal(typeof r.body.delivered.mqtt, 'number');
    assert.equal(r.body.delivered.lpwan, 'none');
    assert.match(r.body.at, /Z$/);
    const assetId = (await api(url(), 'GET', `/device/${device.id}/asset/switch`, { token: app.token })).body.id;
    assert.equal((await api(url(), 'PUT', `/asset/${assetId}/command`, { token: app.token, json: { value: false } })).status, 202);
    const sensor = await api(url(), 'PUT', `/device/${device.id}/asset/counter/command`, { token: app.token, json: { value: 1 } });
    assert.equal(sensor.status, 422);
    assert.equal(sensor.body.code, 'NOT_ACTUATOR');
    const wrong = await api(url(), 'PUT', `/device/${device.id}/asset/switch/command`, { token: app.token, json: { value: 'on' } });
    assert.equal(wrong.status, 422);
    assert.equal(wrong.body.code, 'PROFILE_MISMATCH');
    const dev = await api(url(), 'PUT', `/device/${device.id}/command`, { token: app.token, json: { switch: true } });
    assert.equal(dev.status, 202);
    const wrapped = await api(url(), 'PUT', `/device/${device.id}/command?meta=${encodeURIComponent('{"port":3}')}`, { token: app.token, json: { values: { switch: false }, meta: { port: 2 } } });
    assert.equal(wrapped.status, 202);
    const byDevice = await api(url(), 'PUT', `/device/${device.id}/asset/switch/command`, { token: device.token, json: { value: true } });
    assert.equal(byDevice.status, 403, 'a device token never sends commands');
  });

  test('400: malformed JSON, CBOR garbage, wrong shape, bad timestamp', async () => {
    const path = `/device/${device.id}/asset/counter/state`;
    const cases: Array<[string, { body?: BodyInit; contentType?: string; json?: unknown }, string]> = [
      ['malformed JSON', { body: '{"value": ', contentType: 'application/json' }, 'INVALID_JSON'],
      ['CBOR garbage', { body: new Uint8Array([0xff, 0xfe, 0x00]), contentType: 'application/cbor' }, 'INVALID_CBOR'],
      ['value missing', { json: { val: 1 } }, 'INVALID_MESSAGE'],
      ['at without zone', { json: { value: 1, at: '2026-01-01T00:00:00' } }, 'INVALID_TIMESTAMP'],
      ['at not a date', { json: { value: 1, at: 'yesterday' } }, 'INVALID_TIMESTAMP'],
    ];
    for (const [what, options, code] of cases) {
      const r = await api(url(), 'PUT', path, { token: device.token, ...options });
      assert.equal(r.status, 400, what);
      assert.equal(r.body.code, code, what);
      assert.equal(r.body.status, 400);
      assert.equal(typeof r.body.error, 'string');
    }
    const devCbor = await api(url(), 'PUT', `/device/${device.id}/state`, { token: device.token, body: new Uint8Array([0x1c]), contentType: 'application/cbor' });
    assert.equal(devCbor.status, 400);
    const badProfile = await api(url(), 'POST', `/device/${device.id}/assets`, { token: device.token, json: { name: 'x', is: 'sensor', profile: { type: 'float' } } });
    assert.equal(badProfile.status, 400);
    assert.equal(badProfile.body.code, 'INVALID_PROFILE');
    const badName = await api(url(), 'POST', `/device/${device.id}/assets`, { token: device.token, json: { name: 'a/b', is: 'sensor', profile: { type: 'integer' } } });
    assert.equal(badName.body.code, 'INVALID_NAME');
    const badIs = await api(url(), 'POST', `/device/${device.id}/assets`, { token: device.token, json: { name: 'x', is: 'motor', profile: { type: 'integer' } } });
    assert.equal(badIs.status, 400);
  });

  test('401: no header, malformed header, unknown token (with WWW-Authenticate)', async () => {
    const path = `/device/${device.id}`;
    for (const headers of [{} as Record<string, string>, { authorization: 'Basic abc' }, { authorization: 'Bearer device:' + 'x'.repeat(40) }, { authorization: 'Bearer nonsense' }]) {
      const r = await api(url(), 'GET', path, { headers });
      assert.equal(r.status, 401, JSON.stringify(headers));
      assert.equal(r.body.code, 'UNAUTHORIZED');
      assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    }
  });

  test("403: another device's token, a device token on admin paths, an app without the scope", async () => {
    assert.equal((await api(url(), 'GET', `/device/${device.id}`, { token: other.token })).status, 403);
    assert.equal((await api(url(), 'PUT', `/device/${device.id}/asset/counter/state`, { token: other.token, json: { value: 1 } })).status, 403);
    assert.equal((await api(url(), 'POST', `/device/${device.id}/assets`, { token: other.token, json: { name: 'z', is: 'sensor', profile: { type: 'integer' } } })).status, 403);
    assert.equal((await api(url(), 'DELETE', `/device/${device.id}/asset/counter`, { token: other.token })).status, 403);
    assert.equal((await api(url(), 'GET', '/devices', { token: device.token })).status, 403);
    assert.equal((await api(url(), 'POST', '/devices', { token: device.token, json: { name: 'x' } })).status, 403);
    const reader = cliJson<{ token: string }>(['token', 'create', '--name', 'reader', '--scopes', 'read'], d.dataDir);
    assert.equal((await api(url(), 'GET', `/device/${device.id}`, { token: reader.token })).status, 200);
    const cmd = await api(url(), 'PUT', `/device/${device.id}/asset/switch/command`, { token: reader.token, json: { value: true } });
    assert.equal(cmd.status, 403);
    assert.equal(cmd.body.code, 'FORBIDDEN');
    assert.equal((await api(url(), 'PUT', `/device/${device.id}/asset/counter/state`, { token: app.token, json: { value: 1 } })).status, 403, 'apps do not publish states');
  });

  test('404: unknown device, asset, path; NO_STATE before any state', async () => {
    assert.equal((await api(url(), 'GET', '/device/AAAAAAAAAAAAAAAAAAAAAAAA', { token: app.token })).body.code, 'DEVICE_NOT_FOUND');
    assert.equal((await api(url(), 'GET', `/device/${device.id}/asset/nope`, { token: device.token })).body.code, 'ASSET_NOT_FOUND');
    assert.equal((await api(url(), 'PUT', `/device/${device.id}/asset/nope/state`, { token: device.token, json: { value: 1 } })).status, 404);
    assert.equal((await api(url(), 'GET', '/asset/AAAAAAAAAAAAAAAAAAAAAAAA/state', { token: device.token })).status, 404);
    assert.equal((await api(url(), 'GET', '/no/such/path', { token: device.token })).body.code, 'NOT_FOUND');
    const fresh = await api(url(), 'POST', `/device/${device.id}/assets`, { token: device.token, json: { name: 'fresh', is: 'sensor', profile: { type: 'integer' } } });
    const noState = await api(url(), 'GET', `/asset/${fresh.body.id}/state`, { token: device.token });
    assert.equal(noState.status, 404);
    assert.equal(noState.body.code, 'NO_STATE');
  });

  test('405 with Allow on a known path', async () => {
    const r = await api(url(), 'POST', `/device/${device.id}/asset/counter/state`, { token: device.token, json: { value: 1 } });
    assert.equal(r.status, 405);
    assert.equal(r.body.code, 'METHOD_NOT_ALLOWED');
    assert.equal(r.headers.get('allow'), 'GET, PUT');
    assert.equal((await api(url(), 'PATCH', '/healthz')).status, 405);
  });

  test('413 for a body over the limit, 415 for an unsupported Content-Type, 422 for a profile miss', async () => {
    const big = await api(url(), 'PUT', `/device/${device.id}/asset/mode/state`, { token: device.token, json: { value: 'x'.repeat(70_000) } });
    assert.equal(big.status, 413);
    assert.equal(big.body.code, 'PAYLOAD_TOO_LARGE');
    const form = await api(url(), 'PUT', `/device/${device.id}/asset/counter/state`, { token: device.token, body: 'value=1', contentType: 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 415);
    assert.equal(form.body.code, 'UNSUPPORTED_MEDIA_TYPE');
    const cases: Array<[string, unknown, RegExp]> = [
      ['counter', 'five', /type/],
      ['counter', -1, /minimum/],
      ['counter', 1.5, /type/],
      ['temp', 86, /maximum/],
      ['mode', 'eco', /enum/],
      ['geo', { lat: 1 }, /required/],
    ];
    for (const [asset, value, rule] of cases) {
      const r = await api(url(), 'PUT', `/device/${device.id}/asset/${asset}/state`, { token: device.token, json: { value } });
      assert.equal(r.status, 422, `${asset} ${JSON.stringify(value)}`);
      assert.equal(r.body.code, 'PROFILE_MISMATCH');
      assert.match(r.body.error, new RegExp(asset));
      assert.match(r.body.error, rule);
    }
    const noBody = await api(url(), 'GET', `/device/${device.id}`, { token: device.token, contentType: 'text/plain' });
    assert.equal(noBody.status, 200, 'a request without a body is not refused for its Content-Type');
  });

  test('admin: register a device over HTTP, use its token at once, manage tokens, delete it', async () => {
    const created = await api(url(), 'POST', '/devices', { token: app.token, json: { name: 'http-made' } });
    assert.equal(created.status, 201);
    assert.match(created.body.token, /^device:/);
    const own = await api(url(), 'GET', `/device/${created.body.id}`, { token: created.body.token });
    assert.equal(own.status, 200);
    const list = await api(url(), 'GET', '/devices', { token: app.token });
    assert.ok(list.body.some((x: { id: string }) => x.id === created.body.id));
    const tok = await api(url(), 'POST', '/tokens', { token: app.token, json: { name: 'ci', scopes: ['read'] } });
    assert.equal(tok.status, 201);
    const tokens = await api(url(), 'GET', '/tokens', { token: app.token });
    assert.ok(tokens.body.every((t: Record<string, unknown>) => !('hash' in t) && !('token' in t)), 'no secret or hash is listed');
    assert.equal((await api(url(), 'DELETE', `/tokens/${tok.body.id}`, { token: app.token })).status, 204);
    assert.equal((await api(url(), 'GET', '/devices', { token: tok.body.token })).status, 401);
    const renamed = await api(url(), 'PUT', `/device/${created.body.id}`, { token: app.token, json: { Title: 'Boiler room', description: null } });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.title, 'Boiler room');
    assert.equal(renamed.body.name, 'http-made');
    assert.equal((await api(url(), 'PUT', `/device/${created.body.id}`, { token: created.body.token, json: { title: 'x' } })).status, 403);
    const rotated = await api(url(), 'POST', `/device/${created.body.id}/token`, { token: app.token });
    assert.equal(rotated.status, 201);
    assert.equal((await api(url(), 'GET', `/device/${created.body.id}`, { token: created.body.token })).status, 401, 'old device token revoked');
    assert.equal((await api(url(), 'GET', `/device/${created.body.id}`, { token: rotated.body.token })).status, 200);
    assert.equal((await api(url(), 'DELETE', `/device/${created.body.id}`, { token: app.token })).status, 204);
    assert.equal((await api(url(), 'GET', `/device/${created.body.id}`, { token: app.token })).status, 404);
  });

  test('a CLI-created device and token work at once; a CLI-revoked token is refused at once', async () => {
    const fresh = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'cli-made'], d.dataDir);
    assert.equal((await api(url(), 'GET', `/device/${fresh.id}`, { token: fresh.token })).status, 200);
    const asset = cliJson<{ id: string }>(['asset', 'create', fresh.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], d.dataDir);
    assert.equal((await api(url(), 'PUT', `/asset/${asset.id}/state`, { token: fresh.token, json: { value: 3 } })).status, 200);
    const state = cliJson<{ state: { value: number } }>(['state', 'get', fresh.id, 'n'], d.dataDir);
    assert.equal(state.state.value, 3);
    const tokens = cliJson<Array<{ id: string; deviceId: string | null }>>(['token', 'list'], d.dataDir);
    const tokenId = tokens.find((t) => t.deviceId === fresh.id)!.id;
    const revoke = cli(['token', 'revoke', tokenId, '--data', d.dataDir]);
    assert.equal(revoke.code, 0, revoke.stderr);
    const refused = await api(url(), 'GET', `/device/${fresh.id}`, { token: fresh.token });
    assert.equal(refused.status, 401);
  });
});

describe('HTTP limits', () => {
  test('429 with Retry-After when a token goes over its rate', async () => {
    const d = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '1' }, args: [] });
    try {
      const { device } = provision(d.dataDir, [{ name: 'c', is: 'sensor', profile: { type: 'integer' } }]);
      // Burst is 5000 by default; a config file sets it small.
      let limited: Awaited<ReturnType<typeof api>> | undefined;
      for (let i = 0; i < 5100 && !limited; i++) {
        const r = await api(d.url, 'GET', `/device/${device.id}/asset/c`, { token: device.token });
        if (r.status === 429) limited = r;
      }
      assert.ok(limited, 'the burst ran out');
      assert.equal(limited.body.code, 'RATE_LIMITED');
      assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    } finally {
      await d.stop();
    }
  });
});
