// Protocol-level limits of the MQTT door (issue 7: defects 2, 8, 15 and 17), with raw sockets and
// MQTT.js against the compiled daemon.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, cliJson, provision, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient, connectRefusedCode, eventually, sleep, within, type TestClient } from './helpers.js';
import { rawConnect, rawSession, remainingLength, rssBytes, type RawConnection } from './raw.js';

let daemon: RunningDaemon;
let port: number;
let dev: { id: string; token: string };
let other: { id: string; token: string };
let app: { token: string };
const open: Array<TestClient | RawConnection> = [];

before(async () => {
  daemon = await startDaemon();
  port = daemon.mqttPort;
  const p = provision(daemon.dataDir, [{ name: 'temp', is: 'sensor', profile: { type: 'number' } }]);
  dev = p.device;
  app = p.app;
  other = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'other'], daemon.dataDir);
});

afterEach(async () => {
  for (const c of open.splice(0)) {
    if ('client' in c) await c.end().catch(() => {});
    else c.close();
  }
});

after(async () => {
  await daemon.stop();
  removeDir(daemon.dataDir);
});

async function mqttClient(token: string, options = {}): Promise<TestClient> {
  const c = await connectClient(port, token, options);
  open.push(c);
  return c;
}

async function raw(): Promise<RawConnection> {
  const c = await rawConnect(port);
  open.push(c);
  return c;
}

async function session(token: string, clientId = ''): Promise<RawConnection> {
  const c = await rawSession(port, token, clientId);
  open.push(c);
  return c;
}

/** A good client still publishes and gets its PUBACK after the commit. */
async function stillServes(): Promise<void> {
  assert.equal(daemon.proc.exitCode, null, 'daemon still running');
  const c = await mqttClient(dev.token);
  const value = Math.random();
  await c.client.publishAsync(`device/${dev.id}/asset/temp/state`, JSON.stringify({ value }), { qos: 1 });
  const res = await api(daemon.url, 'GET', `/device/${dev.id}/asset/temp/state`, { token: dev.token });
  assert.equal(res.body.state.value, value);
}

/**
 * Writes `total` bytes after `header` in 1 MiB chunks, as fast as the connection takes them, and
 * stops when it closes. Returns how much was written before the close.
 */
async function flood(c: RawConnection, header: Buffer, total: number): Promise<number> {
  c.send(header);
  const chunk = Buffer.alloc(1 << 20, 0x41);
  let written = 0;
  while (written < total && !c.isClosed()) {
    if (!c.send(chunk)) await Promise.race([new Promise((r) => c.socket.once('drain', r)), c.closed, sleep(2000)]);
    written += chunk.length;
  }
  return written;
}

const HUGE = Buffer.from([0xff, 0xff, 0xff, 0x7f]); // remaining length 268 435 455, the most MQTT can say

