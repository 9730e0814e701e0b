// MQTT ingest benchmark: Outpost (compiled daemon, validated + durable + feed) side by side with a
// Debian mosquitto (persistence off, stores and validates nothing) as the anchor, driven by the same
// raw-socket load generator (bench/mqtt-loadgen.ts) from several child processes.
//
//   npm run build && node --import tsx bench/mqtt.ts
//
// Env: BENCH_SECONDS (measured seconds per run, default 8), BENCH_CONNECTIONS (publishers, default 16),
// BENCH_GENERATORS (child processes, default 2), BENCH_WINDOW (QoS 1 in flight per connection, 100),
// BENCH_IDLE (idle device connections for the memory run, default 1000).
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store } from '../src/store/store.js';
import { freePort } from '../test/helpers/ports.js';
import { connectPacket, subscribePacket, type LoadConnection, type LoadJob, type LoadResult } from './mqtt-loadgen.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LOADGEN = fileURLToPath(new URL('./mqtt-loadgen.ts', import.meta.url));
const CLK_TCK = 100;

export interface MqttBenchRow {
  broker: 'outpost' | 'mosquitto';
  scenario: string;
  qos: 0 | 1 | null;
  connections: number;
  msgPerSec: number | null;
  cpuUsPerMsg: number | null;
  pubackP50Ms: number | null;
  pubackP99Ms: number | null;
  rssMB: number;
  /** Messages per second relative to mosquitto's in the same scenario. */
  ratioToMosquitto: number | null;
  /** CPU per message relative to mosquitto's in the same scenario (the cost a Raspberry Pi feels). */
  cpuRatioToMosquitto: number | null;
  note?: string;
}

export interface Settings {
  seconds: number;
  connections: number;
  generators: number;
  window: number;
  idle: number;
}

export function settings(): Settings {
  const n = (name: string, def: number) => (process.env[name] ? Number(process.env[name]) : def);
  return {
    seconds: n('BENCH_SECONDS', 8),
    connections: n('BENCH_CONNECTIONS', 16),
    generators: n('BENCH_GENERATORS', 2),
    window: n('BENCH_WINDOW', 100),
    idle: n('BENCH_IDLE', 1000),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime (fields 14 and 15)
}

function rssMB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : 0;
}

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.OUTPOST_CONFIG;
  return env;
}

