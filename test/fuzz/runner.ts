// Runs the fuzz targets: in-process for volume (targets.ts), then a smaller pass over real sockets
// against the compiled daemon. Every input is built from its own seed (seed + index), so a
// finding is replayed with FUZZ_SEED, FUZZ_ONLY and FUZZ_START.
import { Encoder } from 'cbor-x';
import { api, provision, startDaemon } from '../helpers/daemon.js';
import { Rng, mutateBytes, mutateText, randomCborDeviceState, randomString, randomValue, toJsonText } from './generators.js';
import { FUZZ_ASSETS, createHarness } from './targets.js';

export interface FuzzOptions {
  /** Inputs per target. */
  count: number;
  seed: number;
  /** Run only targets whose name contains one of these. */
  only?: string[];
  /** First input index (to replay a finding). */
  start?: number;
  /** A batch of inputs slower than this is a finding (a hang). */
  hangMs?: number;
  /** Resident memory above this is a finding (unbounded growth). */
  maxRssMb?: number;
  log?: (line: string) => void;
}

export interface Finding {
  target: string;
  index: number;
  error: string;
}

export interface TargetReport {
  target: string;
  inputs: number;
  accepted: number;
  refused: number;
  seconds: number;
  perSecond: number;
  /** Slowest batch (in-process) or request (over sockets). */
  slowestMs: number;
  peakRssMb: number;
  findings: Finding[];
}

const MB = 1024 * 1024;

/** Percent-encoding of any string; one with a lone surrogate has no UTF-8 form, so its bytes are made up. */
function percentEncoded(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return '%ED%A0%80';
  }
}
const BATCH = 16;

export async function fuzzInProcess(options: FuzzOptions): Promise<TargetReport[]> {
  const { count, seed, start = 0, hangMs = 5000, maxRssMb = 1024, log = () => {} } = options;
  const harness = await createHarness();
  const reports: TargetReport[] = [];
  try {
    for (const target of harness.targets) {
      if (options.only && !options.only.some((s) => target.name.includes(s))) continue;
      const report: TargetReport = { target: target.name, inputs: 0, accepted: 0, refused: 0, seconds: 0, perSecond: 0, slowestMs: 0, peakRssMb: 0, findings: [] };
      const began = performance.now();
      // Inputs run in small concurrent batches, as a door sees them: states share group commits.
      for (let first = start; first < start + count; first += BATCH) {
        const t0 = performance.now();
        const indexes = Array.from({ length: Math.min(BATCH, start + count - first) }, (_, i) => first + i);
        await Promise.all(
          indexes.map(async (index) => {
            try {
              const outcome = await target.run(new Rng(seed + index));
              report[outcome]++;
            } catch (err) {
              const error = err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 500) : String(err);
              report.findings.push({ target: target.name, index, error });
              log(`FINDING ${target.name} #${index} (replay: FUZZ_SEED=${seed} FUZZ_ONLY=${target.name} FUZZ_START=${index} FUZZ_COUNT=1): ${error}`);
            }
          }),
        );
        const ms = performance.now() - t0;
        report.inputs += indexes.length;
        if (ms > report.slowestMs) report.slowestMs = ms;
        if (ms > hangMs) report.findings.push({ target: target.name, index: first, error: `a batch of ${indexes.length} took ${ms.toFixed(0)} ms (hang limit ${hangMs} ms)` });
        if ((first - start) % 512 === 0) {
          const rss = process.memoryUsage.rss() / MB;
          if (rss > report.peakRssMb) report.peakRssMb = rss;
          if (rss > maxRssMb) {
            report.findings.push({ target: target.name, index: first, error: `RSS ${rss.toFixed(0)} MB over ${maxRssMb} MB` });
            break;
          }
        }
      }
      report.seconds = (performance.now() - began) / 1000;
      report.perSecond = report.inputs / report.seconds;
      report.peakRssMb = Math.max(report.peakRssMb, process.memoryUsage.rss() / MB);
      reports.push(report);
      log(`${target.name}: ${report.inputs} inputs in ${report.seconds.toFixed(1)} s (${report.perSecond.toFixed(0)}/s), ${report.accepted} accepted, ${report.refused} refused, slowest ${report.slowestMs.toFixed(1)} ms, ${report.findings.length} findings`);
    }
  } finally {
    await harness.close();
  }
  return reports;
}

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });

/**
 * The same kinds of input over HTTP to the compiled daemon: every answer must be below 500, the
 * daemon must keep answering /healthz, log no request failure and exit 0 on SIGTERM.
 */
