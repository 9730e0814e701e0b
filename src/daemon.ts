import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { ConfigError, type OutpostConfig } from './core/config.js';
import { RateLimiter } from './core/rate-limit.js';
import { systemClock, type Clock } from './core/time.js';
import { Store } from './store/store.js';
import { DataDirLock, prepareDataDir } from './store/data-dir.js';
import type { HealthStatus } from './store/health.js';
import { Catalog } from './store/catalog.js';
import { StateWriter } from './ingest/state-writer.js';
import { StatePipeline } from './ingest/ingest.js';
import { Registry } from './registry/registry.js';
import { CommandRouter } from './commands/router.js';
import { DeviceStateDecoder } from './ingest/decoders.js';
import { DeviceCodecs } from './device-codecs/device-codecs.js';
import { HistoryPruner } from './ops/retention.js';
import { RedecodeRunner } from './device-codecs/redecode.js';
import { MetricsRegistry } from './ops/metrics.js';
import { registerProcessMetrics } from './ops/process-metrics.js';
import { ConfigReloader, type ReloadOutcome } from './ops/reload.js';
import { ControlServer } from './ops/control.js';
import { StatusSections, storeFigures, type DaemonStatus } from './ops/status.js';
import type { Logger } from './ops/logger.js';
import { createHttpServer } from './doors/http/server.js';
import { MqttDoor } from './doors/mqtt/door.js';
import { apiRoutes } from './doors/http/routes.js';
import { LiveEvents } from './console/live-events.js';
import { consoleRoutes } from './console/routes.js';
import { bindError, loadTlsFiles, type ListenerKeys } from './doors/bind-errors.js';
import { programVersion } from './version.js';
import { UpstreamSync } from './sync/upstream-sync.js';
import { SerialModems } from './lpwan/serial/serial-modems.js';
import { GatewayRegistry } from './sync/central/gateway-registry.js';
import { CatalogIntake } from './sync/central/catalog-intake.js';
import { GatewayHub } from './sync/central/gateway-hub.js';
import { gatewayRoutes } from './doors/http/gateway-routes.js';
import { DeviceEvents } from './ingest/device-events.js';
import { RadioService } from './lpwan/radio-service.js';

export interface DaemonPorts {
  http?: number;
  mqtt?: number;
  mqttTls?: number;
  gwmp?: number;
}

/**
 * Wires the store, the pipeline and the doors together, and takes them apart again in order on
 * shutdown: stop accepting, finish what is in flight, commit, close the database.
 */
export class Daemon {
  readonly config: OutpostConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly writer: StateWriter;
  readonly pipeline: StatePipeline;
  readonly registry: Registry;
  readonly commands: CommandRouter;
  readonly metrics = new MetricsRegistry();
  readonly rateLimiter: RateLimiter;
  readonly codecs: DeviceCodecs;
  readonly decoders: DeviceStateDecoder;
  /** SIGHUP reloads: parts that take new settings live register here (radio and sync too). */
  readonly reloader: ConfigReloader;
  /** The radio and upstream sections of `outpost status`. */
  readonly statusSections = new StatusSections();
  /** The configured serial LoRa modems (`radio.serial`) and their raw point-to-point path. */
  readonly serialModems: SerialModems;
  readonly redecode: RedecodeRunner;
  readonly events = new DeviceEvents();
  readonly radio: RadioService;
  readonly #pruner: HistoryPruner;
  readonly #startedAt: number;
  readonly #version = programVersion();
  readonly #lock: DataDirLock;
  #http: Server | undefined;
  #live: LiveEvents | undefined;
  #mqtt: MqttDoor | undefined;
  /** Upstream sync, when `upstream.url` is set (docs/sync.md). */
  readonly upstream: UpstreamSync | undefined;
  /** Central role: the gateways, their sessions and the commands that wait for them (docs/sync.md). */
  readonly gateways: GatewayRegistry | undefined;
  readonly #hub: GatewayHub | undefined;
  #timers: NodeJS.Timeout[] = [];
  #control: ControlServer | undefined;
  #ports: DaemonPorts = {};
  #stopProcessMetrics: (() => void) | undefined;

