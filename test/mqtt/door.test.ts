// The MQTT door against the compiled daemon, with MQTT.js and the Debian mosquitto clients.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder } from 'cbor-x';
import { api, cli, cliJson, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient, connectRefusedCode, eventually, runTool, sleep, startSub, within, type TestClient } from './helpers.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

interface Dev {
  id: string;
  token: string;
  assets: Record<string, string>;
}

let daemon: RunningDaemon;
let a: Dev;
let b: Dev;
let reader: string;
let commander: string;
let port: number;
const open: TestClient[] = [];

const ASSETS = [
  { name: 'temp', is: 'sensor', profile: { type: 'number' } },
  { name: 'count', is: 'sensor', profile: { type: 'integer' } },
  { name: 'on', is: 'sensor', profile: { type: 'boolean' } },
  { name: 'switch', is: 'actuator', profile: { type: 'boolean' } },
];

function makeDevice(name: string): Dev {
  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', name], daemon.dataDir);
  const assets: Record<string, string> = {};
  for (const asset of ASSETS) {
    const created = cliJson<{ id: string }>(['asset', 'create', device.id, '--name', asset.name, '--is', asset.is, '--profile', JSON.stringify(asset.profile)], daemon.dataDir);
    assets[asset.name] = created.id;
  }
  return { ...device, assets };
}

async function client(token: string, options = {}): Promise<TestClient> {
  const c = await connectClient(port, token, options);
  open.push(c);
  return c;
}

async function latest(dev: Dev, asset: string): Promise<{ value: unknown; at: string } | undefined> {
  const res = await api(daemon.url, 'GET', `/device/${dev.id}/asset/${asset}/state`, { token: reader });
  return res.status === 200 ? res.body.state : undefined;
}

before(async () => {
  daemon = await startDaemon();
  port = daemon.mqttPort;
  assert.ok(port > 0, 'ready line reports ports.mqtt');
  a = makeDevice('dev-a');
  b = makeDevice('dev-b');
  reader = cliJson<{ token: string }>(['token', 'create', '--name', 'reader', '--scopes', 'read'], daemon.dataDir).token;
  commander = cliJson<{ token: string }>(['token', 'create', '--name', 'commander', '--scopes', 'command'], daemon.dataDir).token;
});

// Each test closes its connections, so subscriber counts start from zero.
afterEach(async () => {
  for (const c of open.splice(0)) await c.end().catch(() => {});
});

after(async () => {
  await daemon.stop();
  removeDir(daemon.dataDir);
});

describe('connect', () => {
  test('unknown token and no user name get CONNACK 4; any password, empty client id, 3.1 and 3.1.1, many connections per token', async () => {
    assert.equal(await connectRefusedCode(port, 'device:nonsense0000000000000000000000000000'), 4);
    assert.equal(await connectRefusedCode(port, undefined), 4);
    const c1 = await client(a.token, { clientId: '', clean: true, password: '' });
    const c2 = await client(a.token, { protocolVersion: 3, protocolId: 'MQIsdp', clientId: 'a-very-long-client-id-for-mqtt-3.1-clients' });
    const c3 = await client(a.token, { clean: false, clientId: 'persistent' });
    assert.ok(c1.client.connected && c2.client.connected && c3.client.connected);
    assert.ok(!daemon.logs.some((l) => l.includes('anything-at-all') || l.includes(a.token)), 'no token or password in the log');
  });
});

