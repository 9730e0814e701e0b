import { loadConfig } from '../../core/config.js';
import { askDaemon } from '../../ops/control.js';
import type { DaemonStatus } from '../../ops/status.js';
import { opsArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { showFor } from '../output.js';
import { formatTable } from '../table.js';

/** `outpost status`: asks the running daemon over its control socket (docs/operations.md). */
export const command: CliCommand = {
  usage: '  status [--json]                                   ask the running daemon (version, uptime, counts, radio, upstream)',
  async run(args, _argv, write) {
    const { sources, json, fail } = opsArgs('status', args);
    const config = loadConfig(sources);
    let status: DaemonStatus | undefined;
    try {
      status = await askDaemon<DaemonStatus>(config.dataDir, '/status');
    } catch (err) {
      return fail(`cannot ask the daemon of ${config.dataDir}: ${(err as Error).message} (run as the outpost user or root)`);
    }
    if (!status) return fail(`no daemon runs on ${config.dataDir}`);
    showFor(json, write)(status, () => formatStatus(status));
    return 0;
  },
};

/** Two columns, name and value, without a header row; radio and upstream take several lines. */
export function formatStatus(status: DaemonStatus): string {
  const rows: Array<[string, string]> = [
    ['version', status.version],
    ['pid', String(status.pid)],
    ['uptime', `${status.uptimeSeconds} s`],
    ['data dir', status.dataDir],
    ['ports', Object.entries(status.ports).map(([k, v]) => `${k} ${v}`).join(', ')],
    ['devices', String(status.devices)],
    ['states', `${status.states.stored} stored, ${status.states.acceptedSinceStart} accepted and ${status.states.refusedSinceStart} refused since start`],
    ['last uplink', status.lastUplinkAt ?? 'none yet'],
  ];
  const multiLine = (name: string, lines: string[]) => lines.forEach((line, i) => rows.push([i === 0 ? name : '', line]));
  multiLine('radio', status.radio === null || status.radio === undefined ? ['not configured'] : radioLines(status.radio));
  multiLine('upstream', status.upstream === null || status.upstream === undefined ? ['not configured'] : readableLines(status.upstream));
  return formatTable(['', ''], rows).split('\n').slice(1).join('\n');
}

type Plain = Record<string, unknown>;
const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/** The radio section: the LoRaWAN device count, then one block per radio source (packet forwarder door, serial modem). */
function radioLines(radio: unknown): string[] {
  if (!isPlain(radio)) return readableLines(radio);
  const { devices, sources, ...rest } = radio;
  const lines: string[] = [];
  if (typeof devices === 'number') lines.push(`${devices} LoRaWAN device${devices === 1 ? '' : 's'}`);
  for (const source of Array.isArray(sources) ? sources : []) {
    if (!isPlain(source)) continue;
    const { source: name, up, framesReceived, framesSent, errors, detail, ...other } = source;
    lines.push(`${String(name)}: ${up ? 'up' : 'DOWN'}, ${String(framesReceived)} frames received, ${String(framesSent)} sent, ${String(errors)} errors`);
    lines.push(...readableLines({ ...other, ...(isPlain(detail) ? detail : {}) }, '  '));
  }
  if (Object.keys(rest).length > 0) lines.push(...readableLines(rest));
  return lines;
}

/**
 * Any JSON value as lines a person reads: an object's plain members as `name value` pairs on one
 * line, each nested object under its name, indented; a list of objects one line each. The radio
 * sources report what they know in their own shape, so nothing here depends on a fixed layout.
 */
export function readableLines(value: unknown, indent = ''): string[] {
  if (isScalar(value)) return [`${indent}${String(value)}`];
  if (Array.isArray(value)) {
    if (value.every(isScalar)) return [`${indent}${value.length === 0 ? 'none' : value.map(String).join(', ')}`];
    return value.flatMap((item) => readableLines(item, indent));
  }
  if (!isPlain(value)) return [`${indent}${String(value)}`];
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  const pairs = entries.filter(([, v]) => isScalar(v) || (Array.isArray(v) && v.every(isScalar))).map(([k, v]) => `${k} ${Array.isArray(v) ? (v.length ? v.join(', ') : 'none') : String(v)}`);
  const lines = pairs.length > 0 ? [`${indent}${pairs.join(', ')}`] : [];
  for (const [k, v] of entries) {
    if (isScalar(v) || (Array.isArray(v) && v.every(isScalar))) continue;
    const nested = readableLines(v, `${indent}  `);
    if (nested.length === 0) continue;
    lines.push(`${indent}${k}:`, ...nested);
  }
  return lines;
}