async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ port, host: '127.0.0.1' }, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} did not open`);
    await sleep(50);
  }
}

// ---- brokers

export interface Broker {
  name: 'outpost' | 'mosquitto';
  proc: ChildProcess;
  port: number;
  httpPort?: number;
  stop(): Promise<void>;
}

async function startMosquitto(dir: string): Promise<Broker> {
  const port = await freePort();
  const conf = join(dir, 'mosquitto.conf');
  writeFileSync(conf, `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_type error\nmax_queued_messages 100000\n`);
  const proc = spawn('mosquitto', ['-c', conf], { stdio: ['ignore', 'ignore', 'inherit'] });
  await waitForPort(port);
  return { name: 'mosquitto', proc, port, stop: () => stopProc(proc) };
}

export async function startOutpost(dataDir: string, args: string[] = []): Promise<Broker> {
  // BENCH_NODE_ARGS: e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the daemon.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const proc = spawn(process.execPath, [...nodeArgs, join(ROOT, 'dist', 'cli', 'main.js'), 'run', '--data', dataDir, ...args], {
    cwd: ROOT,
    env: childEnv({ OUTPOST_RATE_LIMIT: '0', OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0', OUTPOST_LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<{ ports: { mqtt: number; http: number } }>((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (const line of buf.split('\n')) if (line.includes('"msg":"ready"')) resolve(JSON.parse(line));
      buf = buf.slice(buf.lastIndexOf('\n') + 1);
    });
    proc.once('exit', (code) => reject(new Error(`outpost exited ${code} before ready`)));
  });
  proc.stdout!.resume();
  return { name: 'outpost', proc, port: ready.ports.mqtt, httpPort: ready.ports.http, stop: () => stopProc(proc) };
}

function stopProc(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill('SIGTERM');
  });
}

// ---- load

export interface Device {
  id: string;
  token: string;
  topic: string;
  commandTopic: string;
}

export function provision(dataDir: string, publishers: number, idle: number): { publishers: Device[]; idle: Device[]; appToken: string } {
  const store = Store.open(dataDir);
  const make = (name: string, kind: 'sensor' | 'actuator', asset: string): Device => {
    const { device, token } = store.devices.create({ name }, Date.now());
    store.assets.create({ deviceId: device.id, name: asset, is: kind, profile: { type: kind === 'sensor' ? 'number' : 'boolean' }, title: null, description: null }, Date.now());
    return { id: device.id, token, topic: `device/${device.id}/asset/${asset}/state`, commandTopic: `device/${device.id}/asset/${asset}/command` };
  };
  const pubs: Device[] = [];
  const idles: Device[] = [];
  store.transaction(() => {
    for (let i = 0; i < publishers; i++) pubs.push(make(`bench-pub-${i}`, 'sensor', 'temperature'));
    for (let i = 0; i < idle; i++) idles.push(make(`bench-idle-${i}`, 'actuator', 'switch'));
  });
  const app = store.tokens.create({ kind: 'app', name: 'bench', deviceId: null, scopes: ['read', 'command'] }, Date.now());
  store.close();
  return { publishers: pubs, idle: idles, appToken: app.secret };
}

function percentile(hist: number[], q: number): number {
  const total = hist.reduce((a, b) => a + b, 0);
  if (total === 0) return NaN;
  let seen = 0;
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i]!;
    if (seen >= q * total) return Math.pow(1.02, i + 0.5) / 1000; // ms
  }
  return NaN;
}

/** What else the load does besides publishing states: subscriptions of the publishers, subscriber-only connections. */
export interface LoadShape {
  /** Filters each publisher subscribes to (QoS 1) before the run. */
  publisherFilters?: (device: Device, broker: Broker['name']) => string[];
  /** Connections that only subscribe (a dashboard), per broker. */
  subscribers?: (broker: Broker['name']) => LoadConnection[];
}

export interface LoadRun {
  rate: number;
  cpuUs: number;
  p50: number;
  p99: number;
  rss: number;
  acked: number;
  /** Messages the subscriptions received over the whole run. */
  received: number;
}

export async function runLoad(broker: Broker, devices: Device[], qos: 0 | 1, s: Settings, shape: LoadShape = {}): Promise<LoadRun> {
  const warmupMs = 1500;
  const durationMs = s.seconds * 1000;
  const children: ChildProcess[] = [];
  const results: LoadResult[] = [];
  const ready: Promise<void>[] = [];
  const done: Promise<void>[] = [];
  const connections: LoadConnection[] = devices.map((d) => ({
    username: broker.name === 'outpost' ? d.token : null,
    topics: [d.topic],
    subscriptions: shape.publisherFilters?.(d, broker.name) ?? [],
  }));
  connections.push(...(shape.subscribers?.(broker.name) ?? []));
  for (let g = 0; g < s.generators; g++) {
    const mine = connections.filter((_, i) => i % s.generators === g);
    if (mine.length === 0) continue;
    const child = fork(LOADGEN, [], { execArgv: ['--import', 'tsx'], env: childEnv(), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    const job: LoadJob = {
      host: '127.0.0.1',
      port: broker.port,
      qos,
      warmupMs,
      durationMs,
      window: s.window,
      connections: mine,
    };
    ready.push(
      new Promise((resolve, reject) =>
        child.on('message', (m: { type: string; message?: string }) => {
          if (m.type === 'ready') resolve();
          if (m.type === 'error') reject(new Error(`load generator: ${m.message}`));
        }),
      ),
    );
    done.push(
      new Promise((resolve, reject) => {
        child.on('message', (m: LoadResult | { type: string; message?: string }) => {
          if (m.type === 'result') {
            results.push(m as LoadResult);
            resolve();
          }
          if (m.type === 'error') reject(new Error(`load generator: ${(m as { message: string }).message}`));
        });
        child.once('exit', (code) => (code ? reject(new Error(`load generator exited ${code}`)) : resolve()));
      }),
    );
    child.send({ type: 'start', ...job });
  }
  await Promise.all(ready);
  for (const c of children) c.send({ type: 'go' });
  await sleep(warmupMs);
  const cpu0 = cpuTicks(broker.proc.pid!);
  await sleep(durationMs);
  const cpu1 = cpuTicks(broker.proc.pid!);
  const rss = rssMB(broker.proc.pid!);
  await Promise.all(done);
  const count = results.reduce((a, r) => a + r.count, 0);
  const hist = new Array<number>(results[0]!.hist.length).fill(0);
  for (const r of results) r.hist.forEach((v, i) => (hist[i]! += v));
  const acked = results.reduce((a, r) => a + r.totalAcked, 0);
  return {
    rate: count / s.seconds,
    cpuUs: (((cpu1 - cpu0) / CLK_TCK) * 1e6) / Math.max(count, 1),
    p50: qos ? percentile(hist, 0.5) : NaN,
    p99: qos ? percentile(hist, 0.99) : NaN,
    rss,
    acked,
    received: results.reduce((a, r) => a + r.received, 0),
  };
}

/** Opens `devices.length` connections, each subscribed to its command topic; resolves when all SUBACKs arrived. */
async function openIdle(port: number, devices: Device[], withUser: boolean): Promise<Socket[]> {
  const sockets: Socket[] = [];
  const batch = 100;
  for (let i = 0; i < devices.length; i += batch) {
    await Promise.all(
      devices.slice(i, i + batch).map(
        (d, j) =>
          new Promise<void>((resolve, reject) => {
            const s = connect({ port, host: '127.0.0.1' }, () => {
              s.write(Buffer.concat([connectPacket(`idle-${i + j}`, withUser ? d.token : null), subscribePacket(1, d.commandTopic, 1)]));
            });
            let got = Buffer.alloc(0);
            s.on('data', (data: Buffer) => {
              got = Buffer.concat([got, data]);
              // CONNACK (4 bytes) then SUBACK (5 bytes)
              if (got.length >= 9 && got[4] === 0x90) {
                if (got[3] !== 0 || got[8] !== 1) reject(new Error(`idle connection refused: ${got.toString('hex')}`));
                s.removeAllListeners('data');
                s.on('data', () => {});
                resolve();
              }
            });
            s.on('error', reject);
            sockets.push(s);
          }),
      ),
    );
  }
  return sockets;
}

interface Scenario {
  key: 'ingest' | 'sdk' | 'dashboard';
  name: string;
  qos: 0 | 1;
  publishers: Device[];
  shape: LoadShape;
  /** Whether its subscriptions receive messages (reported in the note). */
  received: boolean;
  note: string;
}

/**
 * The load shapes: plain ingest (nobody subscribed), publishers that also hold the subscriptions the
 * cloud SDKs make (their own errors and command topics), and 10 publishers watched by a dashboard
 * that subscribes to every asset's feed. With mosquitto the same subscriptions, except that the
 * dashboard subscribes to the state topics (mosquitto routes what is published; Outpost publishes
 * the feed after the commit).
 */
function scenarios(devices: ReturnType<typeof provision>, qosList: readonly (0 | 1)[], s: Settings): Scenario[] {
  const list: Scenario[] = [];
  for (const qos of qosList) {
    list.push({
      key: 'ingest',
      name: `state ingest QoS ${qos}`,
      qos,
      publishers: devices.publishers,
      shape: {},
      received: false,
      note: qos ? 'validated, committed to SQLite before PUBACK, feed published' : 'validated, stored, feed published',
    });
  }
  if (!qosList.includes(1)) return list;
  list.push({
    key: 'sdk',
    name: 'QoS 1, publishers subscribed to own errors + commands',
    qos: 1,
    publishers: devices.publishers,
    shape: { publisherFilters: (d) => [`device/${d.id}/errors`, `device/${d.id}/asset/+/command`] },
    received: false,
    note: 'each publisher also holds the subscriptions a cloud SDK makes',
  });
  const watched = devices.publishers.slice(0, Math.min(10, s.connections));
  list.push({
    key: 'dashboard',
    name: `QoS 1, ${watched.length} publishers, a dashboard on every feed`,
    qos: 1,
    publishers: watched,
    shape: {
      subscribers: (broker) => [
        {
          username: broker === 'outpost' ? devices.appToken : null,
          topics: [],
          subscriptions: watched.map((d) => (broker === 'outpost' ? d.topic.replace(/\/state$/, '/feed') : d.topic)),
        },
      ],
    },
    received: true,
    note: 'one application connection subscribed (QoS 1) to every asset\'s feed',
  });
  return list;
}

function fmt(n: number | null, digits = 0): string {
  return n === null || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function formatMqttTable(rows: MqttBenchRow[]): string {
  const header = ['broker', 'scenario', 'conns', 'msg/s', 'CPU µs/msg', 'PUBACK p50 ms', 'p99 ms', 'RSS MB', 'msg/s × mosquitto', 'CPU/msg × mosquitto'];
  const lines = rows.map((r) => [
    r.broker,
    r.scenario,
    String(r.connections),
    fmt(r.msgPerSec),
    fmt(r.cpuUsPerMsg, 1),
    fmt(r.pubackP50Ms, 2),
    fmt(r.pubackP99Ms, 2),
    String(r.rssMB),
    r.ratioToMosquitto === null ? '-' : r.ratioToMosquitto.toFixed(2),
    r.cpuRatioToMosquitto === null ? '-' : r.cpuRatioToMosquitto.toFixed(2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const row = (cells: string[]) => '| ' + cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  return [row(header), '|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|', ...lines.map(row)].join('\n');
}

export async function benchMqtt(): Promise<MqttBenchRow[]> {
  const s = settings();
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('run `npm run build` first');
  if (spawnSync('mosquitto', ['-h']).error) throw new Error('mosquitto is not installed (apt-get install mosquitto)');
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bench-mqtt-'));
  const rows: MqttBenchRow[] = [];
  const devices = provision(join(dir, 'data'), s.connections, s.idle);
  const mosquitto = await startMosquitto(dir);
  let outpost: Broker | undefined;
  try {
    outpost = await startOutpost(join(dir, 'data'));
    // BENCH_QOS=1 runs only the QoS 1 scenarios (quicker when optimising); BENCH_SCENARIOS=ingest,sdk,dashboard picks some.
    const qosList = process.env.BENCH_QOS ? [Number(process.env.BENCH_QOS) as 0 | 1] : ([0, 1] as const);
    const picked = new Set((process.env.BENCH_SCENARIOS ?? 'ingest,sdk,dashboard').split(','));
    for (const scenario of scenarios(devices, qosList, s)) {
      if (!picked.has(scenario.key)) continue;
      // Side by side, mosquitto first, the same load generator and shape: compare the ratios.
      const anchor = await runLoad(mosquitto, scenario.publishers, scenario.qos, s, scenario.shape);
      const ours = await runLoad(outpost, scenario.publishers, scenario.qos, s, scenario.shape);
      const row = (broker: MqttBenchRow['broker'], run: LoadRun, note?: string): MqttBenchRow => ({
        broker,
        scenario: scenario.name,
        qos: scenario.qos,
        connections: scenario.publishers.length,
        msgPerSec: Math.round(run.rate),
        cpuUsPerMsg: run.cpuUs,
        pubackP50Ms: scenario.qos ? run.p50 : null,
        pubackP99Ms: scenario.qos ? run.p99 : null,
        rssMB: run.rss,
        ratioToMosquitto: run.rate / anchor.rate,
        cpuRatioToMosquitto: run.cpuUs / anchor.cpuUs,
        ...(note ? { note } : {}),
      });
      rows.push(row('mosquitto', anchor, scenario.received ? `subscribers received ${anchor.received}` : undefined));
      rows.push(row('outpost', ours, [scenario.note, scenario.received ? `subscribers received ${ours.received}` : ''].filter(Boolean).join('; ')));
    }
    // Durability sanity check: every acknowledged QoS 1 state is in the database.
    await outpost.stop();
    const store = Store.open(join(dir, 'data'));
    const stored = store.states.count();
    store.close();
    process.stderr.write(`outpost stored ${stored} states in total\n`);
    outpost = await startOutpost(join(dir, 'data'));

    // Memory: idle devices, each subscribed to its command topic.
    const idleOut = await openIdle(outpost.port, devices.idle, true);
    await sleep(1000);
    const outRss = rssMB(outpost.proc.pid!);
    // One command through HTTP must reach exactly one of them on both topics (by name + by id: 1 subscriber, 1 topic).
    const res = await fetch(`http://127.0.0.1:${outpost.httpPort}/device/${devices.idle[0]!.id}/asset/switch/command`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${devices.appToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: true }),
    });
    const delivered = ((await res.json()) as { delivered?: { mqtt?: number } }).delivered?.mqtt;
    const idleMos = await openIdle(mosquitto.port, devices.idle, false);
    await sleep(500);
    const mosRss = rssMB(mosquitto.proc.pid!);
    for (const sock of [...idleOut, ...idleMos]) sock.destroy();
    rows.push({ broker: 'mosquitto', scenario: `${s.idle} idle subscribers`, qos: null, connections: s.idle, msgPerSec: null, cpuUsPerMsg: null, pubackP50Ms: null, pubackP99Ms: null, rssMB: mosRss, ratioToMosquitto: null, cpuRatioToMosquitto: null });
    rows.push({
      broker: 'outpost',
      scenario: `${s.idle} idle subscribers`,
      qos: null,
      connections: s.idle,
      msgPerSec: null,
      cpuUsPerMsg: null,
      pubackP50Ms: null,
      pubackP99Ms: null,
      rssMB: outRss,
      ratioToMosquitto: null,
      cpuRatioToMosquitto: null,
      note: `device tokens, one command subscription each; a command reached ${delivered} subscriber(s)`,
    });
  } finally {
    await outpost?.stop();
    await mosquitto.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const rows = await benchMqtt();
  const table = formatMqttTable(rows);
  process.stdout.write(table + '\n');
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  writeFileSync(join(ROOT, 'bench', 'results', 'mqtt.json'), JSON.stringify({ at: new Date().toISOString(), settings: settings(), rows }, null, 2) + '\n');
}
