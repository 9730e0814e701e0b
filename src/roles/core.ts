import type { OutpostConfig } from '../core/config.js';
import { RateLimiter } from '../core/rate-limit.js';
import type { Clock } from '../core/time.js';
import { Store } from '../store/store.js';
import { SqliteStateReads, type StateReads } from '../store/state-reads.js';
import { DataDirLock, prepareDataDir } from '../store/data-dir.js';
import { Catalog } from '../store/catalog.js';
import { StateWriter } from '../ingest/state-writer.js';
import { StatePipeline } from '../ingest/ingest.js';
import { DeviceStateDecoder } from '../ingest/decoders.js';
import { DeviceEvents } from '../ingest/device-events.js';
import { Registry } from '../registry/registry.js';
import { CommandRouter } from '../commands/router.js';
import { DeviceCodecs } from '../device-codecs/device-codecs.js';
import { RedecodeRunner, redecodeUnavailable } from '../device-codecs/redecode.js';
import { HistoryPruner } from '../ops/retention.js';
import { MetricsRegistry } from '../ops/metrics.js';
import { ConfigReloader } from '../ops/reload.js';
import { StatusSections } from '../ops/status.js';
import type { Logger } from '../ops/logger.js';
import { programVersion } from '../version.js';

/**
 * What every role shares, whatever its doors: the store and the rules behind it (catalog, writer,
 * pipeline, registry, command router, device codecs), the background jobs that keep the store
 * tidy, and the registries the doors report into (metrics, SIGHUP reloads, status sections).
 * Opened by `Core.open`, handed to a role's composition, closed by the daemon after the doors.
 */
export class Core {
  readonly version = programVersion();
  readonly startedAt: number;
  readonly metrics = new MetricsRegistry();
  /** The radio and upstream sections of `outpost status`. */
  readonly statusSections = new StatusSections();
  readonly events = new DeviceEvents();
  readonly catalog: Catalog;
  readonly writer: StateWriter;
  readonly pipeline: StatePipeline;
  readonly registry: Registry;
  readonly commands: CommandRouter;
  readonly rateLimiter: RateLimiter;
  readonly codecs: DeviceCodecs;
  readonly decoders: DeviceStateDecoder;
  readonly redecode: RedecodeRunner;
  /** SIGHUP reloads: parts that take new settings live register here (doors too). */
  readonly reloader: ConfigReloader;
  readonly #pruner: HistoryPruner;
  readonly #lock: DataDirLock;
  #stateReads: StateReads;
  #timers: NodeJS.Timeout[] = [];
  #closed = false;

  private constructor(
    readonly config: OutpostConfig,
    readonly logger: Logger,
    readonly clock: Clock,
    readonly store: Store,
    lock: DataDirLock,
  ) {
    this.#lock = lock;
    this.startedAt = clock.now();
    this.#watchStore();
    this.catalog = new Catalog(store);
    this.#stateReads = new SqliteStateReads(store);
    const commitSeconds = this.metrics.histogram('outpost_store_commit_seconds', 'Duration of state group commits', [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5]);
    const flushSeconds = this.metrics.histogram('outpost_store_flush_seconds', 'Duration of the log flush (fdatasync) after each group commit, off the event loop', [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5]);
    this.writer = new StateWriter(store, { onCommit: (_n, micros) => commitSeconds.observe(micros / 1e6), onFlush: (micros) => flushSeconds.observe(micros / 1e6) });
    this.codecs = new DeviceCodecs(config, logger);
    this.decoders = new DeviceStateDecoder(this.codecs, { jsonDepth: config.limits.jsonDepth });
    this.pipeline = new StatePipeline(this.catalog, this.writer, store.uplinks, clock, { jsonDepth: config.limits.jsonDepth, decoder: this.decoders });
    this.registry = new Registry(this.catalog, store, clock, config.limits, config.central);
    this.commands = new CommandRouter(this.catalog, store.commands, clock);
    this.rateLimiter = new RateLimiter(config.limits.rate, config.limits.burst);
    this.redecode = new RedecodeRunner({
      unavailable: redecodeUnavailable(config),
      store,
      catalog: this.catalog,
      codecs: this.codecs,
      clock,
      logger,
      announce: (device, changes) => {
        for (const change of changes) {
          const asset = this.catalog.assetById(change.assetId);
          if (asset) this.pipeline.announceCorrection(device, asset, change.valueJson, change.at);
        }
      },
    });
    // Codec settings changed by the CLI from another process are recompiled here, off the hot path.
    // A redecode the CLI queued is picked up here too (after the codecs, so it runs with the current one).
    this.catalog.on('externalChange', () => {
      this.codecs
        .syncFromStore(store)
        .then(() => this.redecode.resumeUnfinished())
        .catch((err: unknown) => logger.warn({ err }, 'codec reload failed'));
    });
    this.#pruner = new HistoryPruner(store, this.pipeline, clock, config.limits, logger);
    this.reloader = new ConfigReloader(config);
    registerCoreReloadables(this);
    registerCoreMetrics(this);
  }

  /** Where every reader of states reads them (latest, history, views, retained feed, status). */
  get stateReads(): StateReads {
    return this.#stateReads;
  }

  /**
   * Central nodes on PostgreSQL read states there, not from their SQLite file (docs/scale-out.md).
   * Set by the role's composition before it builds the doors, which take the reader once.
   */
  readStatesFrom(reads: StateReads): void {
    this.#stateReads = reads;
  }

