// How long the daemon's start-up integrity check (`PRAGMA quick_check`, store.checkOnStart) takes
// on a large database: a data dir grown to BENCH_STORE_MB (1024) megabytes of history, then the
// check as the daemon runs it (Store.open with checkIntegrity): warm (the file just written is in
// the OS page cache) and, with BENCH_DROP_CACHES=1 as root, cold first (after a reboot the file is
// read from the SD card). Dropping caches slows every process on the machine for a while, so it
// is not done by default on a shared machine.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../src/store/store.js';
import type { BenchRow } from './lib.js';

function dropPageCache(): boolean {
  if (process.env.BENCH_DROP_CACHES !== '1') return false;
  spawnSync('sync');
  return spawnSync('sh', ['-c', 'echo 1 > /proc/sys/vm/drop_caches'], { stdio: 'ignore' }).status === 0;
}

export async function benchStore(): Promise<BenchRow[]> {
  const targetBytes = Number(process.env.BENCH_STORE_MB ?? 1024) * 1024 * 1024;
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bench-store-'));
  try {
    const store = Store.open(dir);
    const { device } = store.devices.create({ name: 'bench' }, Date.now());
    const assets = Array.from({ length: 100 }, (_, i) => store.assets.create({ deviceId: device.id, name: `a${i}`, title: null, description: null, is: 'sensor', profile: { type: 'string' } }, Date.now()));
    const value = JSON.stringify('x'.repeat(200));
    const built = performance.now();
    let at = Date.UTC(2026, 0, 1);
    let rows = 0;
    while (statSync(store.path).size + safeSize(store.path + '-wal') < targetBytes) {
      const batch = Array.from({ length: 20_000 }, (_, i) => ({ assetId: assets[i % assets.length]!.id, at: at++, valueJson: value, receivedAt: at }));
      store.states.write(batch);
      rows += batch.length;
    }
    store.close();
    const buildSeconds = (performance.now() - built) / 1000;
    const bytes = statSync(join(dir, 'outpost.db')).size;
    const result: BenchRow[] = [];
    const runs = dropPageCache() ? (['cold', 'warm'] as const) : (['warm'] as const);
    for (const run of runs) {
      const started = performance.now();
      Store.open(dir, { checkIntegrity: true }).close();
      const seconds = (performance.now() - started) / 1000;
      result.push({
        name: `quick_check at start, ${run} page cache`,
        'database MB': Math.round(bytes / 1048576),
        'history rows': rows,
        seconds: Number(seconds.toFixed(2)),
        'MB/s': Math.round(bytes / 1048576 / seconds),
      });
    }
    console.log(`(built the ${Math.round(bytes / 1048576)} MB database in ${buildSeconds.toFixed(1)} s)`);
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function safeSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
