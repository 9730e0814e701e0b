// The LPWAN throughput load against two builds of Outpost, alternated: this checkout and another
// (an older commit checked out beside it, built, with its node_modules). The machines here are
// shared and their speed drifts by tens of percent within an hour, so a change is judged by runs of
// the old and the new code taken in turn, not by a number from another day.
//
//   git worktree add ../outpost-before <commit> && (cd ../outpost-before && npm ci && npm run build)
//   npm run build && node --import tsx bench/lpwan-compare.ts ../outpost-before [rounds]
//
// Each run: a fresh data dir provisioned by that checkout's own code (its schema), 1 000 ABP
// devices, 5 000 uplinks of warm-up, then 30 000 measured with 400 in flight, as in bench/lpwan.ts.
// Prints a table and writes bench/results/lpwan-compare.json.
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { resolve } from 'node:path';
import mqtt from 'mqtt';
import { ROOT, removeDir, startDaemon, tempDataDir } from '../test/helpers/daemon.js';
import { cpuTimes, printTable, saveResults, sleep, type BenchRow } from './lib.js';

interface Checkout {
  label: string;
  root: string;
}

interface BenchDeviceLike {
  id: string;
}

/** What a checkout's bench/lpwan.ts exports (its own provisioning writes its own schema). */
interface LpwanHelpers {
  provisionDevices(dataDir: string, count: number): BenchDeviceLike[];
  uplink(d: BenchDeviceLike, count: number): Buffer;
  pushData(payload: Buffer, tmst: number): Buffer;
}

const GATEWAY_EUI = Buffer.from('b827ebfffe00be9c', 'hex');

async function runOnce(checkout: Checkout, uplinks: number): Promise<{ perSecond: number; cpuUs: number; userUs: number; sysUs: number; lost: number }> {
  const helpers = (await import(resolve(checkout.root, 'bench', 'lpwan.ts'))) as LpwanHelpers;
  const program = resolve(checkout.root, 'dist', 'cli', 'main.js');
  const dataDir = tempDataDir();
  const devices = helpers.provisionDevices(dataDir, 1000);
  const daemon = await startDaemon({ dataDir, program, env: { OUTPOST_RATE_LIMIT: '0' } });
  const token = (JSON.parse(execFileSync(process.execPath, [program, 'token', 'create', '--name', 'bench', '--scopes', 'read,command,admin', '--data', dataDir, '--json'], { encoding: 'utf8' })) as { token: string }).token;
  const socket = createSocket('udp4');
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${daemon.mqttPort}`, { username: token, password: 'x', reconnectPeriod: 0 });
  try {
    await new Promise<void>((done) => socket.bind(0, '127.0.0.1', () => done()));
    const send = (bytes: Buffer) => socket.send(bytes, daemon.gwmpPort, '127.0.0.1');
    send(Buffer.concat([Buffer.from([2, 0, 1, 2]), GATEWAY_EUI])); // PULL_DATA: the gateway is online
    await sleep(200);
    await client.subscribeAsync('device/+/asset/count/feed', { qos: 0 });
    let arrived = 0;
    client.on('message', () => arrived++);
    const phase = async (total: number, offset: number) => {
      const start = arrived;
      const pid = daemon.proc.pid!;
      const t0 = cpuTimes(pid);
      const started = performance.now();
      let next = 0;
      let seen = arrived;
      let lastArrival = started;
      while (arrived - start < total && performance.now() - lastArrival < 2000) {
        while (next < total && next - (arrived - start) < 400) {
          send(helpers.pushData(helpers.uplink(devices[next % devices.length]!, offset + next), next));
          next++;
        }
        await new Promise((done) => setImmediate(done));
        if (arrived !== seen) {
          seen = arrived;
          lastArrival = performance.now();
        }
      }
      const received = arrived - start;
      const t1 = cpuTimes(pid);
      return {
        perSecond: received / ((lastArrival - started) / 1000),
        cpuUs: (t1.user + t1.system - t0.user - t0.system) / received,
        userUs: (t1.user - t0.user) / received,
        sysUs: (t1.system - t0.system) / received,
        lost: total - received,
      };
    };
    await phase(5000, 0);
    return await phase(uplinks, 1_000_000);
  } finally {
    await client.endAsync(true);
    socket.close();
    await daemon.stop();
    removeDir(dataDir);
  }
}

const other = process.argv[2];
if (!other) {
  console.error('usage: node --import tsx bench/lpwan-compare.ts <other checkout, built> [rounds]');
  process.exit(2);
}
const rounds = Number(process.argv[3] ?? 3);
const checkouts: Checkout[] = [
  { label: `other (${other})`, root: resolve(other) },
  { label: 'this checkout', root: ROOT },
];
const rows: BenchRow[] = [];
for (let round = 1; round <= rounds; round++) {
  for (const checkout of checkouts) {
    const r = await runOnce(checkout, Number(process.env.BENCH_LPWAN_UPLINKS ?? 30_000));
    rows.push({
      name: `round ${round}: ${checkout.label}`,
      'uplinks/s': Math.round(r.perSecond),
      'CPU µs per uplink': Number(r.cpuUs.toFixed(1)),
      'user µs': Number(r.userUs.toFixed(1)),
      'system µs': Number(r.sysUs.toFixed(1)),
      lost: r.lost,
    });
  }
}
printTable('LPWAN throughput, two builds alternated (1 000 ABP devices, 5 000 uplinks of warm-up, 30 000 measured)', rows);
console.log(`written: ${saveResults('lpwan-compare', rows)}`);
