// The LPWAN throughput load against two builds of Outpost, alternated: this checkout and another
// (an older commit checked out beside it, built, with its node_modules). The machines here are
// shared and their speed drifts by tens of percent within an hour, so a change is judged by runs of
// the old and the new code taken in turn, not by a number from another day.
//
//   git worktree add ../outpost-before <commit> && (cd ../outpost-before && npm ci && npm run build)
//   npm run build && node --import tsx bench/lpwan-compare.ts ../outpost-before [rounds]
//
// Each run is bench/lpwan.ts's throughput phase on a fresh data dir provisioned by that checkout's
// own code (its schema): 1 000 ABP devices, 5 000 uplinks of warm-up, then 30 000 measured with
// 400 in flight. Prints a table and writes bench/results/lpwan-compare.json.
import { resolve } from 'node:path';
import { printTable, saveResults, type BenchRow } from './lib.js';
import { rig, throughput } from './lpwan.js';

const other = process.argv[2];
if (!other) {
  console.error('usage: node --import tsx bench/lpwan-compare.ts <other checkout, built> [rounds]');
  process.exit(2);
}
const rounds = Number(process.argv[3] ?? 3);
const builds: Array<{ label: string; checkout: string | undefined }> = [
  { label: `other (${other})`, checkout: resolve(other) },
  { label: 'this checkout', checkout: undefined },
];
const rows: BenchRow[] = [];
for (let round = 1; round <= rounds; round++) {
  for (const build of builds) {
    const r = await rig(1000, build.checkout);
    try {
      await throughput(r, 5_000, 400);
      const t = await throughput(r, Number(process.env.BENCH_LPWAN_UPLINKS ?? 30_000), 400, 1_000_000);
      rows.push({
        name: `round ${round}: ${build.label}`,
        'uplinks/s': Math.round(t.perSecond),
        'CPU µs per uplink': Number(t.cpuPerUplink.toFixed(1)),
        'user µs': Number(t.userPerUplink.toFixed(1)),
        'system µs': Number(t.systemPerUplink.toFixed(1)),
        lost: t.lost,
      });
    } finally {
      await r.close();
    }
  }
}
printTable('LPWAN throughput, two builds alternated (1 000 ABP devices, 5 000 uplinks of warm-up, 30 000 measured)', rows);
console.log(`written: ${saveResults('lpwan-compare', rows)}`);
