// HTTP benchmark: persisted, profile-validated asset-state PUTs with wrk (keep-alive), start-to-ready
// time of the compiled daemon and its RSS idle and under load. Needs `wrk` (Debian package).
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import { provision, removeDir, startDaemon, tempDataDir } from '../test/helpers/daemon.js';
import { median, printTable, rssBytes, saveResults, sleep, type BenchRow } from './lib.js';

const DURATION_S = Number(process.env.BENCH_SECONDS ?? 10);

/**
 * Spawn to the `ready` line, default configuration. Without `dataDir` every run starts on a new data
 * directory (a first start: the database is created and migrated); with one, every run restarts
 * on the same database, which is what a service restart or a reboot does.
 */
async function startToReady(runs: number, dataDir?: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = process.hrtime.bigint();
    const d = await startDaemon({ env: { OUTPOST_LOG_LEVEL: 'info' }, dataDir });
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
    await d.stop();
    if (!dataDir) removeDir(d.dataDir);
  }
  return times;
}

/** Restarts on one data directory: one start to create it, then `runs` timed ones. */
async function restartToReady(runs: number): Promise<number[]> {
  const dataDir = tempDataDir();
  try {
    await startToReady(1, dataDir);
    return await startToReady(runs, dataDir);
  } finally {
    removeDir(dataDir);
  }
}

/** The wrk script of the HTTP PUT rows: one device's asset state, a value that changes per request. */
export function writePutScript(dir: string, token: string): string {
  const script = join(dir, 'put.lua');
  writeFileSync(
    script,
    `wrk.method = "PUT"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${token}"
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, '{"value": ' .. (n % 80) .. '.5}')
end
`,
  );
  return script;
}

export function parseWrk(output: string) {
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? NaN);
  const toMs = (v: string, unit: string) => Number(v) * ({ us: 0.001, ms: 1, s: 1000 }[unit] ?? 1);
  const pct = (p: string) => {
    const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(output);
    return m ? toMs(m[1]!, m[2]!) : NaN;
  };
  const requests = Number(/(\d+) requests in/.exec(output)?.[1] ?? NaN);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0);
  return { rps, p50: pct('50'), p99: pct('99'), requests, non2xx };
}

export async function benchHttp(): Promise<BenchRow[]> {
  if (spawnSync('wrk', ['--version']).error) throw new Error('wrk is not installed: apt-get install wrk');
  const ready = await startToReady(7);
  const restart = await restartToReady(7);
  const d = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
  try {
    const { device } = provision(d.dataDir, [{ name: 'temperature', is: 'sensor', profile: { type: 'number', minimum: -40, maximum: 85 } }]);
    // Idle means idle: V8's memory reducer trims the start-up heap after ~8 s without traffic.
    await sleep(12_000);
    const idleRss = rssBytes(d.proc.pid!);
    const script = writePutScript(tempDataDir(), device.token);
    let peakRss = idleRss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssBytes(d.proc.pid!))), 200);
    const wrk = spawn('wrk', ['-t1', '-c32', `-d${DURATION_S}s`, '--latency', '-s', script, `${d.url}/device/${device.id}/asset/temperature/state`]);
    let out = '';
    wrk.stdout.on('data', (c: Buffer) => (out += c.toString()));
    await new Promise((r) => wrk.once('exit', r));
    clearInterval(sampler);
    const result = parseWrk(out);
    await d.stop();
    const db = new BetterSqlite3(join(d.dataDir, 'outpost.db'), { readonly: true });
    const stored = db.prepare('SELECT count(*) FROM states').pluck().get() as number;
    db.close();
    return [
      { name: 'http PUT asset state (validated, persisted)', value: Math.round(result.rps), unit: 'req/s', target: '>= 10000', p50_ms: result.p50, p99_ms: result.p99, note: `${result.requests} sent, ${result.non2xx} non-2xx, ${stored} rows stored` },
      { name: 'start-to-ready (compiled daemon, new data dir)', value: Math.round(median(ready)), unit: 'ms (median of 7)', target: '<= 300', p50_ms: null, p99_ms: null, note: `min ${Math.round(Math.min(...ready))} max ${Math.round(Math.max(...ready))}` },
      { name: 'start-to-ready (restart, existing data dir)', value: Math.round(median(restart)), unit: 'ms (median of 7)', target: '<= 300', p50_ms: null, p99_ms: null, note: `min ${Math.round(Math.min(...restart))} max ${Math.round(Math.max(...restart))}` },
      { name: 'RSS idle (12 s after ready, no traffic)', value: Math.round(idleRss / 1048576), unit: 'MB', target: '<= 60', p50_ms: null, p99_ms: null, note: '' },
      { name: 'RSS under load (peak)', value: Math.round(peakRss / 1048576), unit: 'MB', target: '', p50_ms: null, p99_ms: null, note: '' },
    ];
  } finally {
    await d.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await benchHttp();
  printTable('HTTP', rows);
  console.log(`\nwritten: ${saveResults('http', rows)}`);
}