describe('topics both ways', () => {
  test('asset state by name: echo with the exact bytes, feed {value, at}, stored', async () => {
    const dev = await client(a.token);
    const app = await client(reader);
    assert.equal(await dev.subscribeCode(`device/${a.id}/asset/temp/+`), 1);
    assert.equal(await app.subscribeCode('device/+/asset/+/feed'), 1);
    const payload = '{ "value" : 21.5 }';
    await dev.client.publishAsync(`device/${a.id}/asset/temp/state`, payload, { qos: 1 });
    const echo = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/temp/state`);
    assert.equal(echo.text, payload);
    const feed = await app.waitFor((m) => m.topic === `device/${a.id}/asset/temp/feed`);
    const body = JSON.parse(feed.text);
    assert.equal(body.value, 21.5);
    assert.match(body.at, ISO);
    assert.equal(feed.retain, false);
    await dev.waitFor((m) => m.topic === `device/${a.id}/asset/temp/feed`);
    assert.deepEqual(await latest(a, 'temp'), { value: 21.5, at: body.at });
  });

  test('asset state by AssetID, bare value, legacy <unixSeconds>|<value>, at with offset', async () => {
    const dev = await client(a.token);
    await dev.subscribeCode(`device/${a.id}/asset/+/state`);
    await dev.subscribeCode(`device/${a.id}/asset/+/feed`);
    await dev.client.publishAsync(`asset/${a.assets.count}/state`, '{"value": 7, "at": "2026-01-02T03:04:05+01:00"}', { qos: 1 });
    const echo = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/count/state`);
    assert.equal(echo.text, '{"value": 7, "at": "2026-01-02T03:04:05+01:00"}');
    const feed = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/count/feed`);
    assert.deepEqual(JSON.parse(feed.text), { value: 7, at: '2026-01-02T02:04:05.000Z' });

    await dev.client.publishAsync(`device/${a.id}/asset/on/state`, 'true', { qos: 1 });
    await dev.waitFor((m) => m.topic === `device/${a.id}/asset/on/feed` && JSON.parse(m.text).value === true);

    await dev.client.publishAsync(`device/${a.id}/asset/temp/state`, '1700000000|19.25', { qos: 1 });
    const legacy = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/temp/feed` && JSON.parse(m.text).value === 19.25);
    assert.equal(JSON.parse(legacy.text).at, '2023-11-14T22:13:20.000Z');
    await dev.client.publishAsync(`device/${a.id}/asset/on/state`, '1700000001|0', { qos: 0 });
    await dev.waitFor((m) => m.topic === `device/${a.id}/asset/on/feed` && JSON.parse(m.text).value === false);
  });

  test('device state: JSON and CBOR, each asset echoed as its part and fed', async () => {
    const dev = await client(a.token);
    await dev.subscribeCode(`device/${a.id}/#`);
    await dev.client.publishAsync(`device/${a.id}/state`, JSON.stringify({ temp: { value: 30.5, at: '2026-03-01T00:00:00Z' }, count: 3 }), { qos: 1 });
    const echo = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/temp/state` && m.text.includes('30.5'));
    assert.deepEqual(JSON.parse(echo.text), { value: 30.5, at: '2026-03-01T00:00:00Z' });
    await dev.waitFor((m) => m.topic === `device/${a.id}/asset/count/feed` && JSON.parse(m.text).value === 3);

    await dev.client.publishAsync(`device/${a.id}/state`, cbor.encode({ count: 42, on: true }), { qos: 1 });
    const feed = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/count/feed` && JSON.parse(m.text).value === 42);
    assert.match(JSON.parse(feed.text).at, ISO);
    await dev.waitFor((m) => m.topic === `device/${a.id}/asset/count/state` && m.text === '{"value":42}');
    assert.equal((await latest(a, 'count'))?.value, 42);
    assert.ok(!dev.received.some((m) => m.topic === `device/${a.id}/state`), 'the device state message itself is not forwarded');
  });

  test('commands from HTTP reach both command topics and are counted; never retained', async () => {
    const dev = await client(a.token);
    assert.equal(await dev.subscribeCode(`device/${a.id}/asset/switch/command`), 1);
    assert.equal(await dev.subscribeCode(`asset/${a.assets.switch}/command`), 0 + 1);
    const other = await client(b.token);
    await other.subscribeCode(`device/${b.id}/#`);
    const res = await api(daemon.url, 'PUT', `/device/${a.id}/asset/switch/command`, { token: commander, json: { value: true, meta: { reason: 'test' } } });
    assert.equal(res.status, 202);
    assert.equal(res.body.delivered.mqtt, 2);
    const byName = await dev.waitFor((m) => m.topic === `device/${a.id}/asset/switch/command`);
    const byId = await dev.waitFor((m) => m.topic === `asset/${a.assets.switch}/command`);
    for (const m of [byName, byId]) {
      const body = JSON.parse(m.text);
      assert.equal(body.value, true);
      assert.deepEqual(body.meta, { reason: 'test' });
      assert.equal(body.at, res.body.at);
      assert.equal(m.retain, false);
    }
    // a later subscriber gets nothing (commands are not retained)
    const late = await client(a.token);
    await late.subscribeCode(`device/${a.id}/asset/switch/command`);
    await sleep(200);
    assert.equal(late.received.length, 0);
    assert.equal(other.received.filter((m) => m.topic.endsWith('/command')).length, 0, 'nothing crosses to device B');

    // device command: each asset's value as that asset's command
    const res2 = await api(daemon.url, 'PUT', `/device/${a.id}/command`, { token: commander, json: { switch: false } });
    assert.equal(res2.status, 202);
    assert.equal(res2.body.delivered.mqtt, 3); // dev on both topics + late on the name topic
    await late.waitFor((m) => m.topic === `device/${a.id}/asset/switch/command` && JSON.parse(m.text).value === false);
  });

  test('an app token with command scope publishes commands over MQTT on both topics', async () => {
    const dev = await client(a.token);
    await dev.subscribeCode(`device/${a.id}/asset/+/command`);
    await dev.subscribeCode(`asset/${a.assets.switch}/command`);
    const app = await client(commander);
    await app.client.publishAsync(`asset/${a.assets.switch}/command`, '{"value": true}', { qos: 1 });
    await dev.waitFor((m) => m.topic === `device/${a.id}/asset/switch/command` && JSON.parse(m.text).value === true);
    await dev.waitFor((m) => m.topic === `asset/${a.assets.switch}/command` && JSON.parse(m.text).value === true);
    await app.client.publishAsync(`device/${a.id}/asset/switch/command`, 'false', { qos: 0 });
    const m = await dev.waitFor((x) => x.topic === `device/${a.id}/asset/switch/command` && JSON.parse(x.text).value === false);
    assert.match(JSON.parse(m.text).at, ISO);
    const byIdCount = () => dev.received.filter((x) => x.topic === `asset/${a.assets.switch}/command`).length;
    const seen = byIdCount();
    await app.client.publishAsync(`device/${a.id}/command`, '{"switch": true}', { qos: 1 });
    await eventually(() => byIdCount() === seen + 1, 3000, 'device command over MQTT not delivered');
    // a refused command (profile mismatch) is acknowledged, reported, and keeps the connection
    await app.client.publishAsync(`device/${a.id}/asset/switch/command`, '{"value": "on"}', { qos: 1 });
    assert.ok(app.client.connected);
  });
});

