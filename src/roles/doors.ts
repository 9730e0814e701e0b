import type { Door } from '../doors/door.js';
import { stationRoutes } from '../doors/http/routes/stations.js';
import type { Route } from '../doors/http/router.js';
import { HttpDoor } from '../doors/http/door.js';
import { apiRoutes } from '../doors/http/routes.js';
import { loadTlsFiles } from '../doors/bind-errors.js';
import type { GatewayHub } from '../sync/central/gateway-hub.js';
import type { BrokerCluster } from '../doors/mqtt/broker.js';
import type { ServiceError } from '../core/errors.js';
import { LiveEvents } from '../console/live-events.js';
import { consoleRoutes } from '../console/routes.js';
import { RecentRadio } from '../console/recent-radio.js';
import { RadioService } from '../lpwan/radio-service.js';
import type { DaemonHealth } from '../daemon.js';
import type { Core } from './core.js';

/**
 * One factory per door, shared by the role compositions. A door whose section of the config turns
 * it off is not built (undefined), and its modules are not even loaded: the serial stack, the
 * upstream MQTT client and the broker are imported here on demand, which is what keeps the start
 * of a plain gateway short (docs/architecture.md, "Doors and roles").
 */

/** The upstream link (`upstream.url`), loaded with the MQTT client only when configured. */
export async function upstreamDoor(core: Core, radio?: RadioService): Promise<Door | undefined> {
  const { config } = core;
  if (!config.upstream.url) return undefined;
  const [{ UpstreamSync }, { UpstreamDoor, upstreamHealthView }] = await Promise.all([import('../sync/upstream-sync.js'), import('../sync/upstream-door.js')]);
  const sync = new UpstreamSync({
    config: config.upstream,
    store: core.store,
    catalog: core.catalog,
    writer: core.writer,
    registry: core.registry,
    commands: core.commands,
    metrics: core.metrics,
    clock: core.clock,
    logger: core.logger,
    version: core.version,
    codecs: core.codecs,
    lorawan: radio?.provisioning,
    events: core.events,
  });
  core.reloader.register('upstream', (next) => sync.reconfigure(next.upstream));
  core.statusSections.set('upstream', () => upstreamHealthView(sync.health()));
  return new UpstreamDoor(sync, core.writer);
}

/**
 * The radio service: LoRaWAN sessions, the network server, the packet forwarder door. Its command
 * sink is added here, before the MQTT door adds its own when it starts: a command the radio
 * refuses (bad FPort, not encodable) is refused before any MQTT subscriber has received it.
 */
export function radioService(core: Core): RadioService {
  const { config, catalog, registry } = core;
  const radio = new RadioService({ config, store: core.store, catalog, pipeline: core.pipeline, codecs: core.codecs, events: core.events, clock: core.clock, logger: core.logger, metrics: core.metrics });
  core.commands.addSink(radio.sink);
  core.statusSections.set('radio', () => radio.health());
  registry.on('deviceDeleted', (deviceId: string) => radio.deviceDeleted(deviceId));
  catalog.on('externalChange', () => radio.syncFromStore());
  return radio;
}

/**
 * The serial LoRa modems (`radio.serial`), loaded with serialport only when some are configured.
 * Their raw codecs compile here, before any door opens: a bad one is a config error (exit 2), not
 * a half-started daemon.
 */
export async function serialDoor(core: Core, radio: RadioService): Promise<Door | undefined> {
  const modems = core.config.radio?.serial ?? [];
  if (modems.length === 0) return undefined;
  const { SerialModems } = await import('../lpwan/serial/serial-modems.js');
  const serial = new SerialModems({ modems, catalog: core.catalog, pipeline: core.pipeline, codecs: core.codecs, clock: core.clock, logger: core.logger, metrics: core.metrics });
  await serial.prepare();
  core.statusSections.set('radio', () => ({ ...radio.health(), serial: serial.health() }));
  // Modems feed the network server too: frames that are LoRaWAN for a known device take that
  // path, the rest go to the modem's raw point-to-point codec (or are counted and dropped).
  for (const source of serial.sources) radio.server.attach(source);
  radio.server.unclaimed = (frame) => {
    if (serial.claimRaw(frame)) return true;
    serial.countUnclaimed(frame);
    return false;
  };
  return serial;
}

