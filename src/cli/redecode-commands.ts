// `outpost device codec <id> … --try` and `outpost device redecode <id>`: the CLI side of trying a
// codec on kept raw uplinks and re-decoding history (docs/codecs.md, "Changing a codec").
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutpostConfig } from '../core/config.js';
import { ServiceError } from '../core/errors.js';
import { parseTimestamp, systemClock } from '../core/time.js';
import { createLogger } from '../ops/logger.js';
import { Store } from '../store/store.js';
import { Catalog } from '../store/catalog.js';
import { Registry } from '../registry/registry.js';
import { DeviceCodecs } from '../device-codecs/device-codecs.js';
import { tryCodec, type TryReport, type TryRequest } from '../device-codecs/codec-try.js';
import { RedecodeRunner, redecodeView } from '../device-codecs/redecode.js';
import type { RedecodeJob } from '../store/redecode-jobs.js';
import { formatTable } from './table.js';

type Output = (text: string) => void;

function openParts(config: OutpostConfig) {
  const store = Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes });
  const catalog = new Catalog(store);
  const logger = createLogger('silent');
  const codecs = new DeviceCodecs(config, logger);
  return {
    store,
    catalog,
    codecs,
    logger,
    registry: new Registry(catalog, systemClock, config.limits),
    close() {
      codecs.dispose();
      store.close();
    },
  };
}

/** `--from`/`--to` options: ISO 8601 with a zone. */
export function timeOption(raw: string | undefined, option: string): number | null {
  if (raw === undefined) return null;
  const ms = parseTimestamp(raw);
  if (ms === undefined) throw new ServiceError('INVALID_QUERY', `${option} must be an ISO 8601 timestamp with a zone, e.g. 2026-01-31T00:00:00Z`);
  return ms;
}

const shown = (value: unknown) => (value === undefined ? '' : JSON.stringify(value));

/** The summary, then the first differences, one row per asset that differs. */
export function formatTryReport(report: TryReport, rows = 20): string {
  const { same, changed, errors } = report.summary;
  const lines = [`${same + changed + errors} uplinks tried (current codec ${report.current}, candidate ${report.candidate}): ${same} same, ${changed} changed, ${errors} errors`];
  for (const w of report.warnings) lines.push(`warning: ${w}`);
  const table: Array<Array<string | number>> = [];
  for (const u of report.uplinks) {
    const d = u.diff;
    for (const c of d.changed) table.push([u.id, u.at, c.asset, 'changed', shown(c.current.value), shown(c.candidate.value)]);
    for (const name of d.added) table.push([u.id, u.at, name, 'added', '', shown(u.candidate.states[name]?.value)]);
    for (const name of d.removed) table.push([u.id, u.at, name, 'removed', shown(u.current.states[name]?.value), '']);
    for (const r of d.refused) table.push([u.id, u.at, r.asset, `refused ${r.code}`, '', r.error]);
    for (const e of d.errors) table.push([u.id, u.at, '', 'error', '', e]);
  }
  if (table.length > 0) {
    lines.push('', formatTable(['UPLINK', 'AT', 'ASSET', 'DIFFERENCE', 'CURRENT', 'CANDIDATE'], table.slice(0, rows)));
    if (table.length > rows) lines.push(`… ${table.length - rows} more differences (--json shows all)`);
  }
  return lines.join('\n');
}

export async function runCodecTry(config: OutpostConfig, deviceId: string, request: TryRequest, json: boolean, out: Output): Promise<number> {
  const parts = openParts(config);
  try {
    const device = parts.registry.requireDevice(deviceId);
    // The device's current codec, compiled here the way the daemon compiled it.
    await parts.codecs.syncFromStore(parts.store);
    const report = await tryCodec(parts.catalog, parts.codecs, device, request);
    out(json ? JSON.stringify(report, null, 2) : formatTryReport(report));
    return 0;
  } finally {
    parts.close();
  }
}

/** `[#########...........]  45%  45 000/100 000 uplinks, 45 000 states replaced, 0 failed` */
export function progressLine(job: Pick<RedecodeJob, 'done' | 'total' | 'replaced' | 'failed'>, width = 30): string {
  const ratio = job.total === 0 ? 1 : Math.min(1, job.done / job.total);
  const filled = Math.round(ratio * width);
  const n = (v: number) => v.toLocaleString('en-US').replaceAll(',', ' ');
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(Math.floor(ratio * 100)).padStart(3)}%  ${n(job.done)}/${n(job.total)} uplinks, ${n(job.replaced)} states replaced, ${n(job.failed)} failed`;
}

export interface RedecodeCliOptions {
  from: number | null;
  to: number | null;
  json: boolean;
  /** How long a running daemon has to take the job before this process runs it itself. */
  handOverMs?: number;
}

/**
 * Queues the job for a running daemon (it claims it within a second and announces the corrected
 * latest states on its feed); with no daemon to take it, runs it in this process. Either way it
 * follows the job's committed progress with a progress bar.
 */
export async function runRedecode(config: OutpostConfig, deviceId: string, options: RedecodeCliOptions, out: Output, progressOut: (text: string) => void): Promise<number> {
  const parts = openParts(config);
  const runner = new RedecodeRunner({ store: parts.store, catalog: parts.catalog, codecs: parts.codecs, clock: systemClock, logger: parts.logger });
  try {
    const device = parts.registry.requireDevice(deviceId);
    runner.enqueue(device, { from: options.from, to: options.to });
    const tty = process.stderr.isTTY === true;
    const handOverBy = Date.now() + (options.handOverMs ?? 5000);
    let ranHere = false;
    let lastLine = '';
    let lastPrinted = 0;
    for (;;) {
      const job = runner.jobs.get(deviceId);
      if (!job) throw new ServiceError('NOT_FOUND', `the re-decode job of device ${deviceId} disappeared (was the device deleted?)`);
      if (job.status === 'queued' && !ranHere && Date.now() > handOverBy) {
        await parts.codecs.syncFromStore(parts.store);
        if (runner.claimAndRun(deviceId)) {
          ranHere = true;
          if (!options.json) progressOut('no running daemon took the job; re-decoding in this process\n');
        }
      }
      if (!options.json && job.status !== 'queued') {
        const line = progressLine(job);
        if (tty) progressOut(`\r${line}`);
        else if (line !== lastLine && (Date.now() - lastPrinted > 1000 || job.status !== 'running')) {
          progressOut(`${line}\n`);
          lastPrinted = Date.now();
        }
        lastLine = line;
      }
      if (job.status === 'done' || job.status === 'failed') {
        if (tty && !options.json) progressOut('\n');
        const view = redecodeView(job);
        if (options.json) out(JSON.stringify(view, null, 2));
        else {
          out(`re-decode ${job.status}: ${job.done} of ${job.total} uplinks, ${job.replaced} states replaced, ${job.failed} failed (codec ${job.codec})`);
          for (const p of view.problems) out(`  uplink ${p.uplink} at ${p.at}: ${p.error}`);
          if (view.notCovered) out(`not covered: ${view.notCovered.states} states from ${view.notCovered.from} to ${view.notCovered.to} (${view.notCovered.reason})`);
          if (view.error) out(`error: ${view.error}`);
        }
        return job.status === 'done' ? 0 : 1;
      }
      await sleep(200);
    }
  } finally {
    await runner.stop();
    parts.close();
  }
}