describe('errors topic', () => {
  test('bad input is acknowledged, not stored, reported with a code; the connection stays', async () => {
    const dev = await client(a.token);
    assert.equal(await dev.subscribeCode(`device/${a.id}/errors`), 1);
    const before = await latest(a, 'temp');
    const cases: Array<[string, string | Buffer, string]> = [
      [`device/${a.id}/asset/temp/state`, '{"value": ', 'INVALID_JSON'],
      [`device/${a.id}/asset/temp/state`, '{"value": "warm"}', 'PROFILE_MISMATCH'],
      [`device/${a.id}/asset/temp/state`, '{"value": 1, "at": "2026-01-01T00:00:00"}', 'INVALID_TIMESTAMP'],
      [`device/${a.id}/asset/nope/state`, '{"value": 1}', 'ASSET_NOT_FOUND'],
      [`asset/zzzzzzzzzzzzzzzzzzzzzzzz/state`, '{"value": 1}', 'ASSET_NOT_FOUND'],
      [`device/${a.id}/state`, Buffer.from([0xff, 0x00, 0x13]), 'INVALID_CBOR'],
      [`device/${a.id}/state`, '{"temp": "x"}', 'PROFILE_MISMATCH'],
    ];
    for (const [topic, payload, code] of cases) {
      await dev.client.publishAsync(topic, payload, { qos: 1 }); // resolves on PUBACK
      const err = await dev.waitFor((m) => m.topic === `device/${a.id}/errors` && JSON.parse(m.text).code === code && JSON.parse(m.text).topic === topic);
      const body = JSON.parse(err.text);
      assert.deepEqual(Object.keys(body).sort(), ['at', 'code', 'error', 'topic']);
      assert.match(body.at, ISO);
      assert.ok(body.error.length > 0);
    }
    assert.ok(dev.client.connected);
    assert.deepEqual(await latest(a, 'temp'), before, 'nothing stored');
  });

  test('a refused HTTP state is reported on the errors topic too', async () => {
    const dev = await client(a.token);
    await dev.subscribeCode(`device/${a.id}/errors`);
    const res = await api(daemon.url, 'PUT', `/device/${a.id}/asset/temp/state`, { token: a.token, json: { value: 'hot' } });
    assert.equal(res.status, 422);
    await dev.waitFor((m) => JSON.parse(m.text).code === 'PROFILE_MISMATCH');
    const unknown = await api(daemon.url, 'PUT', `/device/${a.id}/asset/nope/state`, { token: a.token, json: { value: 1 } });
    assert.equal(unknown.status, 404);
    const report = await dev.waitFor((m) => JSON.parse(m.text).code === 'ASSET_NOT_FOUND');
    assert.match(JSON.parse(report.text).error, /nope/);
  });
});