export async function fuzzOverSockets(options: FuzzOptions): Promise<TargetReport> {
  const { count, seed, log = () => {} } = options;
  const d = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
  const report: TargetReport = { target: 'http-socket', inputs: 0, accepted: 0, refused: 0, seconds: 0, perSecond: 0, slowestMs: 0, peakRssMb: 0, findings: [] };
  try {
    const { device, app } = provision(
      d.dataDir,
      FUZZ_ASSETS.map((a) => ({ name: a.name, is: 'sensor', profile: a.profile })),
    );
    const names = FUZZ_ASSETS.map((a) => a.name);
    const began = performance.now();
    for (let index = 0; index < count; index++) {
      const rng = new Rng(seed + index);
      let request: { method: string; path: string; token: string; body?: Uint8Array; contentType?: string };
      const devicePath = `/device/${device.id}`;
      switch (rng.int(8)) {
        case 0:
          request = { method: 'PUT', path: `${devicePath}/asset/${rng.pick(names)}/state`, token: device.token, body: Buffer.from(mutateText(rng, toJsonText({ value: randomValue(rng) }))), contentType: 'application/json' };
          break;
        case 1:
          request = { method: 'PUT', path: `${devicePath}/asset/${rng.pick(names)}/state`, token: device.token, body: mutateBytes(rng, new Uint8Array(cbor.encode({ value: randomValue(rng) }))), contentType: 'application/cbor' };
          break;
        case 2: {
          const message: Record<string, unknown> = {};
          for (let i = rng.int(4); i > 0; i--) message[rng.pick(names)] = { value: randomValue(rng) };
          request = { method: 'PUT', path: `${devicePath}/state`, token: device.token, body: Buffer.from(mutateText(rng, toJsonText(message))), contentType: 'application/json' };
          break;
        }
        case 3:
          request = { method: 'PUT', path: `${devicePath}/state`, token: device.token, body: randomCborDeviceState(rng, names), contentType: 'application/cbor' };
          break;
        case 4:
          request = { method: 'PUT', path: `${devicePath}/state`, token: device.token, body: Uint8Array.from({ length: rng.int(20) }, () => rng.int(256)), contentType: 'application/octet-stream' };
          break;
        case 5:
          request = {
            method: 'POST',
            path: `${devicePath}/assets`,
            token: device.token,
            body: Buffer.from(mutateText(rng, toJsonText({ name: rng.chance(0.5) ? randomString(rng, rng.int(10)) : `x${index}`, is: 'sensor', profile: { type: rng.pick(['number', 'string']), pattern: '^(a|aa)+$' } }))),
            contentType: 'application/json',
          };
          break;
        case 6:
          request = {
            method: 'PUT',
            path: `${devicePath}/codec`,
            token: app.token,
            body: Buffer.from(toJsonText({ uplink: { format: rng.pick(['abcl', 'js', 'cbor']), file: rng.pick(['/etc/passwd', '../x.json', 'counter.abcl.json', '/dev/zero']) } })),
            contentType: 'application/json',
          };
          break;
        default:
          request = { method: rng.pick(['GET', 'PUT', 'DELETE']), path: `${devicePath}/asset/${rng.pick(['%ED%A0%80', '%FF', '%', 'a%2Fb', percentEncoded(randomString(rng, 5))])}`, token: device.token };
      }
      const t0 = performance.now();
      try {
        const r = await api(d.url, request.method, request.path, { token: request.token, body: request.body ? new Uint8Array(request.body) : undefined, contentType: request.contentType });
        if (r.status >= 500) throw new Error(`${request.method} ${request.path} answered ${r.status}: ${r.text.slice(0, 300)}`);
        if (r.status < 300) report.accepted++;
        else report.refused++;
      } catch (err) {
        const error = (err as Error).message.slice(0, 500);
        report.findings.push({ target: report.target, index, error });
        log(`FINDING http-socket #${index} (seed ${seed}): ${error}`);
      }
      report.inputs++;
      report.slowestMs = Math.max(report.slowestMs, performance.now() - t0);
    }
    report.seconds = (performance.now() - began) / 1000;
    report.perSecond = report.inputs / report.seconds;
    const health = await api(d.url, 'GET', '/healthz');
    if (health.status !== 200) report.findings.push({ target: report.target, index: count, error: `/healthz answered ${health.status}` });
    const metrics = await api(d.url, 'GET', '/metrics');
    const rss = /process_resident_memory_bytes (\d+)/.exec(metrics.text);
    if (rss) report.peakRssMb = Number(rss[1]) / MB;
    const failures = d.logs.filter((line) => line.includes('"request failed"'));
    if (failures.length > 0) report.findings.push({ target: report.target, index: count, error: `${failures.length} request failures logged: ${failures[0]!.slice(0, 300)}` });
    log(`http-socket: ${report.inputs} requests in ${report.seconds.toFixed(1)} s (${report.perSecond.toFixed(0)}/s), ${report.accepted} accepted, ${report.refused} refused, slowest ${report.slowestMs.toFixed(1)} ms, daemon RSS ${report.peakRssMb.toFixed(0)} MB, ${report.findings.length} findings`);
  } finally {
    const code = await d.stop();
    if (code !== 0) report.findings.push({ target: report.target, index: count, error: `daemon exited ${code} on SIGTERM` });
  }
  return report;
}
