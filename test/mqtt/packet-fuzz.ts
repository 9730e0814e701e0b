// Fuzzing of the MQTT door from raw sockets (issue 7): random bytes and mutated valid packets, before
// and after CONNECT, against the compiled daemon. A finding is: the daemon exits, logs an internal
// error, stops serving a well-behaved client (QoS 1 publish → PUBACK after the commit, HTTP read),
// or its memory grows past a bound. Inputs come from one seeded generator per worker, so a run is
// replayed with the same seed (and count).
import mqttPacket, { type Packet } from 'mqtt-packet';
import { api, cliJson, provision, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { seededRandom } from '../codec/helpers.js';
import { connectClient, sleep, within } from './helpers.js';
import type { TargetReport } from '../fuzz/runner.js';
import { rawConnect, rawSession, remainingLength, rssBytes, type RawConnection } from './raw.js';

export interface MqttFuzzOptions {
  count: number;
  seed: number;
  /** Resident memory growth of the daemon above this is a finding. */
  maxRssGrowthMb?: number;
  log?: (line: string) => void;
}

/** The other fuzz targets' report: `accepted` inputs left their connection open, `refused` ones got it closed; `slowestMs` is the slowest well-behaved probe. */
export type MqttFuzzReport = TargetReport;

const TARGET = 'mqtt-socket';
const WORKERS = 8;

let dev: { id: string; token: string };
let app: { token: string };

type Random = () => number;
const int = (r: Random, n: number) => Math.floor(r() * n);
const pick = <T>(r: Random, items: readonly T[]): T => items[int(r, items.length)]!;
const randomBytes = (r: Random, n: number) => Buffer.from(Array.from({ length: n }, () => int(r, 256)));

function randomText(r: Random): string {
  const pieces = ['device', dev.id, 'asset', 'temp', 'blob', 'relay', 'state', 'feed', 'command', 'errors', '+', '#', '$SYS', '', '\u0000', 'é', '\ud83d\ude00', 'x'.repeat(300)];
  return Array.from({ length: int(r, 7) }, () => pick(r, pieces)).join(pick(r, ['/', '/', '/', '', '//']));
}

function randomTopic(r: Random): string {
  return pick(r, [
    `device/${dev.id}/asset/temp/state`,
    `device/${dev.id}/asset/blob/state`,
    `device/${dev.id}/asset/list/state`,
    `device/${dev.id}/asset/nope/state`,
    `device/${dev.id}/state`,
    `device/${dev.id}/asset/relay/command`,
    `asset/x/state`,
    randomText(r),
  ]);
}

function randomPayload(r: Random): Buffer | string {
  const deep = int(r, 40_000);
  return pick(r, [
    () => JSON.stringify({ value: r() * 100 }),
    () => JSON.stringify({ value: { a: [1, 2, { b: 'c' }] }, at: pick(r, ['2026-01-01T00:00:00Z', 'yesterday', 7, null]) }),
    () => JSON.stringify({ temp: r(), blob: { x: 1 }, nope: 3, relay: true, list: [1] }),
    () => `{"temp": 1, "list": {"value": ${'['.repeat(deep)}${']'.repeat(deep)}}}`,
    () => `${int(r, 2e9)}|${r()}`,
    () => `{"value": ${'['.repeat(deep)}${']'.repeat(deep)}}`,
    () => '{"value": 1e400}',
    () => randomBytes(r, int(r, 200)),
    () => '',
    () => Buffer.from([0xa1, 0x64, 0x74, 0x65, 0x6d, 0x70, 0xf9, 0x3c, 0x00]), // CBOR {"temp": 1.0}
  ])();
}

/** A valid packet of a random kind, as a client could send it after CONNECT. */
function randomPacket(r: Random): Packet {
  const messageId = pick(r, [0, 1, int(r, 65536)]);
  return pick<() => Packet>(r, [
    () => ({ cmd: 'publish', topic: randomTopic(r), payload: randomPayload(r), qos: int(r, 3) as 0 | 1 | 2, messageId, retain: r() < 0.2, dup: r() < 0.1 }),
    () => ({ cmd: 'subscribe', messageId, subscriptions: Array.from({ length: 1 + int(r, 5) }, () => ({ topic: randomTopic(r), qos: int(r, 3) as 0 | 1 | 2 })) }),
    () => ({ cmd: 'unsubscribe', messageId, unsubscriptions: [randomTopic(r)] }),
    () => ({ cmd: pick(r, ['puback', 'pubrec', 'pubrel', 'pubcomp'] as const), messageId }),
    () => ({ cmd: 'pingreq' }),
    () => ({ cmd: 'disconnect' }),
    () => connectPacket(r),
  ])();
}

function connectPacket(r: Random): Packet {
  const token = pick(r, [dev.token, dev.token, app.token, 'device:nonsense', '', undefined]);
  const version = pick(r, [4, 4, 4, 3, 5] as const);
  return {
    cmd: 'connect',
    protocolId: version === 3 ? 'MQIsdp' : 'MQTT',
    protocolVersion: version,
    clean: r() < 0.8,
    clientId: pick(r, ['', 'fuzz', `fuzz-${int(r, 1e6)}`, 'x'.repeat(int(r, 400))]),
    keepalive: int(r, 120),
    username: token,
    password: token === undefined ? undefined : Buffer.from('x'),
    will: r() < 0.2 ? { topic: randomTopic(r), payload: randomPayload(r), qos: int(r, 2) as 0 | 1, retain: false } : undefined,
  } as Packet;
}

function encode(packet: Packet): Buffer {
  try {
    return mqttPacket.generate(packet);
  } catch {
    return Buffer.from([0xc0, 0x00]); // mqtt-packet refused to encode it: a PINGREQ instead
  }
}

/** One of: random bytes, or a valid packet with random damage (bits, bytes, length field, cuts, splices). */
function mutate(r: Random, bytes: Buffer): Buffer {
  const b = Buffer.from(bytes);
  switch (int(r, 9)) {
    case 0:
      return randomBytes(r, int(r, 300));
    case 1: // bit flips
      for (let i = 0, n = 1 + int(r, 4); i < n && b.length; i++) b[int(r, b.length)]! ^= 1 << int(r, 8);
      return b;
    case 2: // random bytes overwritten
      for (let i = 0, n = 1 + int(r, 4); i < n && b.length; i++) b[int(r, b.length)] = int(r, 256);
      return b;
    case 3: // truncated
      return b.subarray(0, int(r, b.length + 1));
    case 4: // bytes inserted
      {
        const at = int(r, b.length + 1);
        return Buffer.concat([b.subarray(0, at), randomBytes(r, 1 + int(r, 16)), b.subarray(at)]);
      }
    case 5: // the remaining length replaced (up to the largest MQTT can say)
      {
        const length = remainingLength(pick(r, [0, 1, 127, 128, 16_383, 16_384, 65_536, 131_075, 131_076, 2_097_151, 268_435_455, int(r, 1000)]));
        let end = 1;
        while (end < b.length && b[end]! & 0x80) end++;
        return Buffer.concat([b.subarray(0, 1), Buffer.from(length), b.subarray(end + 1)]);
      }
    case 6: // the packet type and flags changed
      if (b.length) b[0] = int(r, 256);
      return b;
    case 7: // two packets in one write, or a packet cut in two
      return r() < 0.5 ? Buffer.concat([b, encode(randomPacket(r))]) : b.subarray(int(r, b.length + 1));
    default: // valid as it is
      return b;
  }
}

/** A well-behaved client still connects, publishes QoS 1 and gets its PUBACK after the commit; HTTP answers. */
async function probe(daemon: RunningDaemon): Promise<number> {
  const started = performance.now();
  const good = await connectClient(daemon.mqttPort, dev.token);
  try {
    const value = Math.round(Math.random() * 1e6);
    await within(good.client.publishAsync(`device/${dev.id}/asset/probe/state`, JSON.stringify({ value }), { qos: 1 }), 15_000, 'no PUBACK for a good client');
    const res = await api(daemon.url, 'GET', `/device/${dev.id}/asset/probe/state`, { token: dev.token });
    if (res.status !== 200 || res.body.state.value !== value) throw new Error(`HTTP read after the publish: ${res.status} ${res.text}`);
  } finally {
    await good.end().catch(() => {});
  }
  return performance.now() - started;
}

interface Tally {
  sent: number;
  closedByBroker: number;
}

/** Sends fuzz inputs while `take()` allows: a fresh connection for pre-CONNECT inputs, a session for the rest. */
async function worker(daemon: RunningDaemon, r: Random, take: () => boolean, tally: Tally): Promise<void> {
  let session: RawConnection | undefined;
  while (take()) {
    tally.sent++;
    if (r() < 0.3) {
      // Before CONNECT: random bytes or a damaged CONNECT as the first thing the broker reads.
      const c = await rawConnect(daemon.mqttPort);
      c.send(r() < 0.3 ? randomBytes(r, int(r, 300)) : mutate(r, encode(connectPacket(r))));
      await Promise.race([c.closed, sleep(int(r, 5))]);
      if (c.isClosed()) tally.closedByBroker++;
      c.close();
      continue;
    }
    if (!session || session.isClosed()) session = await rawSession(daemon.mqttPort, dev.token);
    session.send(mutate(r, encode(randomPacket(r))));
    if (r() < 0.05) {
      // Now and then wait for the broker to catch up: a PINGRESP, or the connection closed.
      const pings = session.packets.filter((p) => p.cmd === 'pingresp').length;
      session.send({ cmd: 'pingreq' });
      const deadline = Date.now() + 2000;
      while (!session.isClosed() && session.packets.filter((p) => p.cmd === 'pingresp').length === pings && Date.now() < deadline) await sleep(5);
      // No answer: a damaged length left the broker waiting for the rest of a packet, as it should.
      if (!session.isClosed() && Date.now() >= deadline) session.close();
    }
    if (session.isClosed()) tally.closedByBroker++;
  }
  session?.close();
}

/** Starts a daemon, fuzzes its MQTT listener with `count` inputs, stops it; findings in the report. */
export async function fuzzMqttPackets(options: MqttFuzzOptions): Promise<MqttFuzzReport> {
  const { count, seed, maxRssGrowthMb = 256, log = () => {} } = options;
  // No rate limit: more of the fuzzed states reach the pipeline instead of stopping at the limiter.
  const daemon = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
  const report: MqttFuzzReport = { target: TARGET, inputs: 0, accepted: 0, refused: 0, seconds: 0, perSecond: 0, slowestMs: 0, peakRssMb: 0, findings: [] };
  const finding = (index: number, error: string) => report.findings.push({ target: TARGET, index, error });
  try {
    const p = provision(daemon.dataDir, [
      { name: 'temp', is: 'sensor', profile: { type: 'number' } },
      { name: 'blob', is: 'sensor', profile: { type: 'object' } },
      { name: 'relay', is: 'actuator', profile: { type: 'boolean' } },
      { name: 'list', is: 'sensor', profile: { type: 'array' } },
      // The probe's own asset, never named by the fuzzer: the workers keep publishing to `temp`
      // while a probe runs, so a read of `temp` could rightly show a fuzzed value.
      { name: 'probe', is: 'sensor', profile: { type: 'number' } },
    ]);
    dev = p.device;
    app = p.app;
    cliJson(['device', 'create', '--name', 'bystander'], daemon.dataDir);

    const tally: Tally = { sent: 0, closedByBroker: 0 };
    const baseline = rssBytes(daemon.proc.pid!);
    let peak = baseline;
    const probeEvery = Math.max(500, Math.floor(count / 20));
    let issued = 0;
    let nextProbe = probeEvery;
    let probing: Promise<void> = Promise.resolve();
    const check = (index: number) => async () => {
      if (daemon.proc.exitCode !== null || daemon.proc.signalCode !== null) return void finding(index, `daemon exited (${daemon.proc.exitCode ?? daemon.proc.signalCode})`);
      try {
        report.slowestMs = Math.max(report.slowestMs, await probe(daemon));
      } catch (err) {
        finding(index, `a well-behaved client failed: ${(err as Error).message}`);
      }
      peak = Math.max(peak, rssBytes(daemon.proc.pid!));
    };
    // Stops early once something is found: the rest of the run would only repeat it.
    const take = () => {
      if (issued >= count || report.findings.length > 0) return false;
      if (++issued >= nextProbe) {
        nextProbe += probeEvery;
        probing = probing.then(check(issued));
      }
      return true;
    };
    const started = performance.now();
    const master = seededRandom(seed);
    await Promise.all(Array.from({ length: WORKERS }, () => worker(daemon, seededRandom(int(master, 2 ** 31)), take, tally)));
    await probing;
    await check(issued)();
    report.seconds = (performance.now() - started) / 1000;
    report.inputs = tally.sent;
    report.refused = tally.closedByBroker;
    report.accepted = tally.sent - tally.closedByBroker;
    report.perSecond = tally.sent / report.seconds;
    report.peakRssMb = peak / 1024 / 1024;
    for (const line of daemon.logs.filter((l) => /"level":(50|60)/.test(l)).slice(0, 5)) finding(issued, `internal error logged: ${line.slice(0, 500)}`);
    if (peak - baseline > maxRssGrowthMb * 1024 * 1024) finding(issued, `RSS grew from ${mb(baseline)} to ${mb(peak)} MB`);
    log(
      `${TARGET}: seed ${seed}, ${report.inputs} inputs in ${report.seconds.toFixed(1)} s (${Math.round(report.perSecond)}/s), ` +
        `${report.refused} closed by the broker, slowest probe ${report.slowestMs.toFixed(0)} ms, RSS ${mb(baseline)} → peak ${mb(peak)} MB, ${report.findings.length} findings`,
    );
  } finally {
    await daemon.stop();
    removeDir(daemon.dataDir);
  }
  return report;
}

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
