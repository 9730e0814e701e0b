// What surviving a power cut costs: `store.synchronous` `normal` (WAL, fsync at checkpoints only)
// against `full` (one fsync per group commit), both with group commit, side by side in one run.
// For each setting a fresh daemon ingests MQTT QoS 1 states (PUBACK after the commit) from the
// raw-socket load generator, then HTTP PUTs from wrk (200 after the commit). The settings run in
// alternating order over BENCH_DURABILITY_ROUNDS (2) rounds so a neighbour's load hits both alike.
//
// Env: BENCH_DURABILITY_SECONDS (measured seconds per run, default 5), BENCH_CONNECTIONS and
// BENCH_WINDOW as in bench/mqtt.ts. Needs wrk.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseWrk, writePutScript } from './http.js';
import { provision, runLoad, settings, startOutpost } from './mqtt.js';
import type { BenchRow } from './lib.js';

type Synchronous = 'normal' | 'full';

interface Sample {
  mqttRate: number;
  mqttP50: number;
  mqttP99: number;
  httpRate: number;
  httpP50: number;
  httpP99: number;
}

async function measure(synchronous: Synchronous, seconds: number): Promise<Sample> {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bench-durability-'));
  try {
    const s = { ...settings(), seconds };
    const dataDir = join(dir, 'data');
    const devices = provision(dataDir, s.connections, 0);
    const configFile = join(dir, 'config.json');
    writeFileSync(configFile, JSON.stringify({ version: 1, store: { synchronous } }));
    const broker = await startOutpost(dataDir, ['--config', configFile]);
    try {
      const mqtt = await runLoad(broker, devices.publishers, 1, s);
      const device = devices.publishers[0]!;
      const script = writePutScript(dir, device.token);
      const wrk = spawn('wrk', ['-t1', '-c32', `-d${seconds}s`, '--latency', '-s', script, `http://127.0.0.1:${broker.httpPort}/device/${device.id}/asset/temperature/state`]);
      let out = '';
      wrk.stdout.on('data', (c: Buffer) => (out += c.toString()));
      await new Promise((r) => wrk.once('exit', r));
      const http = parseWrk(out);
      if (http.non2xx > 0) throw new Error(`${http.non2xx} HTTP PUTs were not 2xx`);
      return { mqttRate: mqtt.rate, mqttP50: mqtt.p50, mqttP99: mqtt.p99, httpRate: http.rps, httpP50: http.p50, httpP99: http.p99 };
    } finally {
      await broker.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export async function benchDurability(): Promise<BenchRow[]> {
  if (spawnSync('wrk', ['--version']).error) throw new Error('wrk is not installed: apt-get install wrk');
  const seconds = Number(process.env.BENCH_DURABILITY_SECONDS ?? 5);
  const rounds = Number(process.env.BENCH_DURABILITY_ROUNDS ?? 2);
  const samples: Record<Synchronous, Sample[]> = { normal: [], full: [] };
  for (let round = 0; round < rounds; round++) {
    const order: Synchronous[] = round % 2 === 0 ? ['normal', 'full'] : ['full', 'normal'];
    for (const setting of order) samples[setting].push(await measure(setting, seconds));
  }
  const summary = (setting: Synchronous) => {
    const xs = samples[setting];
    return {
      mqtt: mean(xs.map((x) => x.mqttRate)),
      mqttP50: mean(xs.map((x) => x.mqttP50)),
      mqttP99: mean(xs.map((x) => x.mqttP99)),
      http: mean(xs.map((x) => x.httpRate)),
      httpP50: mean(xs.map((x) => x.httpP50)),
      httpP99: mean(xs.map((x) => x.httpP99)),
      runs: xs.map((x) => `${Math.round(x.mqttRate)}/${Math.round(x.httpRate)}`).join(', '),
    };
  };
  const normal = summary('normal');
  const full = summary('full');
  const row = (setting: Synchronous, v: ReturnType<typeof summary>): BenchRow => ({
    name: `store.synchronous ${setting}`,
    'MQTT QoS 1 msg/s': Math.round(v.mqtt),
    'PUBACK p50 ms': Number(v.mqttP50.toFixed(2)),
    'PUBACK p99 ms': Number(v.mqttP99.toFixed(2)),
    'HTTP PUT req/s': Math.round(v.http),
    'PUT p50 ms': Number(v.httpP50.toFixed(2)),
    'PUT p99 ms': Number(v.httpP99.toFixed(2)),
    'MQTT × normal': Number((v.mqtt / normal.mqtt).toFixed(2)),
    'HTTP × normal': Number((v.http / normal.http).toFixed(2)),
    'runs (mqtt/http)': v.runs,
  });
  return [row('normal', normal), row('full', full)];
}
