// `outpost device redecode <id>`: re-decode a device's kept raw uplinks with its current codec,
// following the job with a progress bar (docs/codecs.md, "Changing a codec").
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutpostConfig } from '../../core/config.js';
import { ServiceError } from '../../core/errors.js';
import { parseTimestamp, systemClock } from '../../core/time.js';
import { RedecodeRunner, redecodeUnavailable, redecodeView } from '../../device-codecs/redecode.js';
import type { RedecodeJob } from '../../store/redecode-jobs.js';
import { requireArg, UsageError, type ManagementArgs } from '../args.js';
import { openCodecParts } from '../open.js';
import type { Output } from '../output.js';

export const DEVICE_REDECODE_USAGE = [
  '  device redecode <DeviceID> [--from T] [--to T] [--json]',
  '                                                    re-decode kept raw uplinks with the current codec, with a progress bar',
].join('\n');

export function deviceRedecode({ config, positionals, values, json, out }: ManagementArgs): Promise<number> {
  const deviceId = requireArg(positionals, 1, '<DeviceID>');
  const from = timeOption(values.from, '--from');
  const to = timeOption(values.to, '--to');
  if (from !== null && to !== null && from > to) throw new UsageError('--from must not be later than --to');
  return runRedecode(config, deviceId, { from, to, json }, out, (text) => process.stderr.write(text));
}

/** `--from`/`--to` options: ISO 8601 with a zone. */
export function timeOption(raw: string | undefined, option: string): number | null {
  if (raw === undefined) return null;
  const ms = parseTimestamp(raw);
  if (ms === undefined) throw new ServiceError('INVALID_QUERY', `${option} must be an ISO 8601 timestamp with a zone, e.g. 2026-01-31T00:00:00Z`);
  return ms;
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

/** The finished job: JSON, or a summary line with each problem. */
function printOutcome(job: RedecodeJob, json: boolean, out: Output): void {
  const view = redecodeView(job);
  if (json) {
    out(JSON.stringify(view, null, 2));
    return;
  }
  out(`re-decode ${job.status}: ${job.done} of ${job.total} uplinks, ${job.replaced} states replaced, ${job.failed} failed (codec ${job.codec})`);
  for (const p of view.problems) out(`  uplink ${p.uplink} at ${p.at}: ${p.error}`);
  if (view.notCovered) out(`not covered: ${view.notCovered.states} states from ${view.notCovered.from} to ${view.notCovered.to} (${view.notCovered.reason})`);
  if (view.error) out(`error: ${view.error}`);
}

/**
 * Queues the job for a running daemon (it claims it within a second and announces the corrected
 * latest states on its feed); with no daemon to take it, runs it in this process. Either way it
 * follows the job's committed progress with a progress bar.
 */
export async function runRedecode(config: OutpostConfig, deviceId: string, options: RedecodeCliOptions, out: Output, progressOut: (text: string) => void): Promise<number> {
  const parts = openCodecParts(config);
  const runner = new RedecodeRunner({ unavailable: redecodeUnavailable(config), store: parts.store, catalog: parts.catalog, codecs: parts.codecs, clock: systemClock, logger: parts.logger });
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
        printOutcome(job, options.json, out);
        return job.status === 'done' ? 0 : 1;
      }
      await sleep(200);
    }
  } finally {
    await runner.stop();
    parts.close();
  }
}
