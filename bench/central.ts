// BENCH_ONLY=central: states/s a central takes from devices publishing QoS 1 states over MQTT
// (each PUBACK after the commit), one node on SQLite next to one, two and three nodes on one
// PostgreSQL + one Redis (docs/scale-out.md), all on this machine in one run, with the CPU each
// node spent per state. The load generator is bench/mqtt-loadgen.ts (raw sockets, pipelined), one
// child per node. On a 2-core machine every node, PostgreSQL, Redis and the load generators share
// the same two cores: more nodes cannot mean more states/s here, only on more machines.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cpuMicros, rssBytes, sleep, type BenchRow } from './lib.js';
import type { LoadConnection, LoadJob, LoadResult } from './mqtt-loadgen.js';
import { api, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../test/helpers/daemon.js';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.js';
import { startRedis, type TestRedis } from '../test/helpers/redis.js';

const LOADGEN = fileURLToPath(new URL('./mqtt-loadgen.ts', import.meta.url));
const n = (name: string, def: number) => (process.env[name] ? Number(process.env[name]) : def);
const SECONDS = n('BENCH_SECONDS', 8);
const DEVICES = n('BENCH_CENTRAL_DEVICES', 24);
const WINDOW = n('BENCH_WINDOW', 32);

interface Setup {
  name: string;
  nodes: RunningDaemon[];
  dirs: string[];
}

async function startNodes(count: number, env: Record<string, string>): Promise<Setup> {
  const dirs = Array.from({ length: count }, () => tempDataDir());
  const nodes = await Promise.all(dirs.map((dataDir) => startDaemon({ dataDir, env: { OUTPOST_ROLE: 'central', OUTPOST_RATE_LIMIT: '0', ...env } })));
  return { name: '', nodes, dirs };
}

/** Devices made over HTTP at the first node; every node must accept their tokens before the run. */
async function provision(setup: Setup): Promise<Array<{ token: string; topic: string }>> {
  const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'bench', '--scopes', 'read,admin'], setup.dirs[0]!).token;
  const devices: Array<{ id: string; token: string; topic: string }> = [];
  for (let i = 0; i < DEVICES; i++) {
    const d = (await api(setup.nodes[0]!.url, 'POST', '/devices', { token: admin, json: { name: `meter-${i}` } })).body as { id: string; token: string };
    await api(setup.nodes[0]!.url, 'POST', `/device/${d.id}/assets`, { token: admin, json: { name: 'power', is: 'sensor', profile: { type: 'number' } } });
    devices.push({ ...d, topic: `device/${d.id}/asset/power/state` });
  }
  const last = devices[devices.length - 1]!;
  for (const node of setup.nodes) {
    const deadline = Date.now() + 20_000;
    while ((await api(node.url, 'GET', `/device/${last.id}`, { token: admin })).body?.assets?.length !== 1) {
      if (Date.now() > deadline) throw new Error('the catalog did not reach every node');
      await sleep(100);
    }
  }
  return devices;
}

async function run(setup: Setup, devices: Array<{ token: string; topic: string }>): Promise<BenchRow> {
  const children: ChildProcess[] = [];
  const results: LoadResult[] = [];
  const ready: Promise<void>[] = [];
  const done: Promise<void>[] = [];
  const warmupMs = 2000;
  setup.nodes.forEach((node, i) => {
    const connections: LoadConnection[] = devices.filter((_, j) => j % setup.nodes.length === i).map((d) => ({ username: d.token, topics: [d.topic] }));
    const child = fork(LOADGEN, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    const job: LoadJob = { host: '127.0.0.1', port: node.mqttPort, qos: 1, warmupMs, durationMs: SECONDS * 1000, window: WINDOW, connections };
    ready.push(new Promise((resolve, reject) => child.on('message', (m: { type: string; message?: string }) => (m.type === 'ready' ? resolve() : m.type === 'error' ? reject(new Error(m.message)) : undefined))));
    done.push(
      new Promise((resolve, reject) => {
        child.on('message', (m: LoadResult | { type: string }) => {
          if (m.type === 'result') {
            results.push(m as LoadResult);
            resolve();
          }
        });
        child.once('exit', (code) => (code ? reject(new Error(`load generator exited ${code}`)) : resolve()));
      }),
    );
    child.send({ type: 'start', ...job });
  });
  await Promise.all(ready);
  for (const c of children) c.send({ type: 'go' });
  await sleep(warmupMs);
  const cpu0 = setup.nodes.map((node) => cpuMicros(node.proc.pid!));
  await sleep(SECONDS * 1000);
  const cpu1 = setup.nodes.map((node) => cpuMicros(node.proc.pid!));
  const rss = Math.max(...setup.nodes.map((node) => rssBytes(node.proc.pid!)));
  await Promise.all(done);
  const count = results.reduce((a, r) => a + r.count, 0);
  const perNodeCpu = cpu1.map((c, i) => c - cpu0[i]!);
  return {
    name: setup.name,
    'states/s': Math.round(count / SECONDS),
    'CPU µs/state (all nodes)': perNodeCpu.reduce((a, b) => a + b, 0) / Math.max(count, 1),
    'CPU µs/state per node': perNodeCpu.map((c) => (c / Math.max(count / setup.nodes.length, 1)).toFixed(0)).join(' / '),
    'max node RSS MB': Math.round(rss / 1e6),
  };
}

async function stopAll(setup: Setup): Promise<void> {
  await Promise.all(setup.nodes.map((node) => node.stop()));
  for (const d of setup.dirs) removeDir(d);
}

export async function benchCentral(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const sqlite = await startNodes(1, {});
  sqlite.name = '1 node, SQLite';
  try {
    rows.push(await run(sqlite, await provision(sqlite)));
  } finally {
    await stopAll(sqlite);
  }
  let pg: TestPostgres | undefined;
  let redis: TestRedis | undefined;
  try {
    pg = await startPostgres();
    redis = await startRedis();
    for (const count of [1, 2, 3]) {
      const url = await pg.createDatabase();
      const setup = await startNodes(count, { OUTPOST_POSTGRES_URL: url, OUTPOST_REDIS_URL: redis.url });
      setup.name = `${count} node${count > 1 ? 's' : ''}, PostgreSQL + Redis`;
      try {
        const row = await run(setup, await provision(setup));
        row['stored in PostgreSQL'] = Number(pg.psql('SELECT count(*) FROM states', url.split('/').pop()));
        rows.push(row);
      } finally {
        await stopAll(setup);
      }
    }
  } finally {
    await redis?.stop();
    await pg?.dispose();
  }
  return rows;
}
