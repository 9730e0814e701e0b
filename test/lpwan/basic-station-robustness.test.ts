// The Basics Station door under abuse, over real WebSockets: a station flooding messages, one
// reconnecting in a loop, one that stops reading, oversized and deeply nested messages. None may
// stall the door or grow its memory without bound (docs/security.md, "Basics Station limits").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BasicStationDoor, type BasicStationLimits } from '../../src/doors/basic-station/door.js';
import { EU868 } from '../../src/lpwan/lorawan/regions.js';
import { MetricsRegistry } from '../../src/ops/metrics.js';
import { createLogger } from '../../src/ops/logger.js';
import { systemClock } from '../../src/core/time.js';
import type { RadioFrame } from '../../src/lpwan/radio.js';
import { eventually, sleep } from '../mqtt/helpers.js';
import { uplinkFrame } from './frames.js';
import { StationSimulator } from './station.js';

/** Stations known to the door: a plain map, the way the store answers (auth "none" asks only for names). */
const directory = { get: (eui: string) => ({ eui, name: `s-${eui.slice(-4)}` }), tokenMatches: () => false };

async function withDoor(work: (door: BasicStationDoor, frames: RadioFrame[], metrics: MetricsRegistry, url: (eui: string) => string) => Promise<void>, limits: Partial<BasicStationLimits> = {}) {
  const metrics = new MetricsRegistry();
  const door = new BasicStationDoor({ host: '127.0.0.1', port: 0, auth: 'none', stations: directory, region: EU868, subBand: 1, clock: systemClock, logger: createLogger('silent'), metrics, limits });
  const frames: RadioFrame[] = [];
  door.onFrame((f) => frames.push(f));
  await door.start();
  try {
    await work(door, frames, metrics, (eui) => `ws://127.0.0.1:${door.port}/router-${eui}`);
  } finally {
    await door.stop();
  }
}

const counter = (metrics: MetricsRegistry, name: string, label: string) => Number(new RegExp(`${name}\\{[a-z]+="${label}"\\} (\\d+)`).exec(metrics.render())?.[1] ?? 0);
const keys = { devAddr: '26011234', nwkSKey: Buffer.alloc(16, 1), appSKey: Buffer.alloc(16, 2) };

test('a flood from one station is cut at its rate; another station is still served at once', { timeout: 60_000 }, async () => {
  await withDoor(async (door, frames, metrics, url) => {
    const flooder = await StationSimulator.open(url('0000000000000001'));
    const quiet = await StationSimulator.open(url('0000000000000002'));
    const uplink = JSON.stringify({ msgtype: 'timesync', txtime: 5 });
    for (let i = 0; i < 20_000; i++) flooder.send(uplink);
    // While the flood is read, the other station's timesync is answered promptly.
    const t0 = performance.now();
    quiet.send({ msgtype: 'timesync', txtime: 42 });
    await quiet.waitFor((m) => m.msgtype === 'timesync' && m.txtime === 42, 5000);
    assert.ok(performance.now() - t0 < 2000, `answered after ${(performance.now() - t0).toFixed(0)} ms`);
    await eventually(() => counter(metrics, 'outpost_bs_dropped_total', 'rate-limited') + flooder.received.length >= 20_000, 10_000, 'every flood message answered or dropped');
    const dropped = counter(metrics, 'outpost_bs_dropped_total', 'rate-limited');
    assert.ok(dropped >= 15_000, `${dropped} dropped`);
    assert.ok(flooder.received.length <= 5000, `${flooder.received.length} answered`);
    // Uplinks still flow for the quiet station.
    quiet.uplink(uplinkFrame(keys, { fCnt: 1, fPort: 1, payload: Buffer.from([1]) }), { xtime: '1000' });
    await eventually(() => frames.some((f) => f.source === 'bs:0000000000000002'), 5000, 'the quiet station\'s uplink');
    flooder.close();
    quiet.close();
  }, { messagesPerSecond: 200, messagesBurst: 1000 });
});

test('a station reconnecting 200 times keeps one session; oversized and deep messages are refused', { timeout: 60_000 }, async () => {
  await withDoor(async (door, _frames, metrics, url) => {
    const heapBefore = process.memoryUsage().heapUsed;
    let last: StationSimulator | undefined;
    for (let i = 0; i < 200; i++) {
      last = await StationSimulator.open(url('00000000000000AA'));
      last.send({ msgtype: 'version', station: 'loop' });
    }
    await last!.waitFor((m) => m.msgtype === 'router_config');
    await eventually(() => (door.health().detail!.connected as number) === 1, 5000, 'one session');
    assert.ok(counter(metrics, 'outpost_bs_dropped_total', 'replaced') >= 199);
    const heapGrowth = (process.memoryUsage().heapUsed - heapBefore) / 1048576;
    assert.ok(heapGrowth < 50, `heap grew ${heapGrowth.toFixed(1)} MB`);

    // A message over the limit closes that socket (1009); nesting is refused before parsing.
    last!.send(`{"msgtype":"updf","x":${'['.repeat(200)}${']'.repeat(200)}}`);
    await eventually(() => counter(metrics, 'outpost_bs_dropped_total', 'too-deep') === 1, 5000, 'too deep counted');
    last!.send(JSON.stringify({ msgtype: 'updf', pad: 'x'.repeat(20_000) }));
    assert.equal(await last!.closed(), 1009);
  }, { maxMessageBytes: 16 * 1024 });
});

test('a station that stops reading is disconnected once its queue passes the bound', { timeout: 60_000 }, async () => {
  await withDoor(async (door, _frames, metrics, url) => {
    const slow = await StationSimulator.open(url('00000000000000BB'));
    await slow.hello();
    // The station stops reading its socket; each `version` asks for a ~1 KB router_config.
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const version = JSON.stringify({ msgtype: 'version', station: 'slow' });
    for (let i = 0; i < 30_000 && slow.ws.readyState === slow.ws.OPEN; i++) {
      slow.send(version);
      if (i % 500 === 499) await sleep(5);
    }
    await eventually(() => counter(metrics, 'outpost_bs_dropped_total', 'slow-station') >= 1, 20_000, 'slow station disconnected');
    await eventually(() => (door.health().detail!.connected as number) === 0, 5000, 'no session left');
  }, { maxQueuedBytes: 256 * 1024, messagesPerSecond: 100_000, messagesBurst: 100_000 });
});

test('a station that stops answering pings is dropped', { timeout: 30_000 }, async () => {
  await withDoor(async (door, _frames, metrics, url) => {
    const mute = await StationSimulator.open(url('00000000000000CC'));
    const alive = await StationSimulator.open(url('00000000000000DD'));
    await mute.hello();
    // Not reading its socket, it sends no pong either.
    (mute.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await eventually(() => counter(metrics, 'outpost_bs_dropped_total', 'no-pong') === 1, 10_000, 'the mute station dropped');
    await sleep(600);
    assert.equal(door.health().detail!.connected, 1, 'the station that answers stays');
    alive.close();
    mute.close();
  }, { pingIntervalMs: 200 });
});
