// `outpost device codec <id> …`: set a device's codecs, or with --try compare a candidate on its
// kept raw uplinks without changing anything (docs/codecs.md, "Changing a codec").
import { readFileSync, statSync } from 'node:fs';
import type { OutpostConfig } from '../../core/config.js';
import { systemClock } from '../../core/time.js';
import { SHIPPED_ABCL_DIR, setDeviceCodec } from '../../device-codecs/device-codecs.js';
import { readCodecFile } from '../../device-codecs/codec-files.js';
import { isServiceError, ServiceError } from '../../core/errors.js';
import { parseTryBody, tryCodec, type TryReport, type TryRequest } from '../../device-codecs/codec-try.js';
import { requireArg, UsageError, type ManagementArgs } from '../args.js';
import { openCodecParts, withCatalogWrites } from '../open.js';
import type { Output } from '../output.js';
import { formatTable } from '../table.js';

export const DEVICE_CODEC_USAGE = [
  '  device codec <DeviceID> --uplink FORMAT [--file F] [--downlink FORMAT [--downlink-file F] [--port N]]',
  "                                                    set the device's codecs (auto|json|cbor|abcl|js)",
  '  device codec <DeviceID> --uplink FORMAT [--file F] --try [--limit N] [--from T] [--to T] [--json]',
  "                                                    try a codec on the device's kept raw uplinks; changes nothing",
].join('\n');

/**
 * One side of the settings. `--file` is looked up where `PUT /device/<id>/codec` looks up `file`
 * (the data dir, then the shipped `abcl/`; docs/api.md, "Codec files"), and a file found there is
 * stored as the same `file` reference, read again at every start. A file found only as a path from
 * the current directory (the admin's own copy) is read here and stored as its text.
 */
function codecSide(format: string, file: string | undefined, dataDir: string, option: string): Record<string, unknown> {
  if (!file) return { format };
  let refusal: ServiceError;
  try {
    readCodecFile(file, { dataDir, shippedDir: SHIPPED_ABCL_DIR }, option);
    return { format, file };
  } catch (err) {
    if (!isServiceError(err)) throw err;
    refusal = err;
  }
  let text: string;
  try {
    if (!statSync(file).isFile()) throw new Error('not a regular file');
    text = readFileSync(file, 'utf8');
  } catch {
    // One line naming the option, the file and every place looked in; no usage text.
    throw new ServiceError('CODEC_INVALID', `${option} ${JSON.stringify(file)}: not found in the data directory ${dataDir}, the shipped abcl/ directory, or as a path from the current directory (${refusal.message.replace(/^.*?: /, '')})`);
  }
  return format === 'js' ? { format, script: text } : { format, document: text };
}

export async function deviceCodec({ config, positionals, values, json, show, out }: ManagementArgs): Promise<number> {
  const deviceId = requireArg(positionals, 1, '<DeviceID>');
  if (!values.uplink) throw new UsageError('missing --uplink FORMAT');
  // The same body PUT /device/<id>/codec takes.
  const body: Record<string, unknown> = { uplink: codecSide(values.uplink, values.file, config.dataDir, '--file') };
  if (values.downlink) {
    const downlink = codecSide(values.downlink, values['downlink-file'], config.dataDir, '--downlink-file');
    if (values.port !== undefined) downlink.port = Number(values.port);
    body.downlink = downlink;
  }
  if (values.try) {
    const limit = values.limit === undefined ? undefined : Number(values.limit);
    const request = parseTryBody({ ...body, limit, from: values.from, to: values.to });
    return runCodecTry(config, deviceId, request, json, out);
  }
  const parts = openCodecParts(config);
  try {
    const device = parts.registry.requireDevice(deviceId);
    // A central on PostgreSQL: committed there first, like the nodes' writes (docs/scale-out.md).
    const result =
      config.role === 'central' && config.central.postgres
        ? await withCatalogWrites(config, (registry) => registry.setDeviceCodec(parts.codecs, device, body))
        : // Still through withCatalogWrites: it refuses a node's cache opened without central.postgres.
          await withCatalogWrites(config, () => setDeviceCodec(parts.store, parts.codecs, systemClock, device, body));
    show(result, () => [`device ${deviceId}: uplink ${JSON.stringify((result.uplink as { format: string }).format)}, downlink ${JSON.stringify((result.downlink as { format: string }).format)}`, ...result.warnings.map((w) => `warning: ${w}`)].join('\n'));
    return 0;
  } finally {
    parts.close();
  }
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

async function runCodecTry(config: OutpostConfig, deviceId: string, request: TryRequest, json: boolean, out: Output): Promise<number> {
  const parts = openCodecParts(config);
  try {
    const device = parts.registry.requireDevice(deviceId);
    // The device's current codec, compiled here the way the daemon compiled it.
    await parts.codecs.syncFromStore(parts.store);
    const report = await tryCodec(parts.catalog, parts.store.redecodeJobs, parts.codecs, device, request);
    out(json ? JSON.stringify(report, null, 2) : formatTryReport(report));
    return 0;
  } finally {
    parts.close();
  }
}