  /**
   * Takes the data directory's lock (DataDirLockedError when another daemon has it) and opens the
   * store, checking it first when store.checkOnStart is set (StoreCorruptError).
   */
  constructor(config: OutpostConfig, logger: Logger, clock: Clock = systemClock) {
    this.config = config;
    this.logger = logger;
    this.clock = clock;
    this.#startedAt = clock.now();
    prepareDataDir(config.dataDir);
    this.#lock = DataDirLock.acquire(config.dataDir);
    try {
      this.store = Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes, checkIntegrity: config.store.checkOnStart });
    } catch (err) {
      this.#lock.release();
      throw err;
    }
    this.store.health.onProblem = (problem) => {
      if (problem.kind === 'corrupt') logger.error({ code: problem.code, path: this.store.path }, problem.message);
      else logger.warn({ code: problem.code, path: this.store.path }, problem.message);
    };
    const storeAtStart = this.store.health.report();
    if (storeAtStart.status !== 'ok') logger.warn({ path: this.store.path }, `store ${storeAtStart.status}: ${storeAtStart.reason}`);
    this.catalog = new Catalog(this.store);
    const commitMicros = this.metrics.histogram('outpost_store_commit_seconds', 'Duration of state group commits', [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5]);
    this.writer = new StateWriter(this.store, { onCommit: (_n, micros) => commitMicros.observe(micros / 1e6) });
    this.pipeline = new StatePipeline(this.catalog, this.writer, clock, { jsonDepth: config.limits.jsonDepth });
    this.registry = new Registry(this.catalog, clock, config.limits);
    this.commands = new CommandRouter(this.catalog, this.pipeline, clock);
    this.rateLimiter = new RateLimiter(config.limits.rate, config.limits.burst);
    this.codecs = new DeviceCodecs(config, logger);
    this.decoders = new DeviceStateDecoder(this.codecs, { jsonDepth: config.limits.jsonDepth });
    this.redecode = new RedecodeRunner({
      store: this.store,
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
        .syncFromStore(this.store)
        .then(() => this.redecode.resumeUnfinished())
        .catch((err: unknown) => logger.warn({ err }, 'codec reload failed'));
    });
    if (config.role === 'central') {
      const gateways = (this.gateways = new GatewayRegistry(this.catalog, this.registry, clock));
      const intake = new CatalogIntake(this.catalog, this.registry, gateways.store, clock);
      const hub = (this.#hub = new GatewayHub({ catalog: this.catalog, gateways, intake, clock, logger }));
      this.commands.addSink(hub);
      this.metrics.counterFrom('outpost_sync_duplicates_total', 'States a gateway sent again that were already held (acknowledged, not stored twice)', () => this.pipeline.duplicates);
      this.metrics.gauge('outpost_gateways_connected', 'Gateways with an MQTT session now', () => hub.connectedCount);
      this.metrics.counterFrom('outpost_gateway_commands_queued_total', 'Commands kept for an offline gateway', () => hub.commandsQueued);
      this.metrics.counterFrom('outpost_gateway_refusals_total', 'Gateway messages refused on gateway/<id>/errors', () => hub.refusals);
    }
    if (config.upstream.url) {
      this.upstream = new UpstreamSync({
        config: config.upstream,
        store: this.store,
        catalog: this.catalog,
        writer: this.writer,
        registry: this.registry,
        commands: this.commands,
        metrics: this.metrics,
        clock,
        logger,
        version: this.#version,
      });
    }
    this.serialModems = new SerialModems({
      modems: config.radio?.serial ?? [],
      catalog: this.catalog,
      pipeline: this.pipeline,
      decoders: this.decoders,
      codecs: this.codecs,
      clock,
      logger,
      metrics: this.metrics,
    });
    // The radio sink comes before the MQTT one (added when the door starts): a command it refuses
    // (bad FPort, not encodable) is refused before any MQTT subscriber has received it.
    this.radio = new RadioService({ config, store: this.store, catalog: this.catalog, pipeline: this.pipeline, codecs: this.codecs, decoders: this.decoders, events: this.events, clock, logger, metrics: this.metrics });
    this.commands.addSink(this.radio.sink);
    this.statusSections.set('radio', () => ({ ...this.radio.health(), ...(this.serialModems.sources.length > 0 ? { serial: this.serialModems.health() } : {}) }));
    this.registry.on('deviceDeleted', (deviceId: string) => this.radio.deviceDeleted(deviceId));
    this.catalog.on('externalChange', () => this.radio.syncFromStore());
    // Modems feed the network server too: frames that are LoRaWAN for a known device take that
    // path, the rest go to the modem's raw point-to-point codec (or are counted and dropped).
    for (const source of this.serialModems.sources) this.radio.server.attach(source);
    this.radio.server.unclaimed = (frame) => {
      if (this.serialModems.claimRaw(frame)) return true;
      this.serialModems.countUnclaimed(frame);
      return false;
    };
    this.#pruner = new HistoryPruner(this.store, this.pipeline, clock, config.limits, logger);
    this.#registerMetrics();
    this.reloader = new ConfigReloader(config);
    this.#registerReloadables();
  }

  /**
   * What a SIGHUP can change without dropping a connection (docs/operations.md). The config object
   * is changed in place: the parts holding it (registry, pruner, doors, codecs) read it per use.
   */
  #registerReloadables(): void {
    const { config, reloader } = this;
    reloader.register('log.level', (next) => {
      config.log.level = next.log.level;
      this.logger.level = next.log.level;
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
      this.rateLimiter.reconfigure(config.limits.rate, config.limits.burst);
    };
    for (const name of liveLimits) reloader.register(`limits.${name}`, applyLimits);
    reloader.register('http.bodyLimit', (next) => void (config.http.bodyLimit = next.http.bodyLimit));
    reloader.register('mqtt.payloadLimit', (next) => void (config.mqtt.payloadLimit = next.mqtt.payloadLimit));
    reloader.register('store.maxBytes', (next) => {
      this.store.setMaxBytes(next.store.maxBytes);
      config.store.maxBytes = next.store.maxBytes;
    });
    const upstream = this.upstream;
    if (upstream) {
      reloader.register('upstream', (next) => upstream.reconfigure(next.upstream));
      this.statusSections.set('upstream', () => upstreamHealthView(upstream.health()));
    }
    reloader.register('codec', async (next) => {
      Object.assign(config.codec.js, next.codec.js);
      await this.codecs.recompileAll();
    });
  }

  /** Applies a new configuration (SIGHUP); see ConfigReloader. */
  reloadConfig(next: OutpostConfig): Promise<ReloadOutcome> {
    return this.reloader.reload(next);
  }

  #registerMetrics(): void {
    this.metrics.counterFrom('outpost_states_ingested_total', 'States accepted and stored since start', () => this.pipeline.statesAccepted);
    this.metrics.counterFrom('outpost_states_refused_total', 'States refused (bad payload, profile mismatch, unknown asset) since start', () => this.pipeline.statesRefused);
    this.metrics.counterFrom('outpost_commands_sent_total', 'Commands routed since start', () => this.commands.commandsSent);
    this.metrics.gauge('outpost_store_bytes', 'Size of the SQLite database and its WAL on disk', () => this.store.sizeBytes());
    this.metrics.gauge('outpost_store_max_bytes', 'Configured cap of the database file (store.maxBytes; 0 = none)', () => this.config.store.maxBytes);
    this.metrics.gauge('outpost_devices', 'Devices registered', () => this.store.devices.count());
    this.metrics.gauge('outpost_codecs_active', 'Devices with a compiled codec (CBOR, ABCL or JavaScript)', () => this.codecs.size);
    this.metrics.gauge('outpost_uptime_seconds', 'Seconds since the daemon started', () => (this.clock.now() - this.#startedAt) / 1000);
    this.#stopProcessMetrics = registerProcessMetrics(this.metrics, this.#version);
  }

  /**
   * `ok`, `degraded` (serving, but something needs attention, e.g. writes refused for lack of
   * space) or `failing` (the store is damaged); /healthz answers 503 only for `failing`.
   */
  health(): { status: HealthStatus } & Record<string, unknown> {
    const store = this.store.health.report();
    const upstream = this.upstream?.health();
    // A link that is down degrades, never fails: states wait in the outbox (docs/sync.md).
    const linkDown = store.status === 'ok' && upstream?.link === 'down';
    return {
      status: linkDown ? 'degraded' : store.status,
      ...(store.reason ? { reason: `store: ${store.reason}` } : linkDown ? { reason: 'upstream: link down, states wait in the outbox' } : {}),
      store: { ...store, bytes: this.store.sizeBytes(), maxBytes: this.config.store.maxBytes },
      version: this.#version,
      role: this.config.role,
      uptimeSeconds: Math.round((this.clock.now() - this.#startedAt) / 1000),
      schemaVersion: this.store.schemaVersion(),
      ...(upstream ? { upstream: upstreamHealthView(upstream) } : {}),
      ...(this.serialModems.sources.length > 0 ? { serial: this.serialModems.health() } : {}),
      radio: this.radio.health(),
    };
  }

  /** `outpost status`, answered on the control socket. */
  status(): DaemonStatus {
    const figures = storeFigures(this.store);
    return {
      version: this.#version,
      pid: process.pid,
      uptimeSeconds: Math.round((this.clock.now() - this.#startedAt) / 1000),
      dataDir: this.config.dataDir,
      ports: { ...this.#ports } as Record<string, number>,
      devices: figures.devices,
      states: { stored: figures.storedStates, acceptedSinceStart: this.pipeline.statesAccepted, refusedSinceStart: this.pipeline.statesRefused },
      radio: this.statusSections.read('radio'),
      upstream: this.statusSections.read('upstream'),
      lastUplinkAt: figures.lastUplinkAt === null ? null : new Date(figures.lastUplinkAt).toISOString(),
    };
  }

  /** For the systemd watchdog: the event loop runs (or this would not be called) and the database answers. */
  healthy(): boolean {
    try {
      this.store.ping();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Opens the doors. Any failure closes what was already opened (no half-started daemon keeps
   * serving) and rejects; a setting that cannot be applied (an address, a port, a TLS file) is a
   * ConfigError naming its key.
   */
  async start(): Promise<DaemonPorts> {
    try {
      return await this.#start();
    } catch (err) {
      await this.stop().catch((stopErr: unknown) => this.logger.error({ err: stopErr }, 'cleanup after a failed start failed'));
      throw err;
    }
  }

  async #start(): Promise<DaemonPorts> {
    const ports: DaemonPorts = this.#ports;
    if (this.config.mqtt.enabled && this.config.mqtt.tls.enabled) loadTlsFiles(this.config.mqtt.tls);
    await this.codecs.syncFromStore(this.store);
    // Before any door listens: a bad modem codec is a config error (exit 2), not a half-started daemon.
    await this.serialModems.prepare();
    // Jobs a killed or stopped daemon left behind continue from their last committed batch.
    this.redecode.resumeUnfinished();
    const config = this.config;
    if (config.http.enabled) {
      const requestsByStatus = this.metrics.counter('outpost_http_requests_total', 'HTTP requests by status');
      const live = (this.#live = new LiveEvents(this.pipeline, this.commands, { isTokenLive: (id) => this.catalog.isTokenLive(id) }));
      live.addSource(this.events);
      this.metrics.gauge('outpost_console_streams', 'Open live event streams (GET /events)', () => live.streamCount);
      this.metrics.counterFrom('outpost_console_events_dropped_total', 'Live events not sent to a stream that was not keeping up', () => live.eventsDropped);
      this.#http = createHttpServer({
        routes: [...apiRoutes({
          catalog: this.catalog,
          registry: this.registry,
          pipeline: this.pipeline,
          commands: this.commands,
          decoders: this.decoders,
          codecs: this.codecs,
          redecode: this.redecode,
          lorawan: this.radio.provisioning,
          clock: this.clock,
          health: () => this.health(),
          metricsText: () => this.metrics.render(),
        }), ...consoleRoutes(live), ...(this.gateways && this.#hub ? gatewayRoutes(this.gateways, (id) => this.#hub!.connected(id)) : [])],
        catalog: this.catalog,
        rateLimiter: this.rateLimiter,
        clock: this.clock,
        logger: this.logger,
        // A getter: a config reload changes the limit without restarting the server.
        get bodyLimit() {
          return config.http.bodyLimit;
        },
        // Not reloadable: parsers get it when the doors open.
        jsonDepth: config.limits.jsonDepth,
        requestsByStatus,
      });
      ports.http = await listen(this.#http, this.config.http.port, this.config.http.host, { host: 'http.host', port: 'http.port' });
    }
    if (this.config.mqtt.enabled) {
      this.#mqtt = new MqttDoor({
        config: this.config.mqtt,
        catalog: this.catalog,
        pipeline: this.pipeline,
        registry: this.registry,
        commands: this.commands,
        decoders: this.decoders,
        events: this.events,
        rateLimiter: this.rateLimiter,
        metrics: this.metrics,
        logger: this.logger,
        clock: this.clock,
        gateways: this.#hub,
      });
      const mqtt = this.#mqtt;
      this.#hub?.attach((topic, payload, retain) => mqtt.publishAsService(topic, payload, retain));
      const { host, port, tls } = this.config.mqtt;
      try {
        Object.assign(ports, await this.#mqtt.start());
      } catch (err) {
        // The door listens on mqtt.port, then mqtt.tls.port; a port in the message tells them apart.
        const failedPort = (err as { port?: unknown }).port;
        const tlsFailed = tls.enabled && failedPort === tls.port && failedPort !== port;
        throw bindError(err, { host: 'mqtt.host', port: tlsFailed ? 'mqtt.tls.port' : 'mqtt.port' }, host, tlsFailed ? tls.port : port) ?? err;
      }
    }
    // A modem that is missing now is retried in the background; it never holds up the start.
    await this.serialModems.start();
    // After the doors: the command sinks (MQTT, radio) are in place before upstream commands arrive.
    this.upstream?.start();
    Object.assign(ports, await this.radio.start());
    this.#timers.push(setInterval(() => this.#pruner.run(), this.config.store.pruneIntervalSeconds * 1000).unref());
    this.#timers.push(setInterval(() => this.rateLimiter.sweep(this.clock.now()), 60_000).unref());
    // Notices CLI changes (revoked tokens) even when no request arrives to trigger the check.
    this.#timers.push(setInterval(() => this.catalog.syncWithDisk(), 250).unref());
    this.#control = await ControlServer.start(this.config.dataDir, { '/status': () => this.status() }, this.logger);
    return ports;
  }

  async stop(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    await this.#control?.stop();
    this.#stopProcessMetrics?.();
    if (this.#http?.listening) {
      const server = this.#http;
      // Event streams never end by themselves: end them first so closing does not wait on browsers.
      this.#live?.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Requests still running after 10 s are cut off rather than holding shutdown forever.
      const deadline = setTimeout(() => server.closeAllConnections(), 10_000).unref();
      await closed;
      clearTimeout(deadline);
    }
    // Radio before MQTT: uplinks being handled still commit and announce their states.
    await this.radio.stop();
    // MQTT after HTTP, before the last commit: states in flight still reach the database.
    if (this.#mqtt) await this.#mqtt.stop();
    await this.serialModems.stop();
    await this.redecode.stop();
    this.writer.flush();
    // The upstream link last: what the doors committed is in the outbox, PUBACKs in flight still count.
    if (this.upstream) await this.upstream.stop();
    this.codecs.dispose();
    this.store.close();
    this.#lock.release();
  }
}

function upstreamHealthView(h: ReturnType<UpstreamSync['health']>): Record<string, unknown> {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return { ...h, oldestAt: iso(h.oldestAt), lastAckAt: iso(h.lastAckAt) };
}

function listen(server: Server | import('node:net').Server, port: number, host: string, keys: ListenerKeys): Promise<number> {
  return new Promise((resolve, reject) => {
    const failed = (err: Error) => reject(bindError(err, keys, host, port) ?? err);
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