describe('packet size limits, from the fixed header (defect 2)', () => {
  test('before CONNECT: a first packet announcing 256 MiB is refused from its header, nothing is buffered', async () => {
    const before = rssBytes(daemon.proc.pid!);
    const c = await raw();
    const written = await flood(c, Buffer.concat([Buffer.from([0x10]), HUGE]), 128 << 20);
    await within(c.closed, 10_000, 'connection not closed');
    const grown = rssBytes(daemon.proc.pid!) - before;
    assert.ok(written < 128 << 20, `closed after ${written} bytes written`);
    assert.ok(grown < 48 << 20, `RSS grew by ${grown} bytes`);
    await eventually(() => daemon.logs.some((l) => l.includes('mqtt packet over its size limit') && l.includes('"limit":8192')), 5000, 'the refusal is logged');
    await stillServes();
  });

  test('after CONNECT: a PUBLISH announcing 256 MiB is refused from its header; so is one just over payloadLimit + topic room', async () => {
    const before = rssBytes(daemon.proc.pid!);
    const c = await session(dev.token);
    const written = await flood(c, Buffer.concat([Buffer.from([0x32]), HUGE]), 128 << 20);
    await within(c.closed, 10_000, 'connection not closed');
    assert.ok(written < 128 << 20);
    assert.ok(rssBytes(daemon.proc.pid!) - before < 48 << 20);
    assert.equal(c.packets.filter((p) => p.cmd === 'puback').length, 0);

    // 65 536 + 65 539 is the largest PUBLISH that may still carry a payload within the limit.
    const limit = 65_536 + 2 + 65_535 + 2;
    const d = await session(dev.token);
    d.send(Buffer.from([0x30, ...remainingLength(limit + 1)]));
    await within(d.closed, 10_000, 'PUBLISH of limit + 1 bytes: connection not closed');
    await stillServes();
  });

  test('a header trickled one byte at a time is refused as soon as its length is complete', async () => {
    const c = await session(dev.token);
    for (const byte of [0x30, 0xff, 0xff, 0xff]) {
      c.send(Buffer.from([byte]));
      await sleep(100);
      assert.ok(!c.isClosed(), 'still open while the length is incomplete');
    }
    c.send(Buffer.from([0x7f]));
    await within(c.closed, 10_000, 'connection not closed after the last length byte');
    // A fifth length byte is malformed (MQTT allows four).
    const d = await session(dev.token);
    d.send(Buffer.from([0x30, 0x80, 0x80, 0x80, 0x80, 0x01]));
    await within(d.closed, 10_000, 'malformed length: connection not closed');
  });

  test('CONNECT is held to mqtt.connectPacketLimit (8 KiB): a 7 KiB password connects, a 9 KiB one is closed', async () => {
    const ok = await raw();
    ok.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: '', keepalive: 60, username: dev.token, password: Buffer.alloc(7 * 1024, 0x61) });
    assert.equal(((await ok.next('connack')) as { returnCode: number }).returnCode, 0);
    const big = await raw();
    big.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: '', keepalive: 60, username: dev.token, password: Buffer.alloc(9 * 1024, 0x61) });
    await within(big.closed, 10_000, 'oversized CONNECT: connection not closed');
    assert.equal(big.packets.length, 0, 'no CONNACK');
  });

  test('a payload over payloadLimit but within the packet limit is still refused on the errors topic, the connection stays', async () => {
    const c = await mqttClient(dev.token);
    await c.subscribeCode(`device/${dev.id}/errors`);
    await c.client.publishAsync(`device/${dev.id}/asset/temp/state`, Buffer.alloc(65_537, 0x31), { qos: 1 });
    const report = await c.waitFor((m) => m.topic === `device/${dev.id}/errors`);
    assert.equal(JSON.parse(report.text).code, 'PAYLOAD_TOO_LARGE');
    assert.ok(c.client.connected);
  });
});

describe('client ids (defects 8 and 17)', () => {
  test("a device cannot take over another device's client id: CONNACK 2, and the holder stays connected", async () => {
    const holder = await mqttClient(dev.token, { clientId: 'sensor-1' });
    for (let i = 0; i < 3; i++) assert.equal(await connectRefusedCode(port, other.token, { clientId: 'sensor-1' }), 2);
    assert.equal(await connectRefusedCode(port, app.token, { clientId: 'sensor-1' }), 2, 'an application token neither');
    await sleep(200);
    assert.ok(holder.client.connected, 'the holder was not kicked');
    await eventually(() => daemon.logs.some((l) => l.includes('client id in use by another token')), 5000, 'the refusal is logged');
  });

  test('the same device still replaces its own session with the same client id (MQTT takeover)', async () => {
    const first = await mqttClient(dev.token, { clientId: 'sensor-2' });
    const second = await mqttClient(dev.token, { clientId: 'sensor-2' });
    await within(first.closed, 5000, 'the first session was not replaced');
    assert.ok(second.client.connected);
    // once the id is free, anyone may use it
    await second.end();
    const third = await mqttClient(other.token, { clientId: 'sensor-2' });
    assert.ok(third.client.connected);
  });

  test('client ids are capped at mqtt.maxClientIdBytes (256) in UTF-8 bytes; a NUL in one is refused', async () => {
    assert.ok((await mqttClient(dev.token, { clientId: 'x'.repeat(256) })).client.connected);
    assert.equal(await connectRefusedCode(port, dev.token, { clientId: 'x'.repeat(257) }), 2);
    assert.equal(await connectRefusedCode(port, dev.token, { clientId: 'é'.repeat(129) }), 2, '258 bytes');
    assert.equal(await connectRefusedCode(port, dev.token, { clientId: 'a\u0000b' }), 2);
  });
});