describe('ACL matrix: nothing crosses', () => {
  test('subscriptions: SUBACK 128 for foreign, wildcard-across and $SYS filters; granted for own', async () => {
    const devA = await client(a.token);
    const app = await client(reader);
    const cmd = await client(commander);
    const own = [`device/${a.id}/asset/temp/state`, `device/${a.id}/asset/temp/feed`, `device/${a.id}/asset/switch/command`, `asset/${a.assets.switch}/command`, `device/${a.id}/errors`, `device/${a.id}/events`, `device/${a.id}/#`, `device/${a.id}/asset/+/feed`];
    const foreign = [
      '#',
      '+/#',
      '$SYS/#',
      'device/+/asset/+/feed',
      'device/#',
      `device/${b.id}/#`,
      `device/${b.id}/asset/temp/state`,
      `device/${b.id}/asset/temp/feed`,
      `device/${b.id}/asset/switch/command`,
      `device/${b.id}/errors`,
      `asset/${b.assets.switch}/command`,
      'asset/+/command',
      `+/${b.id}/#`,
    ];
    for (const f of own) assert.equal(await devA.subscribeCode(f), 1, `device A may subscribe ${f}`);
    for (const f of foreign) assert.equal(await devA.subscribeCode(f), 128, `device A may not subscribe ${f}`);
    for (const f of ['device/+/asset/+/feed', 'device/+/asset/+/state', 'device/+/errors', `device/${b.id}/events`]) assert.equal(await app.subscribeCode(f), 1, `reader ${f}`);
    for (const f of ['#', '$SYS/#', 'device/+/asset/+/command', `asset/${a.assets.switch}/command`, 'device/#']) assert.equal(await app.subscribeCode(f), 128, `reader may not ${f}`);
    assert.equal(await cmd.subscribeCode('device/+/asset/+/feed'), 128, 'command scope alone does not read');
    assert.ok(devA.client.connected && app.client.connected && cmd.client.connected, 'refused subscriptions keep the connection');

    // B publishes; A (subscribed to everything it may) sees none of it.
    const devB = await client(b.token);
    await devB.client.publishAsync(`device/${b.id}/asset/temp/state`, '{"value": 99}', { qos: 1 });
    await devB.client.publishAsync(`device/${b.id}/asset/temp/state`, '"bad"', { qos: 1 });
    await app.waitFor((m) => m.topic === `device/${b.id}/asset/temp/feed` && JSON.parse(m.text).value === 99);
    await app.waitFor((m) => m.topic === `device/${b.id}/errors`);
    await sleep(100);
    assert.equal(devA.received.filter((m) => m.topic.includes(b.id) || m.topic.includes(b.assets.switch!)).length, 0);
  });

  test('publishes to topics the token may not use close the connection, store nothing, are logged', async () => {
    const bBefore = await latest(b, 'temp');
    const forbidden: Array<[string, string, string]> = [
      [a.token, `device/${b.id}/asset/temp/state`, '{"value": 1}'],
      [a.token, `asset/${b.assets.temp}/state`, '{"value": 2}'],
      [a.token, `device/${b.id}/state`, '{"temp": 3}'],
      [a.token, `device/${a.id}/asset/switch/command`, '{"value": true}'],
      [a.token, `asset/${a.assets.switch}/command`, '{"value": true}'],
      [a.token, `device/${a.id}/asset/temp/feed`, '{"value": 4}'],
      [a.token, `device/${a.id}/errors`, '{}'],
      [a.token, '$SYS/hello', 'x'],
      [a.token, 'anything/else', 'x'],
      [reader, `device/${a.id}/asset/temp/state`, '{"value": 5}'],
      [reader, `device/${a.id}/asset/switch/command`, '{"value": true}'],
      [commander, `device/${a.id}/asset/temp/state`, '{"value": 6}'],
    ];
    for (const [token, topic, payload] of forbidden) {
      const c = await client(token);
      c.client.publish(topic, payload, { qos: 1 });
      await within(c.closed, 3000, `${topic} did not close the connection`);
      await eventually(() => daemon.logs.some((l) => l.includes('mqtt publish not allowed') && l.includes(JSON.stringify(topic))), 2000, `not logged: ${topic}`);
    }
    assert.deepEqual(await latest(b, 'temp'), bBefore);
    assert.notEqual((await latest(a, 'temp'))?.value, 1);
  });
});