/**
 * The MQTT broker door (`mqtt.enabled`). The TLS certificate and key are read and checked here,
 * before any port is opened. `gateways` (central role) get their sessions and commands through it.
 */
export async function mqttDoor(core: Core, gateways?: GatewayHub, cluster?: BrokerCluster): Promise<Door | undefined> {
  const { config } = core;
  if (!config.mqtt.enabled) return undefined;
  if (config.mqtt.tls.enabled) loadTlsFiles(config.mqtt.tls);
  const { MqttDoor } = await import('../doors/mqtt/door.js');
  const door = new MqttDoor({
    config: config.mqtt,
    catalog: core.catalog,
    states: core.stateReads,
    pipeline: core.pipeline,
    registry: core.registry,
    commands: core.commands,
    events: core.events,
    rateLimiter: core.rateLimiter,
    metrics: core.metrics,
    logger: core.logger,
    clock: core.clock,
    gateways,
    cluster,
  });
  gateways?.attach((topic, payload, retain) => door.publishAsService(topic, payload, retain));
  return door;
}

export interface HttpDoorExtras {
  radio: RadioService;
  /** The daemon's /healthz answer (the daemon exists once the composition is done). */
  health: () => DaemonHealth;
  /** Routes only this role serves (central: the gateways). */
  routes?: Route[];
  /** Central nodes on PostgreSQL: writes refused while it is away (docs/scale-out.md). */
  writesRefused?: () => ServiceError | undefined;
}

/** The HTTP API and the console (`http.enabled`). */
export function httpDoor(core: Core, extras: HttpDoorExtras): Door | undefined {
  const { config, metrics } = core;
  if (!config.http.enabled) return undefined;
  const requestsByStatus = metrics.counter('outpost_http_requests_total', 'HTTP requests by status');
  const live = new LiveEvents(core.pipeline, core.commands, { limits: config.http.eventStreams, isTokenLive: (id) => core.catalog.isTokenLive(id) });
  live.addSource(core.events);
  const recentRadio = new RecentRadio(core.events);
  core.registry.on('deviceDeleted', (deviceId: string) => recentRadio.forget(deviceId));
  metrics.gauge('outpost_console_streams', 'Open live event streams (GET /events)', () => live.streamCount);
  metrics.counterFrom('outpost_console_events_dropped_total', 'Live events not sent to a stream that was not keeping up', () => live.eventsDropped);
  const api = apiRoutes({
    catalog: core.catalog,
    store: core.store,
    states: core.stateReads,
    registry: core.registry,
    pipeline: core.pipeline,
    commands: core.commands,
    codecs: core.codecs,
    redecode: core.redecode,
    lorawan: extras.radio.provisioning,
    clock: core.clock,
    pageBytes: () => config.http.pageBytes,
    health: extras.health,
    metricsText: () => metrics.render(),
  });
  return new HttpDoor({
    http: config.http,
    routes: [...api, ...consoleRoutes(live, { recentRadio, requireDevice: (id) => core.registry.requireDevice(id) }), ...stationRoutes(extras.radio.stations), ...(extras.routes ?? [])],
    catalog: core.catalog,
    storeHealth: core.store.health,
    rateLimiter: core.rateLimiter,
    clock: core.clock,
    logger: core.logger,
    // A getter: a config reload changes the limit without restarting the server.
    get bodyLimit() {
      return config.http.bodyLimit;
    },
    // Not reloadable: parsers get it when the doors open.
    jsonDepth: config.limits.jsonDepth,
    requestsByStatus,
    writesRefused: extras.writesRefused,
    // Event streams never end by themselves: end them first so closing does not wait on browsers.
    endStreams: () => live.close(),
  });
}

/** A composition's door list without the doors its config turned off. */
export function present(doors: ReadonlyArray<Door | undefined>): Door[] {
  return doors.filter((d): d is Door => d !== undefined);
}