describe('publish rules of MQTT 3.1.1 (defect 17)', () => {
  test('a QoS 1 PUBLISH with packet id 0 closes the connection without a PUBACK, and stores nothing', async () => {
    const c = await session(dev.token);
    c.send({ cmd: 'publish', topic: `device/${dev.id}/asset/temp/state`, payload: '-273', qos: 1, messageId: 0, retain: false, dup: false });
    await within(c.closed, 5000, 'connection not closed');
    assert.equal(c.packets.filter((p) => p.cmd === 'puback').length, 0);
    const res = await api(daemon.url, 'GET', `/device/${dev.id}/asset/temp/state`, { token: dev.token });
    assert.notEqual(res.body?.state?.value, -273);
  });

  test('a NUL in a topic name or a topic filter closes the connection', async () => {
    const c = await session(dev.token);
    c.send({ cmd: 'publish', topic: `device/${dev.id}/asset/te\u0000mp/state`, payload: '1', qos: 1, messageId: 7, retain: false, dup: false });
    await within(c.closed, 5000, 'PUBLISH: connection not closed');
    assert.equal(c.packets.filter((p) => p.cmd === 'puback').length, 0);
    const d = await session(dev.token);
    d.send({ cmd: 'subscribe', messageId: 3, subscriptions: [{ topic: `device/${dev.id}/\u0000/#`, qos: 0 }] });
    await within(d.closed, 5000, 'SUBSCRIBE: connection not closed');
    await stillServes();
  });
});

describe('subscriptions per connection (defect 15)', () => {
  test('at most mqtt.maxSubscriptionsPerConnection (256) filters: SUBACK 0x80 beyond, the connection stays; re-subscribing and freed slots work', async () => {
    const c = await mqttClient(dev.token);
    const filters = Array.from({ length: 300 }, (_, i) => `device/${dev.id}/asset/a${i}/feed`);
    let granted: number[];
    try {
      granted = (await c.client.subscribeAsync(filters, { qos: 1 })).map((g) => g.qos);
    } catch (err) {
      granted = (err as { packet: { granted: number[] } }).packet.granted;
    }
    assert.equal(granted.length, 300);
    assert.deepEqual(granted.slice(0, 256), Array(256).fill(1));
    assert.deepEqual(granted.slice(256), Array(44).fill(128));
    assert.ok(c.client.connected);
    assert.equal(await c.subscribeCode(`device/${dev.id}/asset/a0/feed`, 0), 0, 'changing the QoS of a held filter is no new one');
    assert.equal(await c.subscribeCode(`device/${dev.id}/errors`), 128);
    await c.client.unsubscribeAsync(`device/${dev.id}/asset/a1/feed`);
    assert.equal(await c.subscribeCode(`device/${dev.id}/errors`), 1);
    // the cap is per connection
    const d = await mqttClient(dev.token);
    assert.equal(await d.subscribeCode(`device/${dev.id}/errors`), 1);
  });
});

describe('refused states over QoS 1 are acknowledged and reported, never a dropped connection (defects 5 and 6)', () => {
  const deep = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

  test('a 32 000-deep nested array: PUBACK, an errors report, nothing stored, the connection stays — asset state and device state', async () => {
    const created = await api(daemon.url, 'POST', `/device/${dev.id}/assets`, { token: dev.token, json: { name: 'list', is: 'sensor', profile: { type: 'array' } } });
    assert.equal(created.status, 201, created.text);
    const c = await mqttClient(dev.token);
    await c.subscribeCode(`device/${dev.id}/errors`);
    const reports = () => c.received.filter((m) => m.topic === `device/${dev.id}/errors`).map((m) => JSON.parse(m.text));

    await within(c.client.publishAsync(`device/${dev.id}/asset/list/state`, `{"value": ${deep(32_000)}}`, { qos: 1 }), 10_000, 'no PUBACK for the asset state');
    await eventually(() => reports().some((r) => r.topic === `device/${dev.id}/asset/list/state`), 5000, 'asset state not reported');
    assert.ok(c.client.connected);

    await within(c.client.publishAsync(`device/${dev.id}/state`, `{"temp": 5, "list": {"value": ${deep(32_000)}}}`, { qos: 1 }), 10_000, 'no PUBACK for the device state');
    await eventually(() => reports().some((r) => r.topic === `device/${dev.id}/state`), 5000, 'device state not reported');
    assert.ok(c.client.connected);
    for (const r of reports()) assert.notEqual(r.code, 'INTERNAL', JSON.stringify(r));
    const list = await api(daemon.url, 'GET', `/device/${dev.id}/asset/list/state`, { token: dev.token });
    assert.equal(list.status, 404, 'nothing stored for the deep value');
    await stillServes();
  });
});
