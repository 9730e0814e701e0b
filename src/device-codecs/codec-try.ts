import { setImmediate as nextTurn } from 'node:timers/promises';
import { ServiceError } from '../core/errors.js';
import type { Catalog } from '../store/catalog.js';
import type { DeviceRecord } from '../core/model.js';
import type { KeptRawUplink, RedecodeJobs } from '../store/redecode-jobs.js';
import { parseCodecSettings, type DeviceCodecs, type StoredCodecSettings } from '../device-codecs/device-codecs.js';
import { currentUplinkDecoder, type UplinkDecoder } from '../ingest/decoders.js';
import { evaluateUplink, parseRange, type UplinkEvaluation } from '../device-codecs/redecode.js';
import type { AssetRefusal } from '../ingest/ingest.js';
import { isJsonObject, type JsonValue, memberIgnoringCase } from '../core/json.js';

export const TRY_DEFAULT_LIMIT = 100;
export const TRY_MAX_LIMIT = 1000;

export interface TryRequest {
  settings: StoredCodecSettings;
  limit: number;
  from: number | null;
  to: number | null;
}

/**
 * The candidate: the same body as PUT /device/<id>/codec (`{"uplink": …}`), or just the uplink side
 * (`{"format", "document" | "script" | "file"}`, the format guessed from `script`/`document` when
 * absent), plus `limit`, `from`, `to`.
 */
export function parseTryBody(body: unknown): TryRequest {
  if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', 'a codec try body must be a JSON object: the codec settings (as for PUT /device/<id>/codec) and "limit", "from", "to"');
  let settings: StoredCodecSettings;
  if (memberIgnoringCase(body, 'uplink') !== undefined) settings = parseCodecSettings(body);
  else {
    const script = memberIgnoringCase(body, 'script');
    const document = memberIgnoringCase(body, 'document');
    const file = memberIgnoringCase(body, 'file');
    if (script === undefined && document === undefined && file === undefined) {
      throw new ServiceError('INVALID_BODY', 'the candidate codec is missing: give "uplink" (as for PUT /device/<id>/codec), or "script", "document" or "file"');
    }
    const format = memberIgnoringCase(body, 'format') ?? (script !== undefined ? 'js' : 'abcl');
    settings = parseCodecSettings({ uplink: { format, script, document, file } });
  }
  const rawLimit = memberIgnoringCase(body, 'limit');
  let limit = TRY_DEFAULT_LIMIT;
  if (rawLimit !== undefined && rawLimit !== null) {
    if (typeof rawLimit !== 'number' || !Number.isInteger(rawLimit) || rawLimit < 1 || rawLimit > TRY_MAX_LIMIT) {
      throw new ServiceError('INVALID_BODY', `"limit" must be an integer from 1 to ${TRY_MAX_LIMIT}`);
    }
    limit = rawLimit;
  }
  return { settings, limit, ...parseRange(body) };
}

type StatesView = Record<string, { value: JsonValue; at: string | null }>;

export interface CodecResultView {
  states: StatesView;
  warnings: string[];
  errors: string[];
  refused: AssetRefusal[];
}

export interface UplinkDiff {
  added: string[];
  removed: string[];
  changed: Array<{ asset: string; current: { value: JsonValue; at: string | null }; candidate: { value: JsonValue; at: string | null } }>;
  /** Errors the candidate has that the current codec does not. */
  errors: string[];
  /** Profile (or unknown asset) refusals the candidate would cause that the current codec does not. */
  refused: AssetRefusal[];
}

export interface TriedUplink {
  id: number;
  at: string;
  port?: number;
  payload: string;
  current: CodecResultView;
  candidate: CodecResultView;
  diff: UplinkDiff;
}