describe('retained feed', () => {
  test('a new subscriber gets the latest feed message flagged retained; the state echo is not retained', async () => {
    const dev = await client(b.token);
    await dev.client.publishAsync(`device/${b.id}/asset/count/state`, '{"value": 5, "at": "2026-05-01T00:00:00Z"}', { qos: 1 });
    await dev.client.publishAsync(`device/${b.id}/asset/count/state`, '{"value": 4, "at": "2026-04-01T00:00:00Z"}', { qos: 1, retain: true });
    const app = await client(reader);
    await app.subscribeCode(`device/${b.id}/asset/+/feed`);
    await app.subscribeCode(`device/${b.id}/asset/+/state`);
    const m = await app.waitFor((x) => x.topic === `device/${b.id}/asset/count/feed`);
    assert.equal(m.retain, true);
    assert.deepEqual(JSON.parse(m.text), { value: 5, at: '2026-05-01T00:00:00.000Z' }, 'the latest by at, as GET state');
    await sleep(150);
    assert.equal(app.received.filter((x) => x.topic.endsWith('/state')).length, 0);
  });
});

describe('mosquitto clients', () => {
  test('mosquitto_pub/mosquitto_sub: state both ways, MQTT 3.1, refused token, SUBACK 128', async () => {
    const sub = startSub(['-p', String(port), '-u', a.token, '-P', 'ignored', '-q', '1', '-C', '2', '-t', `device/${a.id}/asset/on/state`, '-t', `device/${a.id}/asset/on/feed`, '-V', 'mqttv31']);
    assert.equal(await sub.subscribed, '1, 1');
    // the feed's retained message would arrive first: publish a fresh state and wait for its echo + feed
    const pub = await runTool('mosquitto_pub', ['-p', String(port), '-u', a.token, '-q', '1', '-t', `device/${a.id}/asset/on/state`, '-m', '{"value":true}']);
    assert.equal(pub.code, 0, pub.stderr);
    const got = await sub.done;
    assert.equal(got.code, 0);
    assert.ok(got.lines.some((l) => l.startsWith(`device/${a.id}/asset/on/feed {"value":`)), got.raw);

    const sub2 = startSub(['-p', String(port), '-u', a.token, '-q', '1', '-C', '1', '-t', `device/${a.id}/asset/on/state`]);
    await sub2.subscribed;
    await runTool('mosquitto_pub', ['-p', String(port), '-u', a.token, '-q', '1', '-t', `device/${a.id}/asset/on/state`, '-m', '{"value": false }']);
    assert.deepEqual((await sub2.done).lines, [`device/${a.id}/asset/on/state {"value": false }`]);

    const bad = await runTool('mosquitto_pub', ['-p', String(port), '-u', 'device:wrong', '-t', `device/${a.id}/asset/on/state`, '-m', '1']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr + bad.stdout, /bad user name or password|not authori[sz]ed|refused/i);

    const refused = startSub(['-p', String(port), '-u', a.token, '-C', '1', '-W', '1', '-t', '#']);
    assert.equal(await refused.subscribed, '128');
    await refused.done;
  });
});

