// Upstream sync to a third-party broker (Debian mosquitto) with per-device tokens: outages, a cold
// start while the upstream is down, and both outbox-full policies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { api, cli, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { mosquitto, freePort } from '../helpers/mosquitto.js';
import { sleep, until } from '../helpers/wait.js';

/** The issue asks for a 30 s outage; the default keeps the suite short. OUTPOST_SYNC_OUTAGE_S=30 runs the long one. */
const OUTAGE_MS = Number(process.env.OUTPOST_SYNC_OUTAGE_S ?? 8) * 1000;

function provisionDevice(dataDir: string) {
  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'field-sensor'], dataDir);
  for (const name of ['a', 'b']) cliJson(['asset', 'create', device.id, '--name', name, '--is', 'sensor', '--profile', '{"type":"integer"}'], dataDir);
  return device;
}

function writeConfig(dataDir: string, upstream: Record<string, unknown>): string {
  const file = join(dataDir, 'config.json');
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { reconnectMinMs: 100, reconnectMaxMs: 1000, ...upstream } }));
  return file;
}

/** A subscriber at the upstream with a persistent session: it also gets what was published while it was away. */
async function upstreamSubscriber(url: string, filter: string) {
  const client = await mqtt.connectAsync(url, { clientId: `test-sub-${process.pid}-${Date.now()}`, clean: false, reconnectPeriod: 200 });
  client.on('error', () => {});
  await client.subscribeAsync(filter, { qos: 1 });
  const byAsset = new Map<string, number[]>();
  const messages: Array<{ topic: string; text: string }> = [];
  client.on('message', (topic, payload) => {
    const text = payload.toString();
    messages.push({ topic, text });
    const asset = topic.split('/')[3]!;
    const list = byAsset.get(asset) ?? [];
    list.push((JSON.parse(text) as { value: number }).value);
    byAsset.set(asset, list);
  });
  return { client, byAsset, messages };
}

async function health(daemon: RunningDaemon) {
  return (await api(daemon.url, 'GET', '/healthz')).body as { upstream: { link: string; depth: number; sent: number; dropped: number; rejected: number } };
}

