import type { OutpostConfig } from '../core/config.js';
import type { Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { MetricsRegistry } from '../ops/metrics.js';
import type { Catalog } from '../store/catalog.js';
import type { Store } from '../store/store.js';
import type { DownlinkQueueStore } from '../store/downlink-queue.js';
import type { StatePipeline } from '../ingest/ingest.js';
import type { DeviceCodecs } from '../device-codecs/device-codecs.js';
import type { DeviceEvents } from '../ingest/device-events.js';
import type { RadioSource } from './radio.js';
import { regionByName } from './lorawan/regions.js';
import { readMacState } from './mac/state.js';
import { SessionRegistry } from './session-registry.js';
import { DownlinkQueue } from './downlink-queue.js';
import { NetworkServer } from './network-server.js';
import { LpwanCommandSink } from './command-sink.js';
import { LorawanProvisioning } from './provisioning.js';
import { GwmpDoor } from './gwmp/door.js';
import { RefusalLimitedEvents } from './refusal-events.js';
import { BasicStationDoor, loadStationTls, stationLimits } from '../doors/basic-station/door.js';
import { StationRegistry } from '../doors/basic-station/registry.js';
import type { Door } from '../doors/door.js';
import { bindError } from '../doors/bind-errors.js';

export interface RadioServiceDeps {
  config: OutpostConfig;
  /** LoRaWAN sessions, the downlink queue and the values last commanded to each device. */
  store: Pick<Store, 'lorawanDevices' | 'downlinks' | 'commandedValues' | 'stations'>;
  catalog: Catalog;
  pipeline: StatePipeline;
  codecs: DeviceCodecs;
  events: DeviceEvents;
  clock: Clock;
  logger: Logger;
  metrics: MetricsRegistry;
}

/**
 * The radio side of the gateway in one place: LoRaWAN provisioning, sessions, the downlink queue,
 * the network server and its radio sources (the packet forwarder door by default; serial modems are
 * added with `addSource`). One door for the daemon: its health is the `radio` section of /healthz.
 */
export class RadioService implements Door {
  readonly name = 'radio';
  readonly provisioning: LorawanProvisioning;
  readonly sessions: SessionRegistry;
  readonly queue: DownlinkQueue;
  readonly server: NetworkServer;
  readonly sink: LpwanCommandSink;
  readonly gwmp: GwmpDoor | undefined;
  readonly basicStation: BasicStationDoor | undefined;
  /** Registered Basics Stations (`/stations`); deleting one closes its socket. */
  readonly stations: StationRegistry;
  readonly #sources: RadioSource[] = [];
  readonly #deps: RadioServiceDeps;
  readonly #queueStore: DownlinkQueueStore;
  /** Device events of the network server, refusals limited per device (forged frames must not flood them). */
  readonly #refusalEvents: RefusalLimitedEvents;
  #pruneTimer: NodeJS.Timeout | undefined;

  constructor(deps: RadioServiceDeps) {
    this.#deps = deps;
    this.#refusalEvents = new RefusalLimitedEvents({ events: deps.events, clock: deps.clock, metrics: deps.metrics, perSecond: deps.config.mqtt.errorsPerSecond, burst: deps.config.mqtt.errorsBurst });
    const { config, store, clock } = deps;
    const devices = store.lorawanDevices;
    this.#queueStore = store.downlinks;
    const region = regionByName(config.radio.region);
    const rx2DataRate = config.radio.rx2DataRate ?? region.rx2.dataRate;
    this.sessions = new SessionRegistry(devices, (json) => readMacState(json, region, rx2DataRate));
    this.sessions.loadAll();
    this.queue = new DownlinkQueue(this.#queueStore, deps.events, clock, { perDevice: config.limits.downlinksPerDevice, ttlMs: config.limits.downlinkTtlSeconds * 1000 });
    this.provisioning = new LorawanProvisioning(devices, this.#queueStore, clock, region);
    this.provisioning.onChange = (deviceId) => {
      this.sessions.reload(deviceId);
      if (!this.sessions.device(deviceId)) this.queue.forget(deviceId);
    };
    this.server = new NetworkServer({
      devices,
      sessions: this.sessions,
      queue: this.queue,
      catalog: deps.catalog,
      pipeline: deps.pipeline,
      events: this.#refusalEvents,
      clock,
      logger: deps.logger,
      metrics: deps.metrics,
      region,
      settings: {
        netId: config.radio.netId.toUpperCase(),
        adr: config.radio.adr === false ? false : { installationMargin: config.radio.adr.installationMargin, maxDataRate: config.radio.adr.maxDataRate },
        rx2DataRate,
        subBand: config.radio.subBand,
        classC: { ackTimeoutMs: config.radio.classC.ackTimeoutS * 1000, retries: config.radio.classC.retries },
      },
      dedupMs: config.radio.dedupMs,
      hasCodec: (deviceId) => {
        const device = deps.catalog.device(deviceId);
        return device !== undefined && deps.codecs.get(device) !== undefined;
      },
    });
    this.sink = new LpwanCommandSink(this.sessions, deps.codecs, this.queue, store.commandedValues);
    const gwmp = config.radio.gwmp;
    if (gwmp) {
      this.gwmp = new GwmpDoor({
        port: gwmp.port,
        host: gwmp.host,
        maxDatagramBytes: gwmp.maxDatagramBytes,
        maxGateways: gwmp.maxGateways,
        gatewayExpiryMs: gwmp.gatewayExpirySeconds * 1000,
        clock,
        logger: deps.logger,
        metrics: deps.metrics,
      });
      this.addSource(this.gwmp);
    }
    this.stations = new StationRegistry(store.stations, clock);
    const bs = config.radio.basicStation;
    if (bs) {
      this.basicStation = new BasicStationDoor({
        host: bs.host,
        port: bs.port,
        auth: bs.auth,
        ...(bs.tls ? { tls: loadStationTls(bs.tls) } : {}),
        stations: store.stations,
        region,
        subBand: config.radio.subBand,
        clock,
        logger: deps.logger,
        metrics: deps.metrics,
        limits: stationLimits(bs),
      });
      this.addSource(this.basicStation);
      const door = this.basicStation;
      this.stations.onDeleted = (eui) => door.disconnect(eui);
    }
  }

  /** A radio source (a serial modem) whose frames go to the network server. Call before `start`. */
  addSource(source: RadioSource): void {
    this.#sources.push(source);
    this.server.attach(source);
  }

  get sources(): readonly RadioSource[] {
    return this.#sources;
  }

  /** Settings changed by another process (the CLI): reload sessions and queue counts. */
  syncFromStore(): void {
    this.sessions.loadAll();
    this.queue.reloadCounts();
    // A station deleted with the CLI loses its socket here.
    this.basicStation?.dropUnregistered();
  }

  deviceDeleted(deviceId: string): void {
    this.sessions.remove(deviceId);
    this.queue.forget(deviceId);
    this.server.forget(deviceId);
  }

  async start(): Promise<{ gwmp?: number; basicStation?: number }> {
    const { gwmp, basicStation: bs } = this.#deps.config.radio;
    for (const source of this.#sources) {
      try {
        await source.start();
      } catch (err) {
        // The packet forwarder's UDP socket: a port in use or a wrong address is a setting to fix.
        if (source === this.gwmp && gwmp) throw bindError(err, { host: 'radio.gwmp.host', port: 'radio.gwmp.port' }, gwmp.host, gwmp.port) ?? err;
        if (source === this.basicStation && bs) throw bindError(err, { host: 'radio.basicStation.host', port: 'radio.basicStation.port' }, bs.host, bs.port) ?? err;
        throw err;
      }
    }
    this.#pruneTimer = setInterval(() => {
      this.#queueStore.pruneFinished(50);
      this.#refusalEvents.sweep();
    }, 60_000).unref();
    return { ...(this.gwmp ? { gwmp: this.gwmp.port } : {}), ...(this.basicStation ? { basicStation: this.basicStation.port } : {}) };
  }

  async stop(): Promise<void> {
    clearInterval(this.#pruneTimer);
    for (const source of this.#sources) {
      try {
        await source.stop();
      } catch (err) {
        this.#deps.logger.warn({ err, source: source.name }, 'radio source did not stop cleanly');
      }
    }
    await this.server.stop();
  }

  health(): Record<string, unknown> {
    return { devices: this.sessions.size, sources: this.#sources.map((s) => s.health()) };
  }
}
