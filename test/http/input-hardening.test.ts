// Reproductions of the input-validation defects of the hardening issue, against the compiled daemon:
// each test sends what an attacker (or a buggy device) sent and checks the gateway's answer.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Encoder } from 'cbor-x';
import mqtt from 'mqtt';
import { api, provision, startDaemon, type RunningDaemon } from '../helpers/daemon.js';

const ASSETS = [
  { name: 'n', is: 'sensor', profile: { type: 'number' } },
  { name: 'obj', is: 'sensor', profile: { type: 'object' } },
  { name: 'arr', is: 'sensor', profile: { type: 'array' } },
];

/** Raw JSON text: `__proto__` and `\ud800` must reach the daemon as written, not as JS objects. */
// Plain CBOR maps: cbor-x's default encoder switches to private record tags for repeated shapes.
const cborEncoder = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const encodeCbor = (value: unknown) => new Uint8Array(cborEncoder.encode(value));
const raw = (text: string) => ({ body: text, contentType: 'application/json' });

describe('input validation: hostile bodies, names, profiles and timestamps', () => {
  let d: RunningDaemon;
  let device: { id: string; token: string };
  let app: { id: string; token: string };
  const put = (path: string, options: Parameters<typeof api>[3]) => api(d.url, 'PUT', path, { token: device.token, ...options });

  before(async () => {
    d = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
    ({ device, app } = provision(d.dataDir, ASSETS));
  });
  after(async () => {
    assert.equal(await d.stop(), 0, 'SIGTERM exits 0');
  });

  test('ReDoS: catastrophic patterns answer at once and /healthz keeps answering meanwhile', async () => {
    // With a backtracking engine each of these takes hours on 64 a's followed by a mismatch.
    const patterns = ['^(a+)+$', '^(a|aa)+$', '^(a|a?)+$', '^(.*a){20}$'];
    const attack = 'a'.repeat(64) + '!';
    let polling = true;
    let healthAnswers = 0;
    const poller = (async () => {
      while (polling) {
        const h = await fetch(`${d.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
        assert.equal(h.status, 200);
        await h.arrayBuffer();
        healthAnswers++;
      }
    })();
    try {
      for (const [i, pattern] of patterns.entries()) {
        const created = await api(d.url, 'POST', `/device/${device.id}/assets`, {
          token: device.token,
          json: { name: `re${i}`, is: 'sensor', profile: { type: 'string', pattern } },
        });
        assert.equal(created.status, 201, created.text);
        const r = await fetch(`${d.url}/device/${device.id}/asset/re${i}/state`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${device.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ value: attack }),
          signal: AbortSignal.timeout(10_000),
        });
        const body = (await r.json()) as { code: string; error: string };
        assert.equal(r.status, 422, JSON.stringify(body));
        assert.equal(body.code, 'PROFILE_MISMATCH');
        assert.match(body.error, /\(pattern\)/);
        // The same patterns still mean what they say.
        const good = await put(`/device/${device.id}/asset/re${i}/state`, { json: { value: 'a'.repeat(20) } });
        assert.equal(good.status, 200, `${pattern}: ${good.text}`);
      }
    } finally {
      polling = false;
      await poller;
    }
    assert.ok(healthAnswers > 0);
  });

  test('patterns keep ECMAScript escapes; lookaround and backreferences are refused with 422 PROFILE_UNSUPPORTED', async () => {
    const ok = await put(`/device/${device.id}/asset/hexid`, { json: { profile: { type: 'string', pattern: '^\\u0041[\\u0030-\\u0039]+$' } } });
    assert.equal(ok.status, 201, ok.text);
    assert.equal((await put(`/device/${device.id}/asset/hexid/state`, { json: { value: 'A123' } })).status, 200);
    assert.equal((await put(`/device/${device.id}/asset/hexid/state`, { json: { value: 'B123' } })).status, 422);
    for (const pattern of ['^(?=a)a$', '^(a)\\1$', '(?<!x)y']) {
      const r = await put(`/device/${device.id}/asset/look`, { json: { profile: { type: 'string', pattern } } });
      assert.equal(r.status, 422, `${pattern}: ${r.text}`);
      assert.equal(r.body.code, 'PROFILE_UNSUPPORTED');
      assert.match(r.body.error, /profile cannot be compiled/);
    }
    assert.equal((await api(d.url, 'GET', `/device/${device.id}/asset/look`, { token: device.token })).status, 404, 'nothing created');
    // A JavaScript syntax error stays a 400 INVALID_PROFILE.
    const bad = await put(`/device/${device.id}/asset/look`, { json: { profile: { type: 'string', pattern: '(' } } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, 'INVALID_PROFILE');
  });

  test('deeply nested JSON is refused with 400 at parse time (asset state, device state, CBOR), not a 500', async () => {
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    for (const n of [33, 32_000]) {
      const r = await put(`/device/${device.id}/asset/arr/state`, raw(`{"value": ${deep(n)}}`));
      assert.equal(r.status, 400, r.text.slice(0, 200));
      assert.equal(r.body.code, 'INVALID_JSON');
      assert.match(r.body.error, /nested deeper than 32 levels/);
      const ds = await put(`/device/${device.id}/state`, raw(`{"arr": {"value": ${deep(n)}}, "n": {"value": 1}}`));
      assert.equal(ds.status, 400, ds.text.slice(0, 200));
      assert.equal(ds.body.code, 'INVALID_JSON');
    }
    // 31 levels inside the envelope: 32 in all, the limit, accepted.
    assert.equal((await put(`/device/${device.id}/asset/arr/state`, raw(`{"value": ${deep(31)}}`))).status, 200);
    let nested: unknown = [];
    for (let i = 0; i < 40; i++) nested = [nested];
    const cbor = await put(`/device/${device.id}/asset/arr/state`, { body: encodeCbor({ value: nested }), contentType: 'application/cbor' });
    assert.equal(cbor.status, 400, cbor.text);
    assert.equal(cbor.body.code, 'INVALID_CBOR');
    const h = await api(d.url, 'GET', '/healthz');
    assert.equal(h.status, 200);
  });

  test('over MQTT a deeply nested state is acknowledged and reported on the errors topic', async () => {
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${d.mqttPort}`, { username: device.token, password: 'x', reconnectPeriod: 0 });
    try {
      const errors: Array<{ code: string; error: string }> = [];
      client.on('message', (topic, payload) => {
        if (topic.endsWith('/errors')) errors.push(JSON.parse(payload.toString()));
      });
      await client.subscribeAsync(`device/${device.id}/errors`, { qos: 1 });
      const depth = 32_000;
      await client.publishAsync(`device/${device.id}/asset/arr/state`, `{"value": ${'['.repeat(depth)}${']'.repeat(depth)}}`, { qos: 1 });
      await client.publishAsync(`device/${device.id}/state`, `{"arr": {"value": ${'['.repeat(depth)}${']'.repeat(depth)}}}`, { qos: 1 });
      for (let i = 0; i < 100 && errors.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(errors.length, 2, JSON.stringify(errors));
      for (const e of errors) {
        assert.equal(e.code, 'INVALID_JSON');
        assert.match(e.error, /nested deeper than 32 levels/);
      }
    } finally {
      await client.endAsync();
    }
  });

  test('a profile that cannot be compiled (a __proto__ member, which the validator would skip) is refused at creation with 422', async () => {
    const text = '{"name": "proto", "is": "sensor", "profile": {"type": "object", "properties": {"__proto__": {"type": "number"}}}}';
    const created = await api(d.url, 'POST', `/device/${device.id}/assets`, { token: device.token, ...raw(text) });
    assert.equal(created.status, 422, created.text);
    assert.equal(created.body.code, 'PROFILE_UNSUPPORTED');
    assert.match(created.body.error, /profile\.properties\.__proto__/);
    assert.equal((await api(d.url, 'GET', `/device/${device.id}/asset/proto`, { token: device.token })).status, 404, 'nothing created');
    const changed = await put(`/device/${device.id}/asset/obj`, raw('{"profile": {"type": "object", "properties": {"a": {"type": "object", "properties": {"__proto__": {}}}}}}'));
    assert.equal(changed.status, 422, changed.text);
    assert.equal((await api(d.url, 'GET', `/device/${device.id}/asset/obj`, { token: device.token })).body.profile.type, 'object', 'profile unchanged');
    // Inherited members are not the value's: {} has no "constructor" member to check.
    const inherited = await put(`/device/${device.id}/asset/inherited`, { json: { profile: { type: 'object', properties: { toString: { type: 'number' } }, required: ['constructor'] } } });
    assert.equal(inherited.status, 201, inherited.text);
    const r = await put(`/device/${device.id}/asset/inherited/state`, { json: { value: {} } });
    assert.equal(r.status, 422);
    assert.match(r.body.error, /must have member "constructor"/);
  });

  test('an asset stored with a profile that no longer compiles refuses its own states only; the others of a device state are stored', async () => {
    // As an older version could have stored it: written straight into the database.
    const db = new Database(join(d.dataDir, 'outpost.db'));
    try {
      db.prepare("UPDATE assets SET profile = ? WHERE device_id = ? AND name = 'obj'").run(JSON.stringify({ type: 'string', pattern: '^(?=a)' }), device.id);
    } finally {
      db.close();
    }
    const single = await put(`/device/${device.id}/asset/obj/state`, { json: { value: 'a' } });
    assert.equal(single.status, 422, single.text);
    assert.equal(single.body.code, 'PROFILE_UNSUPPORTED');
    assert.match(single.body.error, /cannot be compiled.*change the profile/);
    const ds = await put(`/device/${device.id}/state`, { json: { obj: { value: 'a' }, n: { value: 7 } } });
    assert.equal(ds.status, 422, ds.text);
    assert.deepEqual(Object.keys(ds.body.states), ['n']);
    assert.equal(ds.body.refused[0].asset, 'obj');
    assert.equal(ds.body.refused[0].code, 'PROFILE_UNSUPPORTED');
    const n = await api(d.url, 'GET', `/device/${device.id}/asset/n/state`, { token: device.token });
    assert.equal(n.body.state.value, 7);
    // The asset itself still reads, and a new profile repairs it.
    assert.equal((await api(d.url, 'GET', `/device/${device.id}/asset/obj`, { token: device.token })).status, 200);
    assert.equal((await put(`/device/${device.id}/asset/obj`, { json: { profile: { type: 'object' } } })).status, 200);
    assert.equal((await put(`/device/${device.id}/asset/obj/state`, { json: { value: {} } })).status, 200);
  });

  test('non-finite numbers (1e400, CBOR Infinity and NaN) are refused with the profile error, never stored as null', async () => {
    const before = await api(d.url, 'GET', `/device/${device.id}/asset/n/state`, { token: device.token });
    for (const text of ['{"value": 1e400}', '{"value": -1e400}']) {
      const r = await put(`/device/${device.id}/asset/n/state`, raw(text));
      assert.equal(r.status, 422, r.text);
      assert.equal(r.body.code, 'PROFILE_MISMATCH');
      assert.match(r.body.error, /value must be a finite number/);
    }
    const nestedInf = await put(`/device/${device.id}/asset/obj/state`, raw('{"value": {"a": [1, 1e999]}}'));
    assert.equal(nestedInf.status, 422, nestedInf.text);
    assert.match(nestedInf.body.error, /value\/a\/1 must be a finite number/);
    for (const value of [Infinity, NaN]) {
      const r = await put(`/device/${device.id}/asset/n/state`, { body: encodeCbor({ value }), contentType: 'application/cbor' });
      assert.equal(r.status, 422, r.text);
      assert.match(r.body.error, /finite number/);
    }
    const ds = await put(`/device/${device.id}/state`, raw('{"n": {"value": 1e400}, "obj": {"value": {}}}'));
    assert.equal(ds.status, 422);
    assert.equal(ds.body.refused[0].asset, 'n');
    const afterwards = await api(d.url, 'GET', `/device/${device.id}/asset/n/state`, { token: device.token });
    assert.deepEqual(afterwards.body.state, before.body.state, 'nothing stored');
  });

  test('timestamps in years 0000–0099 are stored exactly, leap days of those years included', async () => {
    for (const [i, at] of ['0050-06-01T12:00:00.000Z', '0000-02-29T00:00:00.000Z', '0099-12-31T23:59:59.999Z', '0004-02-29T10:00:00.000Z'].entries()) {
      // A fresh asset each: the latest state is the one with the newest `at`.
      assert.equal((await put(`/device/${device.id}/asset/old${i}`, { json: { profile: { type: 'number' } } })).status, 201);
      const r = await put(`/device/${device.id}/asset/old${i}/state`, { json: { value: 1, at } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.state.at, at);
      const got = await api(d.url, 'GET', `/device/${device.id}/asset/old${i}/state`, { token: device.token });
      assert.equal(got.body.state.at, at);
    }
    const noLeap = await put(`/device/${device.id}/asset/n/state`, { json: { value: 1, at: '0100-02-29T00:00:00Z' } });
    assert.equal(noLeap.status, 400, 'year 100 is not a leap year');
    assert.equal(noLeap.body.code, 'INVALID_TIMESTAMP');
    // The CBOR device state path (tag 120 with a tag-0 time) ends in the same timestamp rules.
    const cbor = Buffer.concat([Buffer.from([0xd8, 0x78, 0x82]), Buffer.from(encodeCbor({ n: 2 })), Buffer.from([0xc0]), Buffer.from(encodeCbor('0050-06-01T12:00:00Z'))]);
    const r = await put(`/device/${device.id}/state`, { body: new Uint8Array(cbor), contentType: 'application/cbor' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.states.n.at, '0050-06-01T12:00:00.000Z', r.text);
  });

  test('asset names must be valid Unicode: a lone surrogate is 400 INVALID_NAME and nothing is created', async () => {
    const posted = await api(d.url, 'POST', `/device/${device.id}/assets`, { token: device.token, ...raw('{"name": "x\\ud800", "is": "sensor", "profile": {"type": "number"}}') });
    assert.equal(posted.status, 400, posted.text);
    assert.equal(posted.body.code, 'INVALID_NAME');
    assert.match(posted.body.error, /valid Unicode/);
    const lowOnly = await api(d.url, 'POST', `/device/${device.id}/assets`, { token: device.token, ...raw('{"name": "\\udc00", "is": "sensor", "profile": {"type": "number"}}') });
    assert.equal(lowOnly.status, 400);
    // A surrogate pair is a valid character.
    const emoji = await api(d.url, 'POST', `/device/${device.id}/assets`, { token: device.token, json: { name: 'smile😀', is: 'sensor', profile: { type: 'number' } } });
    assert.equal(emoji.status, 201, emoji.text);
    // Percent-encoded bytes that are not UTF-8 (here a UTF-8-encoded surrogate) in a path.
    for (const segment of ['%ED%A0%80', '%FF', 'ab%C3']) {
      const r = await put(`/device/${device.id}/asset/${segment}`, { json: { profile: { type: 'number' } } });
      assert.equal(r.status, 400, `${segment}: ${r.text}`);
      assert.equal(r.body.code, 'INVALID_NAME');
    }
    const list = await api(d.url, 'GET', `/device/${device.id}/assets`, { token: app.token });
    for (const a of list.body as Array<{ name: string }>) assert.ok(!/[\ud800-\udfff]/u.test(a.name), `well-formed name ${JSON.stringify(a.name)}`);
    assert.ok(!(list.body as Array<{ name: string }>).some((a) => a.name.startsWith('x')), 'nothing created');
  });
});