async function metric(daemon: RunningDaemon, name: string): Promise<number> {
  const text = (await api(daemon.url, 'GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

/** Every value sent, none missing, first arrivals in the order sent; returns how many arrived twice. */
function checkArrivals(sent: number[], received: number[], label: string): number {
  const seen = new Set<number>();
  const firsts: number[] = [];
  for (const v of received) {
    if (seen.has(v)) continue;
    seen.add(v);
    firsts.push(v);
  }
  const missing = sent.filter((v) => !seen.has(v));
  assert.deepEqual(missing, [], `${label}: ${missing.length} of ${sent.length} states missing`);
  assert.deepEqual(firsts, sent, `${label}: states arrived out of order`);
  return received.length - firsts.length;
}

test('continuous ingest while the upstream is stopped and restarted: every state arrives, in order per asset', async () => {
  const broker = await mosquitto();
  await broker.start();
  const dataDir = tempDataDir();
  const device = provisionDevice(dataDir);
  const remoteId = 'remoteDevice0000000000001';
  const config = writeConfig(dataDir, { url: broker.url, window: 16, devices: { [device.id]: { id: remoteId, token: 'device:remote-token-of-the-third-party' } } });
  const sub = await upstreamSubscriber(broker.url, `device/${remoteId}/asset/+/state`);
  const daemon = await startDaemon({ dataDir, args: ['--config', config] });
  try {
    await until('link up', async () => (await health(daemon)).upstream.link === 'up');
    const sent = new Map<string, number[]>([['a', []], ['b', []]]);
    let running = true;
    const ingest = async (asset: string) => {
      for (let i = 0; running; i++) {
        const r = await api(daemon.url, 'PUT', `/device/${device.id}/asset/${asset}/state`, { token: device.token, json: { value: i } });
        assert.equal(r.status, 200, r.text);
        sent.get(asset)!.push(i);
        await sleep(10);
      }
    };
    const loops = [ingest('a'), ingest('b')];
    await sleep(1500);
    await broker.stop();
    await until('link down', async () => (await health(daemon)).upstream.link === 'down');
    // Degraded, not failed: healthz stays 200 and states keep being accepted into the outbox.
    const during = await api(daemon.url, 'GET', '/healthz');
    assert.equal(during.status, 200);
    assert.equal(await metric(daemon, 'outpost_upstream_link_up'), 0);
    await sleep(OUTAGE_MS);
    assert.ok((await health(daemon)).upstream.depth > 0, 'states wait in the outbox during the outage');
    await broker.start();
    await sleep(1500);
    running = false;
    await Promise.all(loops);
    const total = sent.get('a')!.length + sent.get('b')!.length;
    await until('every state at the upstream', () => (sub.byAsset.get('a')?.length ?? 0) + (sub.byAsset.get('b')?.length ?? 0) >= total, 60_000);
    await until('outbox empty', async () => (await health(daemon)).upstream.depth === 0);
    let duplicates = 0;
    for (const asset of ['a', 'b']) duplicates += checkArrivals(sent.get(asset)!, sub.byAsset.get(asset) ?? [], `asset ${asset}`);
    // At least once: only rows in flight when the link broke may arrive twice.
    assert.ok(duplicates <= 16 * 2, `${duplicates} duplicates`);
    const h = await health(daemon);
    assert.equal(h.upstream.link, 'up');
    assert.ok(h.upstream.sent >= total, `sent ${h.upstream.sent} >= ${total}`);
    assert.equal(h.upstream.dropped, 0);
    // The upstream gets exactly {"value", "at"} with `at` always set.
    const one = JSON.parse(sub.messages[0]!.text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(one).sort(), ['at', 'value']);
    assert.match(one.at as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    console.log(`outage ${OUTAGE_MS / 1000} s: ${total} states, ${duplicates} duplicates at the upstream`);
  } finally {
    await daemon.stop();
    await sub.client.endAsync();
    await broker.dispose();
    removeDir(dataDir);
  }
});

test('cold start while the upstream is down: states wait in the outbox and drain when it comes up; commands come back down', async () => {
  const port = await freePort();
  const dataDir = tempDataDir();
  const device = provisionDevice(dataDir);
  cliJson(['asset', 'create', device.id, '--name', 'valve', '--is', 'actuator', '--profile', '{"type":"boolean"}'], dataDir);
  const remoteId = 'remoteDevice0000000000002';
  const config = writeConfig(dataDir, { url: `mqtt://127.0.0.1:${port}`, devices: { [device.id]: { id: remoteId, token: 'device:remote-token-2' } } });
  // The upstream's subscriber has a persistent session there; then the upstream goes away.
  const broker = await mosquitto({ port });
  await broker.start();
  const sub = await upstreamSubscriber(broker.url, `device/${remoteId}/asset/+/state`);
  await broker.stop();
  const daemon = await startDaemon({ dataDir, args: ['--config', config] });
  try {
    const sent: number[] = [];
    for (let i = 0; i < 200; i++) {
      const r = await api(daemon.url, 'PUT', `/device/${device.id}/state`, { token: device.token, json: { a: i, b: 1000 + i } });
      assert.equal(r.status, 200, r.text);
      sent.push(i);
    }
    const h = await health(daemon);
    assert.equal(h.upstream.link, 'down');
    assert.equal(h.upstream.depth, 400);
    await broker.start();
    await until('outbox drained', async () => (await health(daemon)).upstream.depth === 0, 60_000);
    await until('every state at the upstream', () => (sub.byAsset.get('a')?.length ?? 0) >= 200 && (sub.byAsset.get('b')?.length ?? 0) >= 200, 30_000);
    checkArrivals(sent, sub.byAsset.get('a')!, 'asset a');
    checkArrivals(sent.map((v) => 1000 + v), sub.byAsset.get('b')!, 'asset b');
    assert.equal((await health(daemon)).upstream.sent, 400);

    // A command published at the upstream reaches a local MQTT subscriber of that device.
    const local = await mqtt.connectAsync(`mqtt://127.0.0.1:${daemon.mqttPort}`, { username: device.token, reconnectPeriod: 0 });
    await local.subscribeAsync(`device/${device.id}/asset/valve/command`, { qos: 1 });
    const got = new Promise<string>((resolve) => local.on('message', (_t, p) => resolve(p.toString())));
    await sub.client.publishAsync(`device/${remoteId}/asset/valve/command`, JSON.stringify({ value: true, at: '2026-11-21T10:00:00.000Z' }), { qos: 1 });
    const command = JSON.parse(await got) as { value: boolean; at: string };
    assert.deepEqual(command, { value: true, at: '2026-11-21T10:00:00.000Z' });
    await local.endAsync();
  } finally {
    await sub.client.endAsync();
    await daemon.stop();
    await broker.dispose();
    removeDir(dataDir);
  }
});

test('outbox full, reject-new: HTTP 503 OUTBOX_FULL with Retry-After, no PUBACK over MQTT, counted', async () => {
  const port = await freePort(); // nothing listens: the upstream stays down
  const dataDir = tempDataDir();
  const device = provisionDevice(dataDir);
  const config = writeConfig(dataDir, { url: `mqtt://127.0.0.1:${port}`, maxBytes: 3000, whenFull: 'reject-new', devices: { [device.id]: { id: 'remoteDevice0000000000003', token: 'device:t3' } } });
  const daemon = await startDaemon({ dataDir, args: ['--config', config] });
  try {
    let accepted = 0;
    let refusal: Awaited<ReturnType<typeof api>> | undefined;
    for (let i = 0; i < 200 && !refusal; i++) {
      const r = await api(daemon.url, 'PUT', `/device/${device.id}/asset/a/state`, { token: device.token, json: { value: i } });
      if (r.status === 200) accepted++;
      else refusal = r;
    }
    assert.ok(refusal, 'the outbox filled up');
    assert.equal(refusal.status, 503);
    assert.equal(refusal.body.code, 'OUTBOX_FULL');
    assert.ok(Number(refusal.headers.get('retry-after')) > 0);
    // The refused state is not stored either: the latest state is the last accepted one.
    const latest = await api(daemon.url, 'GET', `/device/${device.id}/asset/a/state`, { token: device.token });
    assert.equal(latest.body.state.value, accepted - 1);
    // MQTT: no PUBACK; the connection is closed so the client re-sends later.
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${daemon.mqttPort}`, { username: device.token, reconnectPeriod: 0 });
    client.on('error', () => {});
    let acked = false;
    client.publish(`device/${device.id}/asset/a/state`, '{"value": 9999}', { qos: 1 }, (err) => {
      if (!err) acked = true;
    });
    await new Promise<void>((resolve) => client.once('close', () => resolve()));
    assert.equal(acked, false);
    client.end(true);
    await until('rejections counted', async () => (await health(daemon)).upstream.rejected >= 2);
    assert.ok((await metric(daemon, 'outpost_outbox_rejected_total')) >= 2);
    const h = await health(daemon);
    assert.equal(h.upstream.depth, accepted);
    assert.equal(h.upstream.dropped, 0);
    // The CLI sees the same outbox from another process, and a purge is counted as dropped.
    // The daemon persists its counters once a second; the CLI reads what was persisted.
    const cliStatus = () => cliJson<{ link: string; depth: number; rejected: number; oldestAt: string }>(['outbox', 'status', '--config', config], dataDir);
    await until('the CLI sees the rejections', () => cliStatus().rejected >= 2);
    const status = cliStatus();
    assert.equal(status.link, 'down');
    assert.equal(status.depth, accepted);
    assert.ok(status.rejected >= 2);
    assert.ok(Date.parse(status.oldestAt) > 0);
    const refusedPurge = cli(['outbox', 'purge', '--before', new Date(Date.now() + 1000).toISOString(), '--data', dataDir]);
    assert.equal(refusedPurge.code, 2, 'a purge needs --yes');
    const purged = cliJson<{ purged: number }>(['outbox', 'purge', '--before', new Date(Date.now() + 1000).toISOString(), '--yes', '--config', config], dataDir);
    assert.equal(purged.purged, accepted);
    await until('the daemon sees the purge', async () => (await health(daemon)).upstream.depth === 0);
    assert.equal((await health(daemon)).upstream.dropped, accepted);
    // Room again: new states are accepted.
    assert.equal((await api(daemon.url, 'PUT', `/device/${device.id}/asset/a/state`, { token: device.token, json: { value: 1 } })).status, 200);
  } finally {
    await daemon.stop();
    removeDir(dataDir);
  }
});

test('outbox full, drop-oldest (default): the newest states are kept, every dropped one is counted and the rest drains', async () => {
  const port = await freePort();
  const dataDir = tempDataDir();
  const device = provisionDevice(dataDir);
  const remoteId = 'remoteDevice0000000000004';
  const config = writeConfig(dataDir, { url: `mqtt://127.0.0.1:${port}`, maxBytes: 3000, devices: { [device.id]: { id: remoteId, token: 'device:t4' } } });
  const broker = await mosquitto({ port });
  await broker.start();
  const sub = await upstreamSubscriber(broker.url, `device/${remoteId}/asset/+/state`);
  await broker.stop();
  const daemon = await startDaemon({ dataDir, args: ['--config', config] });
  try {
    const total = 300;
    for (let i = 0; i < total; i++) {
      const r = await api(daemon.url, 'PUT', `/device/${device.id}/asset/a/state`, { token: device.token, json: { value: i } });
      assert.equal(r.status, 200, r.text);
    }
    await until('counters flushed', async () => (await health(daemon)).upstream.dropped > 0);
    const h = await health(daemon);
    assert.ok(h.upstream.depth < total && h.upstream.depth > 0);
    assert.equal(h.upstream.depth + h.upstream.dropped, total, 'nothing leaves the outbox uncounted');
    assert.equal(await metric(daemon, 'outpost_outbox_dropped_total'), h.upstream.dropped);
    await broker.start();
    await until('outbox drained', async () => (await health(daemon)).upstream.depth === 0, 30_000);
    const kept = Array.from({ length: h.upstream.depth }, (_, i) => total - h.upstream.depth + i);
    await until('the kept states at the upstream', () => (sub.byAsset.get('a')?.length ?? 0) >= kept.length, 30_000);
    checkArrivals(kept, sub.byAsset.get('a')!, 'asset a');
    assert.equal((await health(daemon)).upstream.sent, h.upstream.depth);
    await sub.client.endAsync();
  } finally {
    await daemon.stop();
    await broker.dispose();
    removeDir(dataDir);
  }
});
