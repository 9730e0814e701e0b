// The packet forwarder door fuzzed over real UDP against the compiled daemon: hostile PUSH_DATA
// (`stat`, `rxpk`), PULL_DATA from made-up gateways, TX_ACKs, raw bytes. A finding is: the daemon
// exits or logs a datagram it failed to handle, a well-behaved forwarder's PUSH_DATA gets no
// PUSH_ACK within 2 s, /healthz answers other than 200 or grows past 64 KiB, or the daemon's
// memory grows past a bound. Seeded like the other targets (FUZZ_SEED, FUZZ_COUNT).
import { createSocket, type Socket } from 'node:dgram';
import { api, provision, removeDir, startDaemon } from '../helpers/daemon.js';
import { ForwarderSimulator } from '../lpwan/forwarder.js';
import { uplinkFrame } from '../lpwan/frames.js';
import { Rng } from './generators.js';
import { gwmpDatagram } from './gwmp-inputs.js';
import type { Finding, TargetReport } from './runner.js';

const TARGET = 'gwmp-socket';
const MB = 1024 * 1024;
/** The largest UDP payload over IPv4; the generator may make longer ones, which are cut. */
const UDP_MAX = 65_507;

export interface GwmpFuzzOptions {
  count: number;
  seed: number;
  /** Resident memory growth of the daemon above this is a finding. */
  maxRssGrowthMb?: number;
  log?: (line: string) => void;
}

async function rssOf(url: string): Promise<number> {
  const text = (await api(url, 'GET', '/metrics')).text;
  return Number(/process_resident_memory_bytes (\d+)/.exec(text)?.[1] ?? 0);
}

export async function fuzzGwmpDatagrams(options: GwmpFuzzOptions): Promise<TargetReport> {
  const { count, seed, maxRssGrowthMb = 100, log = () => {} } = options;
  const report: TargetReport = { target: TARGET, inputs: 0, accepted: 0, refused: 0, seconds: 0, perSecond: 0, slowestMs: 0, peakRssMb: 0, findings: [] };
  const finding = (index: number, error: string) => {
    const f: Finding = { target: TARGET, index, error };
    report.findings.push(f);
    log(`FINDING ${TARGET} #${index} (seed ${seed}): ${error}`);
  };
  const daemon = await startDaemon();
  let sock: Socket | undefined;
  const probe = new ForwarderSimulator('b827ebfffe00beef');
  try {
    // A device whose DevAddr appears in some fuzzed packets: those go through the network server.
    const keys = { devAddr: '26011234', nwkSKey: Buffer.alloc(16, 1), appSKey: Buffer.alloc(16, 2) };
    const payloads = Array.from({ length: 8 }, (_, i) => uplinkFrame(keys, { fCnt: i + 1, fPort: 1, payload: Buffer.from([i]) }));
    const { device, app } = provision(daemon.dataDir);
    const put = await api(daemon.url, 'PUT', `/device/${device.id}/lorawan`, {
      token: app.token,
      json: { activation: 'abp', devAddr: keys.devAddr, nwkSKey: keys.nwkSKey.toString('hex'), appSKey: keys.appSKey.toString('hex') },
    });
    if (put.status !== 200) throw new Error(`LoRaWAN settings refused: ${put.text}`);
    sock = createSocket({ type: 'udp4', sendBufferSize: 4 * MB });
    await new Promise<void>((r) => sock!.bind(0, '127.0.0.1', () => r()));
    sock.on('message', () => report.accepted++);
    sock.on('error', () => {});
    await probe.connect(daemon.gwmpPort);
    const baseline = await rssOf(daemon.url);
    report.peakRssMb = baseline / MB;
    const began = performance.now();
    const check = async (index: number) => {
      const t0 = performance.now();
      try {
        await Promise.race([probe.push([{ payload: payloads[0]! }]), new Promise((_, reject) => setTimeout(() => reject(new Error('no PUSH_ACK within 2 s')), 2000))]);
      } catch (err) {
        finding(index, `a well-behaved forwarder: ${(err as Error).message}`);
      }
      report.slowestMs = Math.max(report.slowestMs, performance.now() - t0);
      const health = await api(daemon.url, 'GET', '/healthz');
      if (health.status !== 200) finding(index, `/healthz answered ${health.status}: ${health.text.slice(0, 200)}`);
      if (health.text.length > 64 * 1024) finding(index, `/healthz is ${health.text.length} bytes`);
      const rss = await rssOf(daemon.url);
      report.peakRssMb = Math.max(report.peakRssMb, rss / MB);
      if (rss - baseline > maxRssGrowthMb * MB) finding(index, `daemon RSS grew ${((rss - baseline) / MB).toFixed(0)} MB (bound ${maxRssGrowthMb} MB)`);
      if (daemon.proc.exitCode !== null) throw new Error(`daemon exited ${daemon.proc.exitCode}`);
    };
    for (let index = 0; index < count; index++) {
      let bytes = gwmpDatagram(new Rng(seed + index), payloads);
      if (bytes.length > UDP_MAX) bytes = bytes.subarray(0, UDP_MAX);
      sock.send(bytes, daemon.gwmpPort, '127.0.0.1');
      report.inputs++;
      // Bursts of 100, then a turn of the loop: fast, but not simply overrunning the kernel's buffers.
      if (index % 100 === 99) await new Promise((r) => setTimeout(r, 1));
      if (index % 10_000 === 9_999) await check(index);
    }
    await new Promise((r) => setTimeout(r, 500));
    await check(count);
    report.refused = report.inputs - report.accepted;
    report.seconds = (performance.now() - began) / 1000;
    report.perSecond = report.inputs / report.seconds;
    const failures = daemon.logs.filter((line) => line.includes('gwmp datagram handling failed') || line.includes('"level":50') || line.includes('"level":60'));
    if (failures.length > 0) finding(count, `${failures.length} errors logged: ${failures[0]!.slice(0, 300)}`);
    const metrics = (await api(daemon.url, 'GET', '/metrics')).text;
    const known = /outpost_gwmp_gateways_known (\d+)/.exec(metrics)?.[1];
    log(
      `${TARGET}: ${report.inputs} datagrams in ${report.seconds.toFixed(1)} s (${report.perSecond.toFixed(0)}/s), ${report.accepted} acks, gateways kept ${known}, ` +
        `slowest probe ${report.slowestMs.toFixed(1)} ms, daemon RSS ${(baseline / MB).toFixed(0)} → peak ${report.peakRssMb.toFixed(0)} MB, ${report.findings.length} findings`,
    );
  } finally {
    probe.close();
    sock?.close();
    const code = await daemon.stop();
    if (code !== 0) finding(count, `daemon exited ${code} on SIGTERM`);
    if (report.findings.length === 0) removeDir(daemon.dataDir);
  }
  return report;
}
