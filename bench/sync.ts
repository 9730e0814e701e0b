// Upstream sync benchmark: a compiled gateway with a 100 000-state backlog in its outbox drains it to
// a Debian mosquitto on loopback (states/s, duplicates, gateway RSS), and live QoS 1 ingest is
// measured while the link is down (undisturbed: the outbox only fills) and while the backlog drains.
//
//   npm run build && BENCH_ONLY=sync node --import tsx bench/sync.ts
//
// Env: BENCH_SYNC_BACKLOG (default 100000), BENCH_SECONDS (live ingest seconds, default 5),
// BENCH_CONNECTIONS (publishers, default 16), BENCH_SYNC_WINDOW (upstream.window, default 64).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { provision, runLoad, settings, startOutpost, type Broker } from './mqtt.js';
import { rssBytes, sleep, type BenchRow } from './lib.js';
import { mosquitto } from '../test/helpers/mosquitto.js';

const BACKLOG = Number(process.env.BENCH_SYNC_BACKLOG ?? 100_000);
const WINDOW = Number(process.env.BENCH_SYNC_WINDOW ?? 64);

interface Upstream {
  link: string;
  depth: number;
  sent: number;
}

async function upstream(gateway: Broker): Promise<Upstream> {
  const res = await fetch(`http://127.0.0.1:${gateway.httpPort}/healthz`);
  return ((await res.json()) as { upstream: Upstream }).upstream;
}

/**
 * Counts the rows that reach the upstream (states and catalog messages; not the retained status).
 * Two states may be identical (same value in the same millisecond), so re-sent rows are counted as
 * what arrived beyond the rows the gateway had acknowledged: `received - sent`.
 */
async function counter(port: number) {
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { clientId: `bench-sync-${Date.now()}`, clean: true, reconnectPeriod: 0 });
  await client.subscribeAsync(['device/#', 'gateway/+/device/+'], { qos: 1 });
  let received = 0;
  client.on('message', () => received++);
  return {
    get received() {
      return received;
    },
    end: () => client.endAsync(),
  };
}

/** Waits for the outbox to empty, sampling the gateway's RSS; returns seconds and rows sent. */
async function drain(gateway: Broker, from: Upstream): Promise<{ seconds: number; sent: number; peakRssMB: number }> {
  const started = performance.now();
  let peak = 0;
  for (;;) {
    peak = Math.max(peak, rssBytes(gateway.proc.pid!));
    const u = await upstream(gateway);
    if (u.depth === 0 && u.link === 'up') return { seconds: (performance.now() - started) / 1000, sent: u.sent - from.sent, peakRssMB: Math.round(peak / 1048576) };
    await sleep(100);
  }
}

/** Fills the outbox (link down) with live QoS 1 ingest until it holds the backlog; returns the first run's rate. */
async function fill(gateway: Broker, publishers: Parameters<typeof runLoad>[1], s: ReturnType<typeof settings>): Promise<number> {
  let rate = 0;
  while ((await upstream(gateway)).depth < BACKLOG) {
    const r = await runLoad(gateway, publishers, 1, s);
    rate ||= r.rate;
  }
  return rate;
}

export async function benchSync(): Promise<BenchRow[]> {
  const s = { ...settings(), seconds: Number(process.env.BENCH_SECONDS ?? 5) };
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bench-sync-'));
  const dataDir = join(dir, 'gateway');
  const broker = await mosquitto({ persistence: false });
  const port = broker.port;
  const devices = provision(dataDir, s.connections, 0);
  const config = join(dir, 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      version: 1,
      upstream: {
        url: `mqtt://127.0.0.1:${port}`,
        gatewayId: 'BenchGateway000000000001',
        token: `gateway:${'b'.repeat(40)}`,
        window: WINDOW,
        maxBytes: 1024 * 1024 * 1024,
        reconnectMinMs: 100,
        reconnectMaxMs: 200,
      },
    }),
  );
  const gateway = await startOutpost(dataDir, ['--config', config]);
  const rows: BenchRow[] = [];
  try {
    // 1. Undisturbed ingest (the link is down: every state also gets its outbox row) filling the backlog.
    const undisturbed = await fill(gateway, devices.publishers, s);
    const before = await upstream(gateway);

    // 2. The link comes up: the backlog drains with nothing else going on.
    await broker.start();
    const count = await counter(port);
    const quiet = await drain(gateway, before);
    await sleep(1000);
    rows.push({
      name: `drain of a ${before.depth.toLocaleString('en-US')}-state backlog → mosquitto`,
      'states/s': Math.round(quiet.sent / quiet.seconds),
      seconds: Number(quiet.seconds.toFixed(1)),
      duplicates: Math.max(0, count.received - quiet.sent),
      'gateway RSS MB (peak)': quiet.peakRssMB,
      'live ingest msg/s': null,
      'live / undisturbed': null,
    });
    await count.end();

    // 3. Down again, a new backlog; then live ingest while it drains.
    await broker.stop();
    await sleep(300);
    await fill(gateway, devices.publishers, s);
    const before2 = await upstream(gateway);
    await broker.start();
    const count2 = await counter(port);
    const draining = drain(gateway, before2);
    const live = await runLoad(gateway, devices.publishers, 1, s);
    const busy = await draining;
    const sentDuring = (await upstream(gateway)).sent - before2.sent;
    await sleep(1000);
    const stillDraining = busy.seconds > s.seconds + 1.5;
    rows.push({
      name: `live QoS 1 ingest, ${s.connections} publishers, link down (undisturbed)`,
      'states/s': null,
      seconds: s.seconds,
      duplicates: null,
      'gateway RSS MB (peak)': null,
      'live ingest msg/s': Math.round(undisturbed),
      'live / undisturbed': 1,
    });
    rows.push({
      name: `live QoS 1 ingest while a ${before2.depth.toLocaleString('en-US')}-state backlog drains${stillDraining ? '' : ' (drain ended first)'}`,
      'states/s': Math.round(busy.sent / busy.seconds),
      seconds: Number(busy.seconds.toFixed(1)),
      duplicates: Math.max(0, count2.received - sentDuring),
      'gateway RSS MB (peak)': busy.peakRssMB,
      'live ingest msg/s': Math.round(live.rate),
      'live / undisturbed': Number((live.rate / undisturbed).toFixed(2)),
    });
    await count2.end();
  } finally {
    await broker.dispose();
    await gateway.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printTable, saveResults } = await import('./lib.js');
  const rows = await benchSync();
  printTable('Upstream sync', rows);
  console.log(`written: ${saveResults('sync', rows)}`);
}
