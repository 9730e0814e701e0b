// LPWAN benchmark: uplinks through the whole path (UDP datagram → MIC → decrypt → ABCL → SQLite →
// MQTT feed) with many ABP devices, datagram → feed latency, RSS with 10 000 provisioned devices,
// and uplink → PULL_RESP time for a queued downlink. The load generator is a packet forwarder
// simulator in this process; the daemon is the compiled one. The daemon's CPU time per uplink is
// set beside the CPU time per MQTT QoS 1 state measured in the same run (bench/mqtt.ts's load),
// the anchor for what one uplink may cost.
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { resolve } from 'node:path';
import mqtt from 'mqtt';
import { Store } from '../src/store/store.js';
import { cmacKey, cryptFrmPayload, dataMic, Direction } from '../src/lpwan/lorawan/crypto.js';
import { onAirBytes } from '../src/lpwan/lorawan/phy.js';
import { api, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../test/helpers/daemon.js';
import { cpuTimes, rssBytes, sleep, type BenchRow } from './lib.js';
import { provision, runLoad, settings, startOutpost } from './mqtt.js';

const NWK = Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex');
const APP = Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex');
const NWK_CMAC = cmacKey(NWK);
const EUI = Buffer.from('b827ebfffe00be9c', 'hex');

export interface BenchDevice {
  id: string;
  devAddr: string;
  devAddrLe: Buffer;
  fCnt: number;
}

/** Writes devices straight into a fresh data dir (the daemon is not running yet): fast for 10 000. */
export function provisionDevices(dataDir: string, count: number): BenchDevice[] {
  const store = Store.open(dataDir);
  const lorawan = store.lorawanDevices;
  const devices: BenchDevice[] = [];
  const now = Date.now();
  const codec = JSON.stringify({ uplink: { format: 'abcl', file: 'counter.abcl.json' } });
  store.transaction(() => {
    for (let i = 0; i < count; i++) {
      const { device } = store.devices.create({ name: `meter-${i}` }, now);
      store.assets.create({ deviceId: device.id, name: 'count', title: null, description: null, is: 'sensor', profile: { type: 'integer' } }, now);
      store.assets.create({ deviceId: device.id, name: 'battery', title: null, description: null, is: 'sensor', profile: { type: 'number' } }, now);
      store.devices.update(device.id, { payloadFormat: 'abcl', codec }, now);
      const devAddr = (0x26000000 + i).toString(16).toUpperCase().padStart(8, '0');
      lorawan.put(
        { deviceId: device.id, activation: 'abp', devEui: null, joinEui: null, appKey: null, fPort: 1, deviceClass: 'A', adr: true, devAddr, nwkSKey: NWK, appSKey: APP, fCntUp: 0, fCntDown: 0, updatedOn: now },
        [],
      );
      devices.push({ id: device.id, devAddr, devAddrLe: onAirBytes(devAddr), fCnt: 0 });
    }
  });
  store.close();
  return devices;
}

/** An uplink of the counter document: 4-byte big-endian count + battery byte, FPort 1. */
export function uplink(d: BenchDevice, count: number, confirmed = false): Buffer {
  const plain = Buffer.alloc(5);
  plain.writeUInt32BE(count >>> 0);
  plain[4] = 0xa5;
  const fCnt = d.fCnt++;
  const head = Buffer.alloc(9);
  head[0] = confirmed ? 0x80 : 0x40;
  d.devAddrLe.copy(head, 1);
  head.writeUInt16LE(fCnt & 0xffff, 6);
  head[8] = 1;
  const msg = Buffer.concat([head, cryptFrmPayload(APP, Direction.Up, d.devAddrLe, fCnt, plain)]);
  return Buffer.concat([msg, dataMic(NWK_CMAC, Direction.Up, d.devAddrLe, fCnt, msg)]);
}

export function pushData(payload: Buffer, tmst: number): Buffer {
  const json = JSON.stringify({ rxpk: [{ tmst, chan: 0, rfch: 0, freq: 868.1, stat: 1, modu: 'LORA', datr: 'SF7BW125', codr: '4/5', rssi: -60, lsnr: 8, size: payload.length, data: payload.toString('base64') }] });
  return Buffer.concat([Buffer.from([2, (tmst >> 8) & 0xff, tmst & 0xff, 0]), EUI, Buffer.from(json)]);
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface Rig {
  daemon: RunningDaemon;
  devices: BenchDevice[];
  app: string;
  send: (bytes: Buffer) => void;
  pullResps: Array<{ at: number; bytes: Buffer }>;
  /** PUSH_ACKs received so far (the daemon sends one as it reads each PUSH_DATA). */
  pushAcks: () => number;
  close: () => Promise<void>;
}

/**
 * A daemon with `count` ABP devices and a packet forwarder simulator. `otherCheckout`: run that
 * checkout's build instead of this one (bench/lpwan-compare.ts), its data dir provisioned and its
 * token made by its own code, so the database has its schema; the load is this file's either way.
 */
export async function rig(count: number, otherCheckout?: string): Promise<Rig> {
  const dataDir = tempDataDir();
  const scope = ['token', 'create', '--name', 'bench', '--scopes', 'read,command,admin'];
  let devices: BenchDevice[];
  let daemon: RunningDaemon;
  let app: string;
  if (otherCheckout) {
    const theirs = (await import(resolve(otherCheckout, 'bench', 'lpwan.ts'))) as { provisionDevices: typeof provisionDevices };
    const program = resolve(otherCheckout, 'dist', 'cli', 'main.js');
    devices = theirs.provisionDevices(dataDir, count);
    daemon = await startDaemon({ dataDir, program, env: { OUTPOST_RATE_LIMIT: '0' } });
    app = (JSON.parse(execFileSync(process.execPath, [program, ...scope, '--data', dataDir, '--json'], { encoding: 'utf8' })) as { token: string }).token;
  } else {
    devices = provisionDevices(dataDir, count);
    daemon = await startDaemon({ dataDir, env: { OUTPOST_RATE_LIMIT: '0' } });
    app = cliJson<{ token: string }>(scope, dataDir).token;
  }
  const socket = createSocket('udp4');
  const pullResps: Rig['pullResps'] = [];
  let pushAcks = 0;
  socket.on('message', (m) => {
    if (m[3] === 0x01) pushAcks++;
    if (m[3] === 0x03) pullResps.push({ at: performance.now(), bytes: m });
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const send = (bytes: Buffer) => socket.send(bytes, daemon.gwmpPort, '127.0.0.1');
  // PULL_DATA opens the downlink path; a real forwarder repeats it every few seconds, and a gateway
  // that stops is taken for offline (no downlinks), so the simulator keeps it up for the whole run.
  const pullData = () => send(Buffer.concat([Buffer.from([2, 0, 1, 2]), EUI]));
  pullData();
  const keepAlive = setInterval(pullData, 5000);
  await sleep(200);
  return {
    daemon,
    devices,
    app,
    send,
    pullResps,
    pushAcks: () => pushAcks,
    close: async () => {
      clearInterval(keepAlive);
      socket.close();
      await daemon.stop();
      removeDir(dataDir);
    },
  };
}

/**
 * Feed messages of `count` by value → arrival time, for the values in [from, to): the retained
 * feed messages the subscription brings (each device's last count of an earlier phase) are not
 * this phase's.
 */
async function feedWatcher(r: Rig, from = 0, to = Number.MAX_SAFE_INTEGER) {
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${r.daemon.mqttPort}`, { username: r.app, password: 'x', reconnectPeriod: 0 });
  await client.subscribeAsync('device/+/asset/count/feed', { qos: 0 });
  const arrivals = new Map<number, number>();
  client.on('message', (_t, payload) => {
    const m = /"value":(\d+)/.exec(payload.toString());
    const value = m ? Number(m[1]) : NaN;
    if (value >= from && value < to) arrivals.set(value, performance.now());
  });
  return { arrivals, close: () => client.endAsync(true) };
}

/** A counter of the daemon's /metrics, summed over its labels; NaN when the daemon has no such series. */
async function metricTotal(r: Rig, name: string): Promise<number> {
  const text = (await api(r.daemon.url, 'GET', '/metrics', { token: r.app })).text;
  const values = [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'gm'))].map((m) => Number(m[1]));
  return values.length > 0 ? values.reduce((a, b) => a + b, 0) : NaN;
}

/** Group commits the daemon made so far (its outpost_store_commit_seconds histogram's count). */
const commitsSoFar = (r: Rig) => metricTotal(r, 'outpost_store_commit_seconds_count');

/** `total` uplinks with `window` in flight, counted by their feed messages; the uplinks' values start at `offset`. */
export async function throughput(r: Rig, total: number, window: number, offset = 0) {
  const feed = await feedWatcher(r, offset, offset + total);
  const commits0 = await commitsSoFar(r);
  const cpu0 = cpuTimes(r.daemon.proc.pid!);
  const started = performance.now();
  let next = 0;
  let lastCount = 0;
  let lastArrival = started;
  // UDP may drop a datagram under a burst: the run ends when everything arrived or nothing more
  // arrived for 2 s, and the rate counts up to the last arrival (the lost ones are reported).
  while (feed.arrivals.size < total && performance.now() - lastArrival < 2000) {
    while (next < total && next - feed.arrivals.size < window) {
      const d = r.devices[next % r.devices.length]!;
      r.send(pushData(uplink(d, offset + next), next));
      next++;
    }
    await new Promise((res) => setImmediate(res));
    if (feed.arrivals.size !== lastCount) {
      lastCount = feed.arrivals.size;
      lastArrival = performance.now();
    }
  }
  const seconds = (lastArrival - started) / 1000;
  const cpu1 = cpuTimes(r.daemon.proc.pid!);
  const received = Math.max(1, feed.arrivals.size);
  const userPerUplink = (cpu1.user - cpu0.user) / received;
  const systemPerUplink = (cpu1.system - cpu0.system) / received;
  const commits = (await commitsSoFar(r)) - commits0;
  await feed.close();
  return {
    perSecond: feed.arrivals.size / seconds,
    received: feed.arrivals.size,
    lost: total - feed.arrivals.size,
    cpuPerUplink: userPerUplink + systemPerUplink,
    userPerUplink,
    systemPerUplink,
    perCommit: feed.arrivals.size / commits,
  };
}

/** States the daemon committed so far (counted once they are on the disk). */
const statesSoFar = (r: Rig) => metricTotal(r, 'outpost_states_ingested_total');

/**
 * The same uplinks as `throughput` with nobody subscribed, so no feed message is sent at all, as for
 * the MQTT anchor's states. Nothing arrives to count, so `window` is counted in PUSH_ACKs (the daemon
 * sends each as it reads the datagram) and the end is the daemon's own count of committed states
 * reaching two per uplink (or not moving for 2 s).
 */
export async function throughputUnwatched(r: Rig, total: number, window: number, offset = 0) {
  const states0 = await statesSoFar(r);
  const acks0 = r.pushAcks();
  const cpu0 = cpuTimes(r.daemon.proc.pid!);
  const started = performance.now();
  let next = 0;
  let lastAcks = 0;
  let lastAck = started;
  while (r.pushAcks() - acks0 < total && performance.now() - lastAck < 2000) {
    while (next < total && next - (r.pushAcks() - acks0) < window) {
      const d = r.devices[next % r.devices.length]!;
      r.send(pushData(uplink(d, offset + next), next));
      next++;
    }
    await new Promise((res) => setImmediate(res));
    if (r.pushAcks() !== lastAcks) {
      lastAcks = r.pushAcks();
      lastAck = performance.now();
    }
  }
  let stored = (await statesSoFar(r)) - states0;
  let lastMove = performance.now();
  while (stored < 2 * total && performance.now() - lastMove < 2000) {
    await sleep(5);
    const now = (await statesSoFar(r)) - states0;
    if (now !== stored) lastMove = performance.now();
    stored = now;
  }
  const cpu1 = cpuTimes(r.daemon.proc.pid!);
  const received = Math.max(1, stored / 2);
  return { received: stored / 2, cpuPerUplink: (cpu1.user - cpu0.user + cpu1.system - cpu0.system) / received };
}

async function latency(r: Rig, rate: number, seconds: number, offset: number) {
  const feed = await feedWatcher(r);
  const sentAt = new Map<number, number>();
  const total = rate * seconds;
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    while (performance.now() < due) await new Promise((res) => setTimeout(res, 1));
    const value = offset + i;
    const d = r.devices[i % r.devices.length]!;
    const bytes = pushData(uplink(d, value), i);
    sentAt.set(value, performance.now());
    r.send(bytes);
  }
  await sleep(2000);
  await feed.close();
  const lat = [...sentAt].filter(([v]) => feed.arrivals.has(v)).map(([v, t]) => feed.arrivals.get(v)! - t).sort((a, b) => a - b);
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), lost: total - lat.length };
}

/**
 * `rounds` answers after one more: the first downlink after a start runs code V8 has not compiled
 * yet (36 and 45 ms measured), like the first uplinks, and is reported on its own (`first`).
 */
async function downlinkTime(r: Rig, rounds: number) {
  const times: number[] = [];
  let first = NaN;
  rounds += 1;
  for (let i = 0; i < rounds; i++) {
    const d = r.devices[i % r.devices.length]!;
    // A command waits in the queue; the device's next uplink gets it in RX1.
    if (i < r.devices.length && i === r.devices.indexOf(d)) await addActuator(r, d);
    const cmd = await api(r.daemon.url, 'PUT', `/device/${d.id}/asset/reset/command`, { token: r.app, json: { value: true } });
    if (cmd.body?.delivered?.lpwan !== 'queued') throw new Error(`command not queued: ${cmd.text}`);
    const before = r.pullResps.length;
    const t0 = performance.now();
    r.send(pushData(uplink(d, 900_000 + i), 1000 + i));
    const end = t0 + 2000;
    while (r.pullResps.length === before && performance.now() < end) await new Promise((res) => setImmediate(res));
    const took = r.pullResps.length > before ? r.pullResps[before]!.at - t0 : NaN;
    if (i === 0) first = took;
    else if (!Number.isNaN(took)) times.push(took);
  }
  times.sort((a, b) => a - b);
  return { first, p50: percentile(times, 50), p99: percentile(times, 99), answered: times.length };
}

/** The bench devices have sensors only: an actuator (with a CBOR downlink codec) to command. */
async function addActuator(r: Rig, d: BenchDevice): Promise<void> {
  await api(r.daemon.url, 'PUT', `/device/${d.id}/asset/reset`, { token: r.app, json: { is: 'actuator', profile: { type: 'boolean' } } });
  await api(r.daemon.url, 'PUT', `/device/${d.id}/codec`, { token: r.app, json: { uplink: { format: 'abcl', file: 'counter.abcl.json' }, downlink: { format: 'cbor' } } });
}

/**
 * MQTT QoS 1 states through the same pipeline (16 publishers, bench/mqtt.ts's load), for the CPU
 * anchor. `watched`: one application connection also subscribes (QoS 0) to every feed, so each
 * state is delivered once, as each uplink is to the subscriber this bench counts them with.
 */
async function mqttAnchor(watched = false): Promise<{ rate: number; cpuUs: number; deliveredPerState: number }> {
  const dataDir = tempDataDir();
  const s = { ...settings(), seconds: 5 };
  const devices = provision(dataDir, s.connections, 0);
  const broker = await startOutpost(dataDir);
  try {
    const shape = watched ? { subscribers: () => [{ username: devices.appToken, topics: [], subscriptions: ['device/+/asset/+/feed'], subscriptionQos: 0 as const }] } : {};
    const run = await runLoad(broker, devices.publishers, 1, s, shape);
    return { rate: run.rate, cpuUs: run.cpuUs, deliveredPerState: run.received / Math.max(1, run.acked) };
  } finally {
    await broker.stop();
    removeDir(dataDir);
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * How many times the CPU per uplink is measured, each right after its own MQTT anchor: on a shared
 * machine one run moves by ±10 %, and the machine's speed drifts between runs, so each uplink run
 * is set beside the anchor measured just before it, and the medians are reported with every run.
 */
const CPU_RUNS = 3;

export async function benchLpwan(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  {
    const r = await rig(1000);
    // The uplinks nobody subscribed to go to a daemon of their own, so the latency rows below come
    // after as many uplinks as before they were measured.
    const quiet = await rig(1000);
    try {
      // Like the MQTT anchor's 1.5 s warm-up: the daemon's code is compiled by V8 as it runs, and
      // a gateway runs for months, so the first uplinks after a start are not what one costs.
      const cold = await throughput(r, 5_000, 400);
      await throughputUnwatched(quiet, 5_000, 400);
      // The anchor runs in a daemon of its own while this one waits, idle.
      // The anchor is the MQTT ingest row: nobody subscribed, so its states are never published to
      // a feed at all (src/doors/mqtt/service-publisher.ts), while each uplink here is delivered
      // once, to the feed subscriber that counts it. The watched anchor delivers each state once,
      // and the unwatched uplinks none: the two like-for-like comparisons (docs/lpwan.md, "What an
      // uplink costs").
      type Anchor = Awaited<ReturnType<typeof mqttAnchor>>;
      const runs: Array<{ anchor: Anchor; watched: Anchor; t: Awaited<ReturnType<typeof throughput>>; unwatched: Awaited<ReturnType<typeof throughputUnwatched>> }> = [];
      const uplinks = Number(process.env.BENCH_LPWAN_UPLINKS ?? 30_000);
      for (let i = 0; i < CPU_RUNS; i++) {
        const anchor = await mqttAnchor();
        const watched = await mqttAnchor(true);
        const t = await throughput(r, uplinks, 400, (i + 1) * 1_000_000);
        const unwatched = await throughputUnwatched(quiet, uplinks, 400, (i + 1) * 1_000_000);
        runs.push({ anchor, watched, t, unwatched });
      }
      const anchorCpu = median(runs.map((x) => x.anchor.cpuUs));
      rows.push({ name: `MQTT QoS 1 states/s, 16 publishers (the anchor, median of ${CPU_RUNS})`, value: Math.round(median(runs.map((x) => x.anchor.rate))), unit: 'states/s' });
      rows.push({ name: `MQTT QoS 1: daemon CPU per state (median of ${CPU_RUNS})`, value: Number(anchorCpu.toFixed(1)), unit: 'µs' });
      rows.push({ name: 'warm-up: the first 5 000 uplinks after start, daemon CPU per uplink (not counted below)', value: Number(cold.cpuPerUplink.toFixed(1)), unit: 'µs' });
      rows.push({ name: `uplinks/s, 1 000 ABP devices, ABCL, whole path (window 400, median of ${CPU_RUNS})`, value: Math.round(median(runs.map((x) => x.t.perSecond))), unit: 'uplinks/s' });
      const sent = runs.reduce((n, x) => n + x.t.received + x.t.lost, 0);
      rows.push({ name: `uplinks lost of ${sent} (UDP drops under the burst)`, value: runs.reduce((n, x) => n + x.t.lost, 0), unit: 'uplinks' });
      rows.push({ name: `daemon CPU per uplink (whole path, median of ${CPU_RUNS})`, value: Number(median(runs.map((x) => x.t.cpuPerUplink)).toFixed(1)), unit: 'µs' });
      rows.push({ name: `daemon CPU per uplink ÷ per MQTT QoS 1 state (median of the ${CPU_RUNS} pairs)`, value: Number(median(runs.map((x) => x.t.cpuPerUplink / x.anchor.cpuUs)).toFixed(2)), unit: '×' });
      for (const [i, { anchor, t }] of runs.entries()) {
        rows.push({ name: `run ${i + 1}: daemon CPU per uplink (MQTT anchor just before: ${anchor.cpuUs.toFixed(1)} µs a state, ${(t.cpuPerUplink / anchor.cpuUs).toFixed(2)} ×)`, value: Number(t.cpuPerUplink.toFixed(1)), unit: 'µs' });
      }
      rows.push({ name: `MQTT QoS 1 with a QoS 0 subscriber on every feed: daemon CPU per state (median of ${CPU_RUNS}; ${median(runs.map((x) => x.watched.deliveredPerState)).toFixed(2)} deliveries a state)`, value: Number(median(runs.map((x) => x.watched.cpuUs)).toFixed(1)), unit: 'µs' });
      rows.push({ name: `daemon CPU per uplink ÷ per MQTT QoS 1 state, each delivered once to a feed subscriber (like for like, median of the ${CPU_RUNS} pairs)`, value: Number(median(runs.map((x) => x.t.cpuPerUplink / x.watched.cpuUs)).toFixed(2)), unit: '×' });
      rows.push({ name: `daemon CPU per uplink, nobody subscribed (counted by PUSH_ACK and committed states, median of ${CPU_RUNS}; ${runs.reduce((n, x) => n + x.unwatched.received, 0)} of ${CPU_RUNS * uplinks} stored)`, value: Number(median(runs.map((x) => x.unwatched.cpuPerUplink)).toFixed(1)), unit: 'µs' });
      rows.push({ name: `daemon CPU per uplink ÷ per MQTT QoS 1 state, neither delivered (like for like, median of the ${CPU_RUNS} pairs)`, value: Number(median(runs.map((x) => x.unwatched.cpuPerUplink / x.anchor.cpuUs)).toFixed(2)), unit: '×' });
      // What the SQLite part costs per uplink depends on it (each commit writes its changed pages once).
      rows.push({ name: `uplinks per group commit (median of ${CPU_RUNS})`, value: Number(median(runs.map((x) => x.t.perCommit)).toFixed(1)), unit: 'uplinks' });
      for (const [rate, offset] of [[500, 10_000_000], [2000, 20_000_000]] as const) {
        const l = await latency(r, rate, 6, offset);
        rows.push({ name: `datagram → feed latency p50 at ${rate} uplinks/s`, value: Number(l.p50.toFixed(2)), unit: 'ms' });
        rows.push({ name: `datagram → feed latency p99 at ${rate} uplinks/s (${l.lost} lost)`, value: Number(l.p99.toFixed(2)), unit: 'ms' });
      }
      const dl = await downlinkTime(r, 100);
      rows.push({ name: 'uplink → PULL_RESP for the first queued downlink after start (not counted below)', value: Number(dl.first.toFixed(2)), unit: 'ms' });
      rows.push({ name: 'uplink → PULL_RESP for a queued downlink p50', value: Number(dl.p50.toFixed(2)), unit: 'ms' });
      rows.push({ name: 'uplink → PULL_RESP for a queued downlink p99', value: Number(dl.p99.toFixed(2)), unit: 'ms' });
    } finally {
      await quiet.close();
      await r.close();
    }
  }
  {
    const r = await rig(10_000);
    try {
      await sleep(3000);
      rows.push({ name: 'RSS, 10 000 ABP devices provisioned, idle', value: Math.round(rssBytes(r.daemon.proc.pid!) / 1048576), unit: 'MiB' });
      await throughput(r, 10_000, 400);
      await sleep(1000);
      rows.push({ name: 'RSS, 10 000 devices after one uplink each', value: Math.round(rssBytes(r.daemon.proc.pid!) / 1048576), unit: 'MiB' });
    } finally {
      await r.close();
    }
  }
  // The packet forwarder and Basics Station doors side by side (bench/radio-doors.ts).
  const { benchRadioDoors } = await import('./radio-doors.js');
  rows.push(...(await benchRadioDoors()));
  return rows;
}