  /**
   * Takes the data directory's lock (DataDirLockedError when another daemon has it) and opens the
   * store, checking it first when store.checkOnStart is set (StoreCorruptError).
   */
  static open(config: OutpostConfig, logger: Logger, clock: Clock): Core {
    prepareDataDir(config.dataDir);
    const lock = DataDirLock.acquire(config.dataDir);
    let store: Store | undefined;
    try {
      store = Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes, checkIntegrity: config.store.checkOnStart });
      return new Core(config, logger, clock, store, lock);
    } catch (err) {
      store?.close();
      lock.release();
      throw err;
    }
  }

  #watchStore(): void {
    const { store, logger } = this;
    store.health.onProblem = (problem) => {
      if (problem.kind === 'corrupt') logger.error({ code: problem.code, path: store.path }, problem.message);
      else logger.warn({ code: problem.code, path: store.path }, problem.message);
    };
    const atStart = store.health.report();
    if (atStart.status !== 'ok') logger.warn({ path: store.path }, `store ${atStart.status}: ${atStart.reason}`);
  }

  /** Before any door opens: the device codecs compiled, and redecode jobs a stopped daemon left resumed. */
  async prepare(): Promise<void> {
    await this.codecs.syncFromStore(this.store);
    // Jobs a killed or stopped daemon left behind continue from their last committed batch.
    this.redecode.resumeUnfinished();
  }

  /** The periodic jobs: history pruning, rate-limiter sweeps, noticing the CLI's changes. */
  startJobs(): void {
    const { config, clock } = this;
    this.#timers.push(setInterval(() => this.#pruner.start(), config.store.pruneIntervalSeconds * 1000).unref());
    this.#timers.push(setInterval(() => this.rateLimiter.sweep(clock.now()), 60_000).unref());
    // Notices CLI changes (revoked tokens) even when no request arrives to trigger the check.
    this.#timers.push(setInterval(() => this.catalog.syncWithDisk(), 250).unref());
  }

  stopJobs(): void {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    this.#pruner.stop();
  }

  /** After the doors stopped: redecode jobs pause, the last states commit, the store closes, the lock goes. */
  async close(): Promise<void> {
    // Once: a failed start closes the core, and a signal arriving meanwhile must not close it again.
    if (this.#closed) return;
    this.#closed = true;
    this.stopJobs();
    await this.redecode.stop();
    this.writer.flush();
    this.codecs.dispose();
    this.store.close();
    this.#lock.release();
  }
}

function registerCoreMetrics(core: Core): void {
  const { metrics, pipeline, commands, store, config, catalog, codecs, clock } = core;
  metrics.counterFrom('outpost_states_ingested_total', 'States accepted and stored since start', () => pipeline.statesAccepted);
  metrics.counterFrom('outpost_states_refused_total', 'States refused (bad payload, profile mismatch, unknown asset) since start', () => pipeline.statesRefused);
  metrics.counterFrom('outpost_commands_sent_total', 'Commands routed since start', () => commands.commandsSent);
  metrics.gauge('outpost_store_bytes', 'Size of the SQLite database and its WAL on disk', () => store.sizeBytes());
  metrics.gauge('outpost_store_max_bytes', 'Configured cap of the database file (store.maxBytes; 0 = none)', () => config.store.maxBytes);
  metrics.gauge('outpost_devices', 'Devices registered', () => store.devices.count());
  metrics.gauge('outpost_codecs_active', 'Devices with a compiled codec (CBOR, ABCL or JavaScript)', () => codecs.size);
  metrics.gauge('outpost_uptime_seconds', 'Seconds since the daemon started', () => (clock.now() - core.startedAt) / 1000);
}

/**
 * What a SIGHUP can change in the core without dropping a connection (docs/operations.md). The
 * config object is changed in place: the parts holding it (registry, pruner, doors, codecs) read
 * it per use.
 */
function registerCoreReloadables(core: Core): void {
  const { config, reloader } = core;
  reloader.register('log.level', (next) => {
    config.log.level = next.log.level;
    core.logger.level = next.log.level;
  });
  // Limits read per use from config.limits (registry, pruner) or handed over here (rate limiter).
  // Listed one by one: a limit added later is copied somewhere at start until shown otherwise,
  // so it is reported as needing a restart (limits.jsonDepth is, for one).
  const liveLimits = ['rate', 'burst', 'assetsPerDevice', 'historyPerAsset', 'historyDays', 'rawUplinksPerDevice', 'rawUplinkDays'] as const;
  const applyLimits = (next: OutpostConfig, changed: string[]) => {
    for (const key of changed) {
      const name = key.slice('limits.'.length) as (typeof liveLimits)[number];
      (config.limits as Record<string, unknown>)[name] = next.limits[name];
    }
    core.rateLimiter.reconfigure(config.limits.rate, config.limits.burst);
  };
  for (const name of liveLimits) reloader.register(`limits.${name}`, applyLimits);
  reloader.register('http.bodyLimit', (next) => void (config.http.bodyLimit = next.http.bodyLimit));
  reloader.register('mqtt.payloadLimit', (next) => void (config.mqtt.payloadLimit = next.mqtt.payloadLimit));
  reloader.register('store.maxBytes', (next) => {
    core.store.setMaxBytes(next.store.maxBytes);
    config.store.maxBytes = next.store.maxBytes;
  });
  reloader.register('codec', async (next) => {
    Object.assign(config.codec.js, next.codec.js);
    await core.codecs.recompileAll();
  });
}
