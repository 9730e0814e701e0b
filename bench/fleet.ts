// Fleet benchmark (docs/sync.md, "Manage a fleet from the central"): a compiled central and a
// compiled gateway on loopback. (1) 1 000 managed devices created at the central over HTTP reach the
// gateway: from the first POST to the gateway reporting every one applied. (2) The gateway is stopped,
// 1 000 changes are made at the central (one per device), the gateway starts again: from its start
// to every change applied. Targets: 10 s each.
//
//   npm run build && BENCH_ONLY=fleet node --import tsx bench/run.ts
//
// Env: BENCH_FLEET_DEVICES (default 1000), BENCH_FLEET_CONCURRENCY (HTTP requests in flight, default 8).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../test/helpers/daemon.js';
import { sleep, type BenchRow } from './lib.js';

const DEVICES = Number(process.env.BENCH_FLEET_DEVICES ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_FLEET_CONCURRENCY ?? 8);
const TARGET_S = 10;

async function inBatches<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

export async function benchFleet(): Promise<BenchRow[]> {
  const centralDir = tempDataDir();
  const gwDir = tempDataDir();
  let central: RunningDaemon | undefined;
  let gateway: RunningDaemon | undefined;
  try {
    central = await startDaemon({ dataDir: centralDir, env: { OUTPOST_ROLE: 'central', OUTPOST_RATE_LIMIT: '0' } });
    const app = cliJson<{ token: string }>(['token', 'create', '--name', 'bench', '--scopes', 'read,command,admin'], centralDir).token;
    const g = cliJson<{ id: string; token: string }>(['gateway', 'create', '--name', 'bench'], centralDir);
    const gwConfig = join(gwDir, 'config.json');
    writeFileSync(gwConfig, JSON.stringify({ version: 1, upstream: { reconnectMinMs: 100, reconnectMaxMs: 500 } }));
    const startGateway = () =>
      startDaemon({
        dataDir: gwDir,
        args: ['--config', gwConfig],
        env: { OUTPOST_UPSTREAM_URL: `mqtt://127.0.0.1:${central!.mqttPort}`, OUTPOST_UPSTREAM_GATEWAY_ID: g.id, OUTPOST_UPSTREAM_TOKEN: g.token },
      });
    const config = async () => (await api(central!.url, 'GET', `/gateway/${g.id}`, { token: app })).body as { connected: boolean; config: { managed: number; pending: number } };
    const allApplied = async (timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const c = (await config()).config;
        if (c.managed === DEVICES && c.pending === 0) return;
        if (Date.now() > deadline) throw new Error(`not applied in ${timeoutMs} ms: ${JSON.stringify(c)}`);
        await sleep(20);
      }
    };
    gateway = await startGateway();
    while (!(await config()).connected) await sleep(20);

    // (1) Created at the central, reaching the gateway.
    const ids: string[] = [];
    const t0 = performance.now();
    await inBatches(
      Array.from({ length: DEVICES }, (_, i) => i),
      async (i) => {
        const r = await api(central!.url, 'POST', '/devices', { token: app, json: { name: `sensor-${i}`, title: `Greenhouse sensor ${i}`, gateway: g.id } });
        if (r.status !== 201) throw new Error(`POST /devices: ${r.status} ${r.text}`);
        ids.push(r.body.id);
      },
    );
    const created = performance.now();
    await allApplied(120_000);
    const reached = performance.now();
    const atGateway = Number((await api(gateway.url, 'GET', '/metrics')).text.match(/^outpost_fleet_applied_total (\d+)/m)?.[1] ?? NaN);

    // (2) 1 000 changes while the gateway is offline, caught up when it returns.
    await gateway.stop();
    while ((await config()).connected) await sleep(20);
    await inBatches(ids, async (id) => {
      const r = await api(central!.url, 'PUT', `/device/${id}`, { token: app, json: { name: `renamed-${id.slice(0, 6)}` } });
      if (r.status !== 200) throw new Error(`PUT /device: ${r.status} ${r.text}`);
    });
    const pendingBefore = (await config()).config.pending;
    const t1 = performance.now();
    gateway = await startGateway();
    const started = performance.now();
    await allApplied(120_000);
    const caughtUp = performance.now();

    const createS = (reached - t0) / 1000;
    const catchS = (caughtUp - t1) / 1000;
    return [
      {
        name: `${DEVICES} managed devices created at the central reach the gateway`,
        seconds: Number(createS.toFixed(2)),
        'devices/s': Math.round(DEVICES / createS),
        'of which HTTP creates s': Number(((created - t0) / 1000).toFixed(2)),
        'target s': TARGET_S,
        met: createS <= TARGET_S ? 'yes' : 'no',
        'applied at gateway': atGateway,
      },
      {
        name: `gateway offline for ${pendingBefore} changes catches up (from its start)`,
        seconds: Number(catchS.toFixed(2)),
        'devices/s': Math.round(pendingBefore / catchS),
        'of which daemon start s': Number(((started - t1) / 1000).toFixed(2)),
        'target s': TARGET_S,
        met: catchS <= TARGET_S ? 'yes' : 'no',
        'applied at gateway': pendingBefore,
      },
    ];
  } finally {
    await gateway?.stop();
    await central?.stop();
    removeDir(gwDir);
    removeDir(centralDir);
  }
}