export interface TryReport {
  /** Uplinks tried: `same` + `changed` + `errors` (the candidate could not decode it at all). */
  summary: { same: number; changed: number; errors: number };
  current: string;
  candidate: string;
  warnings: string[];
  uplinks: TriedUplink[];
  /** Uplinks tried (and counted in `summary`) but left out of `uplinks`: the list reached `http.pageBytes`. */
  omitted?: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

function view(e: UplinkEvaluation): CodecResultView {
  const states: StatesView = {};
  for (const [name, s] of Object.entries(e.decoded)) states[name] = { value: s.value, at: s.at === null ? null : iso(s.at) };
  return { states, warnings: e.warnings, errors: e.errors, refused: e.refused };
}

function diffOf(current: CodecResultView, candidate: CodecResultView): UplinkDiff {
  const diff: UplinkDiff = { added: [], removed: [], changed: [], errors: [], refused: [] };
  for (const [name, c] of Object.entries(candidate.states)) {
    const was = current.states[name];
    if (!was) diff.added.push(name);
    else if (JSON.stringify(was.value) !== JSON.stringify(c.value) || was.at !== c.at) diff.changed.push({ asset: name, current: was, candidate: c });
  }
  for (const name of Object.keys(current.states)) if (!(name in candidate.states)) diff.removed.push(name);
  const knownErrors = new Set(current.errors);
  diff.errors = candidate.errors.filter((e) => !knownErrors.has(e));
  const knownRefusals = new Set(current.refused.map((r) => `${r.asset}\u0000${r.error}`));
  diff.refused = candidate.refused.filter((r) => !knownRefusals.has(`${r.asset}\u0000${r.error}`));
  return diff;
}

const isEmpty = (d: UplinkDiff) => d.added.length + d.removed.length + d.changed.length + d.errors.length + d.refused.length === 0;

/** How a try shares the daemon: slices of work between turns of the event loop, and an answer of bounded size. */
export interface TryPacing {
  /** Longest a slice runs before it lets other work in (ms); a slice ends only between two codec calls. */
  sliceMillis?: number;
  /** Raw uplinks read from the store at a time. */
  batchSize?: number;
  /** Most bytes the `uplinks` list may take; uplinks tried beyond it are in `summary` and counted in `omitted`. */
  maxBytes?: number;
  /** The caller went away (the HTTP client closed the connection): stop at the next slice. */
  cancelled?: () => boolean;
}

/** The uplinks one comparison runs on, newest first, a batch at a time (a cursor on `seq`). */
export type UplinkBatches = (beforeSeq: number, size: number) => readonly KeptRawUplink[];

const DEFAULT_SLICE_MS = 50;
const DEFAULT_BATCH = 50;

/**
 * Runs both codecs on the uplinks and compares; stores nothing. A JS codec call may take up to
 * `codec.js.timeoutMs` (100 ms) and a try up to 1 000 uplinks, two calls each: run in one go that
 * is minutes with the event loop blocked. So the work goes in slices of about `sliceMillis`, each
 * followed by a turn of the event loop (as a re-decode does, see redecode.ts), and the current
 * codec is looked up again after each pause: if it changed meanwhile, the try stops (409).
 */
export async function compareCodecs(
  catalog: Catalog,
  deviceId: string,
  current: () => UplinkDecoder,
  candidate: UplinkDecoder,
  uplinks: UplinkBatches,
  limit: number,
  pacing: TryPacing = {},
): Promise<Omit<TryReport, 'warnings'>> {
  const sliceMillis = pacing.sliceMillis ?? DEFAULT_SLICE_MS;
  const batchSize = pacing.batchSize ?? DEFAULT_BATCH;
  const maxBytes = pacing.maxBytes ?? Infinity;
  const summary = { same: 0, changed: 0, errors: 0 };
  const tried: TriedUplink[] = [];
  let listedBytes = 0;
  let omitted = 0;
  const first = current();
  let sliceStart = performance.now();
  /** Lets other work in once the slice is spent; throws when the try must stop. */
  const pause = async (): Promise<void> => {
    if (performance.now() - sliceStart < sliceMillis) return;
    await nextTurn();
    sliceStart = performance.now();
    if (pacing.cancelled?.()) throw new TryCancelled();
    if (current().version !== first.version) {
      throw new ServiceError('CODEC_CHANGED', `the device's codec changed from ${first.version} to ${current().version} during the try; try again`);
    }
  };
  let beforeSeq = Number.MAX_SAFE_INTEGER;
  let done = 0;
  while (done < limit) {
    const batch = uplinks(beforeSeq, Math.min(batchSize, limit - done));
    if (batch.length === 0) break;
    for (const uplink of batch) {
      await pause();
      const now = view(evaluateUplink(catalog, deviceId, current(), uplink));
      await pause();
      const next = view(evaluateUplink(catalog, deviceId, candidate, uplink));
      const diff = diffOf(now, next);
      if (next.errors.length > 0) summary.errors++;
      else if (isEmpty(diff)) summary.same++;
      else summary.changed++;
      const entry: TriedUplink = {
        id: uplink.seq,
        at: iso(uplink.at),
        ...(uplink.port === null ? {} : { port: uplink.port }),
        payload: uplink.payload.toString('hex').toUpperCase(),
        current: now,
        candidate: next,
        diff,
      };
      // The list stops growing at the budget (docs/api.md, "Pages"); every uplink still counts in the summary.
      const size = omitted === 0 ? Buffer.byteLength(JSON.stringify(entry)) : 0;
      if (omitted === 0 && (tried.length === 0 || listedBytes + size <= maxBytes)) {
        tried.push(entry);
        listedBytes += size;
      } else omitted++;
      beforeSeq = uplink.seq;
      done++;
    }
  }
  return { summary, current: first.version, candidate: candidate.version, uplinks: tried, ...(omitted > 0 ? { omitted } : {}) };
}

/** The client of a try went away: nothing to answer. */
export class TryCancelled extends Error {
  override name = 'TryCancelled';
}

/**
 * Try a candidate codec on a device's kept raw uplinks (newest first) next to its current one:
 * compiled with the same sandbox limits as a live codec, so a script that loops or eats memory is
 * stopped and reported per uplink. Nothing is stored, and the candidate is disposed afterwards.
 * It runs in slices (see compareCodecs), so the daemon keeps serving while a slow codec is tried.
 */
export async function tryCodec(catalog: Catalog, jobs: RedecodeJobs, codecs: DeviceCodecs, device: DeviceRecord, request: TryRequest, pacing: TryPacing = {}): Promise<TryReport> {
  const { codec, warnings, version } = await codecs.compile(request.settings);
  try {
    const candidate: UplinkDecoder = {
      version,
      decode: (payload, context) => codec.decodeUplink(payload, { fPort: context.fPort, receivedAt: new Date(context.receivedAt) }),
    };
    // Looked up at every use: a codec replaced meanwhile is disposed, and compareCodecs notices the change.
    const current = () => currentUplinkDecoder(codecs, catalog.device(device.id) ?? device);
    const batches: UplinkBatches = (beforeSeq, size) => jobs.latestUplinks(device.id, request.from, request.to, size, beforeSeq);
    return { ...(await compareCodecs(catalog, device.id, current, candidate, batches, request.limit, pacing)), warnings };
  } finally {
    codec.dispose();
  }
}
