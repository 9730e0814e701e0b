// The Basics Station door fuzzed over real WebSockets against the compiled daemon: ten registered
// stations send generated and mutated LNS messages (and reconnect now and then). A finding is: the
// daemon exits or logs an error, a well-behaved station's timesync goes unanswered for 2 s,
// /healthz answers other than 200 or grows past 64 KiB, or the daemon's memory grows past a bound.
import { api, cliJson, removeDir, startDaemon } from '../helpers/daemon.js';
import { StationSimulator } from '../lpwan/station.js';
import { Rng } from './generators.js';
import { stationMessageText } from './bs-inputs.js';
import type { Finding, TargetReport } from './runner.js';

const TARGET = 'bs-socket';
const MB = 1024 * 1024;
const STATIONS = 10;

export async function fuzzStationMessages(options: { count: number; seed: number; maxRssGrowthMb?: number; log?: (line: string) => void }): Promise<TargetReport> {
  const { count, seed, maxRssGrowthMb = 100, log = () => {} } = options;
  const report: TargetReport = { target: TARGET, inputs: 0, accepted: 0, refused: 0, seconds: 0, perSecond: 0, slowestMs: 0, peakRssMb: 0, findings: [] };
  const finding = (index: number, error: string) => {
    report.findings.push({ target: TARGET, index, error } satisfies Finding);
    log(`FINDING ${TARGET} #${index} (seed ${seed}): ${error}`);
  };
  const daemon = await startDaemon();
  const open: StationSimulator[] = [];
  try {
    const url = (eui: string) => `ws://127.0.0.1:${daemon.basicStationPort}/router-${eui}`;
    const tokens = Array.from({ length: STATIONS + 1 }, (_, i) => {
      const eui = `B827EBFFFE00${i.toString(16).padStart(4, '0').toUpperCase()}`;
      return { eui, token: cliJson<{ token: string }>(['station', 'create', '--eui', eui], daemon.dataDir).token };
    });
    const connect = async (i: number) => StationSimulator.open(url(tokens[i]!.eui), { headers: { authorization: `Bearer ${tokens[i]!.token}` } });
    const probe = await connect(STATIONS);
    open.push(probe);
    const stations = await Promise.all(Array.from({ length: STATIONS }, (_, i) => connect(i)));
    open.push(...stations);
    const rssOf = async () => Number(/process_resident_memory_bytes (\d+)/.exec((await api(daemon.url, 'GET', '/metrics')).text)?.[1] ?? 0);
    const baseline = await rssOf();
    report.peakRssMb = baseline / MB;
    const check = async (index: number) => {
      const t0 = performance.now();
      const txtime = index + 0.5;
      probe.send({ msgtype: 'timesync', txtime });
      try {
        await probe.waitFor((m) => m.msgtype === 'timesync' && m.txtime === txtime, 2000);
      } catch {
        finding(index, 'a well-behaved station got no timesync answer within 2 s');
      }
      report.slowestMs = Math.max(report.slowestMs, performance.now() - t0);
      const health = await api(daemon.url, 'GET', '/healthz');
      if (health.status !== 200) finding(index, `/healthz answered ${health.status}`);
      if (health.text.length > 64 * 1024) finding(index, `/healthz is ${health.text.length} bytes`);
      const rss = await rssOf();
      report.peakRssMb = Math.max(report.peakRssMb, rss / MB);
      if (rss - baseline > maxRssGrowthMb * MB) finding(index, `daemon RSS grew ${((rss - baseline) / MB).toFixed(0)} MB`);
      if (daemon.proc.exitCode !== null) throw new Error(`daemon exited ${daemon.proc.exitCode}`);
    };
    const began = performance.now();
    for (let index = 0; index < count; index++) {
      const i = index % STATIONS;
      const rng = new Rng(seed + index);
      // Now and then a station drops its socket and comes back (a reconnect loop, spread over all).
      if (rng.chance(0.001)) {
        stations[i]!.close();
        stations[i] = await connect(i);
        open.push(stations[i]!);
      }
      if (stations[i]!.ws.readyState === stations[i]!.ws.OPEN) stations[i]!.send(stationMessageText(rng));
      // Closed by the door (an oversized message closes its socket): the station comes back.
      if (stations[i]!.ws.readyState > stations[i]!.ws.OPEN) {
        stations[i] = await connect(i);
        open.push(stations[i]!);
      }
      report.inputs++;
      // About the stations' combined message budget (200/s each), so most inputs are parsed.
      if (index % 100 === 99) await new Promise((r) => setTimeout(r, 50));
      if (index % 5000 === 4999) await check(index);
    }
    await check(count);
    report.seconds = (performance.now() - began) / 1000;
    report.perSecond = report.inputs / report.seconds;
    const metrics = (await api(daemon.url, 'GET', '/metrics')).text;
    report.accepted = [...metrics.matchAll(/outpost_bs_messages_total\{type="(version|updf|jreq|propdf|dntxed|timesync)"\} (\d+)/g)].reduce((n, m) => n + Number(m[2]), 0);
    report.refused = Math.max(0, report.inputs - report.accepted);
    const errors = daemon.logs.filter((line) => line.includes('"level":50') || line.includes('"level":60'));
    if (errors.length > 0) finding(count, `${errors.length} errors logged: ${errors[0]!.slice(0, 300)}`);
    log(`${TARGET}: ${report.inputs} messages in ${report.seconds.toFixed(1)} s (${report.perSecond.toFixed(0)}/s), ${report.accepted} read as valid, slowest probe ${report.slowestMs.toFixed(1)} ms, daemon RSS ${(baseline / MB).toFixed(0)} → peak ${report.peakRssMb.toFixed(0)} MB, ${report.findings.length} findings`);
  } finally {
    for (const s of open) s.close();
    const code = await daemon.stop();
    if (code !== 0) finding(count, `daemon exited ${code} on SIGTERM`);
    if (report.findings.length === 0) removeDir(daemon.dataDir);
  }
  return report;
}
