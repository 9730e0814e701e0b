import { setImmediate as nextTurn } from 'node:timers/promises';
import { ServiceError, isServiceError, storageError } from '../core/errors.js';
import { parseTimestamp, type Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';
import type { DeviceRecord } from '../core/model.js';
import type { Store } from '../store/store.js';
import { RedecodeJobs, type KeptRawUplink, type LatestChange, type RedecodeJob, type RedecodeProblem, type Replacement } from '../store/redecode-jobs.js';
import type { DeviceCodecs } from '../device-codecs/device-codecs.js';
import { currentUplinkDecoder, type UplinkDecoder } from '../ingest/decoders.js';
import type { AssetRefusal } from '../ingest/ingest.js';
import { resolveAt } from '../ingest/messages.js';
import { isJsonObject, type JsonValue, memberIgnoringCase } from '../core/json.js';

/** One state a codec gave for a kept uplink, validated as the live path would. */
export interface EvaluatedState {
  asset: CachedAsset;
  value: JsonValue;
  valueJson: string;
  at: number;
}

export interface UplinkEvaluation {
  /** What the codec returned, by asset name, before any profile check. */
  decoded: Record<string, { value: JsonValue; at: number | null }>;
  accepted: EvaluatedState[];
  refused: AssetRefusal[];
  warnings: string[];
  errors: string[];
}

/**
 * Runs a codec on one kept raw uplink and checks each state like the ingest pipeline does
 * (known asset, `at`, profile), so try and re-decode judge a codec exactly as live traffic would.
 * A state without `at` gets the uplink's receive time.
 */
export function evaluateUplink(catalog: Catalog, deviceId: string, decoder: UplinkDecoder, uplink: KeptRawUplink): UplinkEvaluation {
  const result = decoder.decode(uplink.payload, { fPort: uplink.port ?? undefined, receivedAt: uplink.at });
  const out: UplinkEvaluation = { decoded: {}, accepted: [], refused: [], warnings: result.warnings, errors: result.errors };
  if (result.errors.length > 0) return out;
  for (const [name, state] of Object.entries(result.states)) {
    const where = `asset "${name}"`;
    try {
      const at = resolveAt(state.at, uplink.at, where);
      out.decoded[name] = { value: state.value as JsonValue, at };
      const asset = catalog.assetByName(deviceId, name);
      if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${deviceId}`);
      if (state.value === undefined) throw new ServiceError('INVALID_MESSAGE', `${where}: member "value" is required`);
      const check = asset.check(state.value);
      if (!check.ok) throw new ServiceError('PROFILE_MISMATCH', `${where}: ${check.error}`);
      out.accepted.push({ asset, value: state.value as JsonValue, valueJson: JSON.stringify(state.value), at });
    } catch (err) {
      if (!isServiceError(err)) throw err;
      out.decoded[name] ??= { value: state.value as JsonValue, at: null };
      out.refused.push({ asset: name, code: err.code, error: err.message });
    }
  }
  return out;
}

/** `from`/`to` body members: ISO 8601 with a zone, `from` ≤ `to`; absent means open-ended. */
export function parseRange(body: Record<string, unknown>): { from: number | null; to: number | null } {
  const time = (key: string): number | null => {
    const raw = memberIgnoringCase(body, key);
    if (raw === undefined || raw === null) return null;
    const ms = typeof raw === 'string' ? parseTimestamp(raw) : undefined;
    if (ms === undefined) throw new ServiceError('INVALID_BODY', `"${key}" must be an ISO 8601 timestamp with a zone`);
    return ms;
  };
  const from = time('from');
  const to = time('to');
  if (from !== null && to !== null && from > to) throw new ServiceError('INVALID_BODY', '"from" must not be later than "to"');
  return { from, to };
}

export function parseRedecodeBody(body: unknown): { from: number | null; to: number | null } {
  if (body === undefined || body === null) return { from: null, to: null };
  if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', 'a redecode body must be a JSON object {"from"?, "to"?}');
  return parseRange(body);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The job as GET /device/<id>/redecode shows it. */
export function redecodeView(job: RedecodeJob) {
  return {
    status: job.status,
    done: job.done,
    total: job.total,
    replaced: job.replaced,
    failed: job.failed,
    from: job.from === null ? null : iso(job.from),
    to: job.to === null ? null : iso(job.to),
    codec: job.codec,
    ...(job.notCovered
      ? {
          notCovered: {
            from: iso(job.notCovered.from),
            to: iso(job.notCovered.to),
            states: job.notCovered.states,
            reason: 'these states were decoded from raw uplinks that are no longer kept (limits.rawUplinksPerDevice, limits.rawUplinkDays); they were left as they are',
          },
        }
      : {}),
    problems: job.problems.map((p) => ({ uplink: p.uplink, at: iso(p.at), error: p.error })),
    ...(job.error === null ? {} : { error: job.error }),
    startedAt: iso(job.startedAt),
    finishedAt: job.finishedAt === null ? null : iso(job.finishedAt),
  };
}

export interface RedecodeDeps {
  store: Pick<Store, 'redecodeJobs'>;
  catalog: Catalog;
  codecs: DeviceCodecs;
  clock: Clock;
  logger: Logger;
  /** Corrected latest states, announced once when a job finishes (the MQTT feed). */
  announce?: (device: DeviceRecord, changes: LatestChange[]) => void;
  /** Identifies this process in the job row, so another process can tell whether it is still there. */
  owner?: string;
  /**
   * Why re-decoding cannot run in this daemon at all, or undefined: a central on PostgreSQL keeps
   * no states in its SQLite file, so replacing them there would answer 202 and change nothing.
   */
  unavailable?: string;
  /** Most uplinks per transaction. */
  batchSize?: number;
  /** Longest a batch runs before it commits and lets other work in (ms). */
  batchMillis?: number;
}

/** Why this configuration cannot re-decode (docs/scale-out.md, "What is not shared (yet)"), or undefined. */
export function redecodeUnavailable(config: { central: { postgres: unknown } }): string | undefined {
  if (!config.central.postgres) return undefined;
  return 're-decoding is not available on a central on PostgreSQL: it replaces states in the node\'s SQLite file, which holds none there (docs/scale-out.md)';
}

const MAX_PROBLEMS = 20;
/** A running job whose owner has not committed progress for this long is taken over (its process died or its pid was reused). */
const ABANDONED_AFTER_MS = 30_000;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Re-decodes a device's kept raw uplinks with its current codec and replaces the states decoded
 * from them, as a resumable job: batches of uplinks commit with the job's progress, so after a kill
 * the job continues from the last commit (the daemon resumes it at start). Latest states are set
 * once, at the end, and only then announced.
 */
export class RedecodeRunner {
  readonly jobs: RedecodeJobs;
  readonly #deps: RedecodeDeps;
  readonly #owner: string;
  readonly #running = new Map<string, Promise<RedecodeJob>>();

  constructor(deps: RedecodeDeps) {
    this.#deps = deps;
    this.jobs = deps.store.redecodeJobs;
    this.#owner = deps.owner ?? `${process.pid}:${deps.clock.now()}`;
  }

  #assertAvailable(): void {
    if (this.#deps.unavailable) throw new ServiceError('REDECODE_UNAVAILABLE', this.#deps.unavailable);
  }

  /** A queued job is waiting for a runner; a running one is live while its owner is. */
  isLive = (job: RedecodeJob): boolean => {
    if (job.status === 'queued') return true;
    if (job.status !== 'running') return false;
    if (job.owner === this.#owner) return this.#running.has(job.deviceId);
    if (this.#deps.clock.now() - job.updatedAt > ABANDONED_AFTER_MS) return false;
    const pid = Number((job.owner ?? '').split(':')[0]);
    // Our own pid under another owner name is an earlier life of this process (a restarted container).
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid);
  };

  /** Starts a job in this process and returns at once; 409 while one runs for the device. */
  start(device: DeviceRecord, range: { from: number | null; to: number | null }): RedecodeJob {
    this.#assertAvailable();
    const decoder = currentUplinkDecoder(this.#deps.codecs, device);
    const job = this.jobs.create(
      {
        deviceId: device.id,
        status: 'running',
        owner: this.#owner,
        from: range.from,
        to: range.to,
        codec: decoder.version,
        total: this.jobs.countUplinks(device.id, 0, range.from, range.to),
        notCovered: this.jobs.notCovered(device.id, range.from, range.to),
      },
      this.#deps.clock.now(),
      this.isLive,
    );
    if (!job) throw new ServiceError('REDECODE_RUNNING', `a re-decode is already running for device ${device.id} (GET /device/${device.id}/redecode shows its progress)`);
    this.#launch(device.id);
    return job;
  }

  /** Leaves a job for whichever process claims it first (the CLI hands jobs to a running daemon this way). */
  enqueue(device: DeviceRecord, range: { from: number | null; to: number | null }): RedecodeJob {
    this.#assertAvailable();
    const job = this.jobs.create(
      { deviceId: device.id, status: 'queued', owner: null, from: range.from, to: range.to, codec: null, total: 0, notCovered: null },
      this.#deps.clock.now(),
      this.isLive,
    );
    if (!job) throw new ServiceError('REDECODE_RUNNING', `a re-decode is already running for device ${device.id}`);
    return job;
  }

  /** Claims a queued or abandoned job and runs it to the end; undefined if someone else has it. */
  claimAndRun(deviceId: string): Promise<RedecodeJob> | undefined {
    const running = this.#running.get(deviceId);
    if (running) return running;
    if (!this.jobs.claim(deviceId, this.#owner, this.#deps.clock.now(), this.isLive)) return undefined;
    return this.#launch(deviceId);
  }

  /** At start and whenever another process committed: pick up queued jobs and resume abandoned ones. */
  resumeUnfinished(): void {
    for (const job of this.jobs.unfinished()) {
      const claimable = job.status === 'queued' || !this.isLive(job);
      if (!claimable || this.#running.has(job.deviceId)) continue;
      const run = this.claimAndRun(job.deviceId);
      if (run) this.#deps.logger.info({ deviceId: job.deviceId, done: job.done, total: job.total }, job.status === 'queued' ? 'redecode started' : 'redecode resumed');
    }
  }

  /** The job running in this process, to wait for (tests, the CLI). */
  running(deviceId: string): Promise<RedecodeJob> | undefined {
    return this.#running.get(deviceId);
  }

  /** Waits for every job this process runs (shutdown: they stop at their next commit). */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.allSettled([...this.#running.values()]);
  }

  #stopping = false;

  #launch(deviceId: string): Promise<RedecodeJob> {
    const run = this.#run(deviceId).finally(() => this.#running.delete(deviceId));
    this.#running.set(deviceId, run);
    return run;
  }

  async #run(deviceId: string): Promise<RedecodeJob> {
    const { catalog, codecs, clock, logger } = this.#deps;
    const fail = (error: string): RedecodeJob => {
      logger.warn({ deviceId, error }, 'redecode failed');
      try {
        this.jobs.finish(deviceId, 'failed', error, clock.now());
      } catch (err) {
        // The store refuses even that: the job stays running and is taken over at the next start.
        logger.warn({ deviceId, err }, 'redecode failure could not be recorded');
      }
      return this.jobs.get(deviceId)!;
    };
    try {
      await nextTurn(); // the POST is answered before the first batch
      let job = this.jobs.get(deviceId)!;
      const device = catalog.device(deviceId);
      if (!device) return fail(`device ${deviceId} no longer exists`);
      let decoder = currentUplinkDecoder(codecs, device);
      if (job.codec === null) {
        // Queued by another process: the codec and the total are fixed when the job really starts.
        this.jobs.begin(deviceId, decoder.version, this.jobs.countUplinks(deviceId, 0, job.from, job.to), this.jobs.notCovered(deviceId, job.from, job.to), clock.now());
        job = this.jobs.get(deviceId)!;
      }
      const codec = job.codec!;
      const progress = { lastSeq: job.lastSeq, done: job.done, replaced: job.replaced, failed: job.failed, problems: job.problems as RedecodeProblem[] };
      const batchSize = this.#deps.batchSize ?? 2000;
      const batchMillis = this.#deps.batchMillis ?? 200;
      while (progress.done < job.total) {
        if (this.#stopping) {
          // Shutdown between two commits: queued again, so the next start continues from here.
          this.jobs.requeue(deviceId, clock.now());
          return this.jobs.get(deviceId)!;
        }
        const current = catalog.device(deviceId);
        if (!current) return fail(`device ${deviceId} was deleted during the re-decode`);
        decoder = currentUplinkDecoder(codecs, current);
        if (decoder.version !== codec) return fail(`the device's codec changed from ${codec} to ${decoder.version} during the re-decode; start it again to use the new one`);
        const uplinks = this.jobs.uplinks(deviceId, progress.lastSeq, job.from, job.to, Math.min(batchSize, job.total - progress.done));
        if (uplinks.length === 0) break; // the rest was pruned meanwhile
        const started = performance.now();
        const replacements: Replacement[] = [];
        for (const uplink of uplinks) {
          const outcome = evaluateUplink(catalog, deviceId, decoder, uplink);
          progress.done++;
          progress.lastSeq = uplink.seq;
          const problem = outcome.errors.length > 0 ? outcome.errors.join('; ') : outcome.refused.map((r) => r.error).join('; ');
          if (problem) {
            // All or nothing per uplink: one it cannot fully re-decode keeps the states it had.
            progress.failed++;
            if (progress.problems.length < MAX_PROBLEMS) progress.problems.push({ uplink: uplink.seq, at: uplink.at, error: problem });
          } else {
            replacements.push({
              uplinkSeq: uplink.seq,
              codec,
              states: outcome.accepted.map((s) => ({ assetId: s.asset.id, at: s.at, valueJson: s.valueJson, receivedAt: uplink.at })),
            });
            progress.replaced += outcome.accepted.length;
          }
          if (performance.now() - started > batchMillis) break;
        }
        this.jobs.applyBatch(deviceId, replacements, progress, clock.now());
        await nextTurn();
      }
      const changes = this.jobs.settleLatest(deviceId, clock.now());
      if (changes.length > 0) this.#deps.announce?.(catalog.device(deviceId) ?? device, changes);
      const finished = this.jobs.get(deviceId)!;
      logger.info({ deviceId, done: finished.done, replaced: finished.replaced, failed: finished.failed }, 'redecode done');
      return finished;
    } catch (err) {
      const refusal = storageError(err);
      // A full or busy store: the job stops where its last batch committed and says why.
      return fail(refusal ? refusal.message : `re-decode stopped: ${(err as Error).message}`);
    }
  }
}
