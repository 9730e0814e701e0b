// Operations costs: what one systemd notification costs the daemon (it runs `systemd-notify`,
// docs/operations.md "How the watchdog works"), and how fast `outpost backup` copies a database
// of BENCH_OPS_MB (128) megabytes, idle and while another process keeps writing to it.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../src/store/store.js';
import { backupDatabase } from '../src/ops/backup.js';
import type { BenchRow } from './lib.js';

/** A unix datagram socket that reads and drops notifications, as systemd does (perl: always in Debian). */
function notifySink(path: string) {
  const script = 'use IO::Socket::UNIX; use Socket; $|=1; my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0]) or die; print "ok\\n"; while (1) { my $m; $s->recv($m, 4096) }';
  const proc = spawn('perl', ['-e', script, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise<() => void>((resolve) => proc.stdout.once('data', () => resolve(() => proc.kill())));
}

async function benchNotify(dir: string): Promise<BenchRow[]> {
  if (spawnSync('sh', ['-c', 'command -v systemd-notify'], { stdio: 'ignore' }).status !== 0) return [{ name: 'systemd-notify not installed', value: null }];
  const socket = join(dir, 'notify.sock');
  const stop = await notifySink(socket);
  // A heap the size of a running daemon's: fork cost grows with the parent's mappings.
  const ballast = Array.from({ length: 400_000 }, (_, i) => ({ i, s: `x${i}` }));
  const once = () =>
    new Promise<void>((resolve) => spawn('systemd-notify', ['WATCHDOG=1'], { stdio: 'ignore', env: { ...process.env, NOTIFY_SOCKET: socket } }).once('exit', () => resolve()));
  for (let i = 0; i < 5; i++) await once();
  const n = 200;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await once();
  const wallMs = (performance.now() - t0) / n;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000 / n;
  stop();
  const rssMB = Math.round(process.memoryUsage.rss() / 1048576);
  void ballast.length;
  return [
    {
      name: `one watchdog notification (spawn systemd-notify from a ${rssMB} MB process)`,
      'wall ms': Number(wallMs.toFixed(2)),
      'daemon CPU ms': Number(cpuMs.toFixed(2)),
      'CPU share at WatchdogSec=30s': `${((cpuMs / 15_000) * 100).toFixed(4)} %`,
    },
  ];
}

function writerProcess(dataDir: string) {
  // Keeps committing 500-state batches to the database, like a daemon under load.
  const code = `
    const Database = require('better-sqlite3');
    const db = new Database(${JSON.stringify(join(dataDir, 'outpost.db'))}, { timeout: 5000 });
    db.pragma('journal_mode = WAL'); db.pragma('synchronous = NORMAL');
    const asset = db.prepare('SELECT id FROM assets LIMIT 1').pluck().get();
    const insert = db.prepare('INSERT INTO states (asset_id, at, value, received_at) VALUES (?, ?, ?, ?)');
    const batch = db.transaction((n) => { for (let i = 0; i < 500; i++) insert.run(asset, n + i, '"w"', Date.now()); });
    let n = 0, rows = 0;
    process.on('SIGTERM', () => { process.stdout.write(String(rows)); process.exit(0); });
    setInterval(() => { batch(n); n += 500; rows += 500; }, 5);
    process.stdout.write('ready\\n');`;
  const proc = spawn(process.execPath, ['-e', code], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const ready = new Promise<void>((resolve) => proc.stdout.once('data', () => resolve()));
  const stop = () =>
    new Promise<number>((resolve) => {
      proc.once('exit', () => resolve(Number(out.replace('ready\n', '')) || 0));
      proc.kill('SIGTERM');
    });
  return { ready, stop };
}

async function benchBackup(dir: string): Promise<BenchRow[]> {
  const targetBytes = Number(process.env.BENCH_OPS_MB ?? 128) * 1048576;
  const dataDir = join(dir, 'data');
  const store = Store.open(dataDir);
  const { device } = store.devices.create({ name: 'bench' }, Date.now());
  const assets = Array.from({ length: 50 }, (_, i) => store.assets.create({ deviceId: device.id, name: `a${i}`, title: null, description: null, is: 'sensor', profile: { type: 'string' } }, Date.now()));
  const value = JSON.stringify('x'.repeat(200));
  let at = Date.UTC(2026, 0, 1);
  while (statSync(store.path).size < targetBytes) {
    store.states.write(Array.from({ length: 20_000 }, (_, i) => ({ assetId: assets[i % assets.length]!.id, at: at++, valueJson: value, receivedAt: at })));
  }
  store.checkpoint();
  store.close();
  const mb = statSync(join(dataDir, 'outpost.db')).size / 1048576;
  const rows: BenchRow[] = [];
  for (const loaded of [false, true]) {
    const writer = loaded ? writerProcess(dataDir) : undefined;
    await writer?.ready;
    const file = join(dir, `backup-${loaded ? 'loaded' : 'idle'}.db`);
    const t0 = performance.now();
    const result = await backupDatabase(dataDir, file);
    const seconds = (performance.now() - t0) / 1000;
    const written = (await writer?.stop()) ?? 0;
    rows.push({
      name: `outpost backup, ${loaded ? 'while another process commits 500-row batches' : 'idle database'}`,
      'database MB': Math.round(mb),
      seconds: Number(seconds.toFixed(2)),
      'MB/s': Math.round(mb / seconds),
      restarts: result.restarts,
      'rows written meanwhile': written,
    });
    rmSync(file, { force: true });
  }
  return rows;
}

export async function benchOps(): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bench-ops-'));
  try {
    return [...(await benchNotify(dir)), ...(await benchBackup(dir))];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