describe('revocation', () => {
  test('revoking a token with the CLI closes its live sessions and refuses it after', async () => {
    const c = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'revokee'], daemon.dataDir);
    const session = await client(c.token);
    const tokens = cliJson<Array<{ id: string; deviceId: string | null }>>(['token', 'list'], daemon.dataDir);
    const tokenId = tokens.find((t) => t.deviceId === c.id)!.id;
    const r = cli(['token', 'revoke', tokenId, '--data', daemon.dataDir]);
    assert.equal(r.code, 0, r.stderr);
    await within(session.closed, 3000, 'session not closed');
    assert.equal(await connectRefusedCode(port, c.token), 4);
  });

  test('revoking over HTTP (device token rotation) closes the old sessions', async () => {
    const c = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'rotated'], daemon.dataDir);
    const session = await client(c.token);
    const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'admin', '--scopes', 'admin'], daemon.dataDir).token;
    const tokens = cliJson<Array<{ id: string; deviceId: string | null }>>(['token', 'list'], daemon.dataDir);
    const tokenId = tokens.find((t) => t.deviceId === c.id)!.id;
    const res = await api(daemon.url, 'DELETE', `/tokens/${tokenId}`, { token: admin });
    assert.ok(res.status < 300, `revoke answered ${res.status} ${res.text}`);
    await within(session.closed, 3000, 'session not closed');
  });
});

describe('metrics', () => {
  test('MQTT series are exposed', async () => {
    await sleep(1100); // counters are folded in once a second
    const res = await api(daemon.url, 'GET', '/metrics');
    for (const name of ['outpost_mqtt_connections', 'outpost_mqtt_connections_total', 'outpost_mqtt_messages_in_total', 'outpost_mqtt_messages_out_total', 'outpost_mqtt_refused_total', 'outpost_mqtt_puback_seconds_bucket']) {
      assert.ok(res.text.includes(name), name);
    }
    assert.match(res.text, /outpost_mqtt_refused_total\{code="PROFILE_MISMATCH"\} \d+/);
    assert.match(res.text, /outpost_mqtt_messages_in_total\{kind="asset-state"\} \d+/);
    assert.match(res.text, /outpost_mqtt_messages_out_total\{kind="feed"\} \d+/);
  });
});
