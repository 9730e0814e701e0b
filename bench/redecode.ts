// Re-decode benchmark (issue 13): uplinks re-decoded per second with an ABCL and a JS codec, in
// alternating rounds in one run, on a real SQLite file (WAL, synchronous=normal, the defaults).
// Each round: 50 000 kept raw uplinks of an environment sensor (3 assets each) with the states a
// wrong codec gave them; the fixed codec is set and a re-decode job replaces all 150 000 states.
//   node --import tsx bench/redecode.ts
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/core/config.js';
import { systemClock } from '../src/core/time.js';
import { createLogger } from '../src/ops/logger.js';
import { Store } from '../src/store/store.js';
import { Catalog } from '../src/store/catalog.js';
import { DeviceCodecs, setDeviceCodec } from '../src/device-codecs/device-codecs.js';
import { RedecodeRunner } from '../src/device-codecs/redecode.js';
import { median, printTable, saveResults, type BenchRow } from './lib.js';

const UPLINKS = 50_000;
const ROUNDS = Number(process.env.REDECODE_ROUNDS ?? 3);

// temperature int16 LE / 100, humidity uint8 / 2, battery uint16 LE / 1000 (5 bytes).
const abcl = (scale: number) => ({
  uplink: {
    format: 'abcl',
    document: {
      sense: [
        { asset: 'temperature', value: { byte: 0, bytelength: 2, byteorder: 'little', signed: true, calculation: `val / ${scale}` } },
        { asset: 'humidity', value: { byte: 2, calculation: 'val / 2' } },
        { asset: 'battery', value: { byte: 3, bytelength: 2, byteorder: 'little', calculation: 'val / 1000' } },
      ],
    },
  },
});
const js = (scale: number) => ({
  uplink: {
    format: 'js',
    script: `function decodeUplink(input) {
  var b = input.bytes;
  var t = (b[0] | (b[1] << 8)) << 16 >> 16;
  return { data: { temperature: t / ${scale}, humidity: b[2] / 2, battery: (b[3] | (b[4] << 8)) / 1000 } };
}`,
  },
});

function frame(i: number): Uint8Array {
  const t = (i % 4000) - 1000;
  return Uint8Array.of(t & 0xff, (t >> 8) & 0xff, i % 200, 0x10, 0x0e);
}

/** One round: fill a fresh store with history decoded by the wrong codec, then time the re-decode. */
async function round(kind: 'abcl' | 'js'): Promise<{ uplinksPerSec: number; statesPerSec: number; uplinksPerCpuSec: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bench-redecode-'));
  const config = loadConfig({ dataDir: dir, env: {} });
  const store = Store.open(dir);
  const catalog = new Catalog(store);
  const logger = createLogger('silent');
  const codecs = new DeviceCodecs(config, logger);
  try {
    const { device } = store.devices.create({ name: 'bench' }, Date.now());
    const assets = ['temperature', 'humidity', 'battery'].map((name) =>
      store.assets.create({ deviceId: device.id, name, title: null, description: null, is: 'sensor', profile: { type: 'number' } }, Date.now()),
    );
    const settings = kind === 'abcl' ? abcl : js;
    await setDeviceCodec(store, codecs, systemClock, device, settings(1000));
    const t0 = Date.now() - UPLINKS * 1000;
    store.transaction(() => {
      for (let i = 0; i < UPLINKS; i++) {
        const at = t0 + i * 1000;
        const seq = store.uplinks.record({ deviceId: device.id, at, payload: frame(i), port: null, source: 'bench', decoded: true, error: null, codec: 'old' });
        store.states.write(assets.map((a) => ({ assetId: a.id, at, valueJson: String(i % 100), receivedAt: at, uplinkSeq: seq, codec: 'old' })));
      }
    });
    await setDeviceCodec(store, codecs, systemClock, device, settings(100));
    catalog.invalidate();
    const runner = new RedecodeRunner({ store, catalog, codecs, clock: systemClock, logger });
    const started = performance.now();
    const cpu = process.cpuUsage();
    runner.start(catalog.device(device.id)!, { from: null, to: null });
    const job = await runner.running(device.id)!;
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    const cpuSeconds = (used.user + used.system) / 1e6;
    if (job.status !== 'done' || job.done !== UPLINKS || job.failed !== 0) throw new Error(`re-decode did not finish cleanly: ${JSON.stringify(job)}`);
    return { uplinksPerSec: Math.round(job.done / seconds), statesPerSec: Math.round(job.replaced / seconds), uplinksPerCpuSec: Math.round(job.done / cpuSeconds) };
  } finally {
    codecs.dispose();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchRedecode(): Promise<BenchRow[]> {
  const results: Record<'abcl' | 'js', Array<{ uplinksPerSec: number; statesPerSec: number; uplinksPerCpuSec: number }>> = { abcl: [], js: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const kind of ['abcl', 'js'] as const) results[kind].push(await round(kind));
  }
  const row = (kind: 'abcl' | 'js', name: string, target: string): BenchRow => ({
    name,
    uplinksPerSec: median(results[kind].map((x) => x.uplinksPerSec)),
    statesPerSec: median(results[kind].map((x) => x.statesPerSec)),
    // Wall-clock rates fall when the machine is shared; uplinks per CPU second of this process do not.
    uplinksPerCpuSec: median(results[kind].map((x) => x.uplinksPerCpuSec)),
    range: `${Math.min(...results[kind].map((x) => x.uplinksPerSec))}–${Math.max(...results[kind].map((x) => x.uplinksPerSec))}`,
    target,
  });
  return [row('abcl', `re-decode, ABCL codec, ${UPLINKS} uplinks × 3 states`, '≥ 20 000 uplinks/s'), row('js', `re-decode, JS codec, ${UPLINKS} uplinks × 3 states`, '')];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const rows = await benchRedecode();
  printTable(`Re-decode (median of ${ROUNDS} alternating rounds)`, rows);
  console.log(`written: ${saveResults('redecode', rows)}`);
}
