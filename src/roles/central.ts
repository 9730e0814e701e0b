import type { Door } from '../doors/door.js';
import { gatewayRoutes } from '../doors/http/gateway-routes.js';
import { GatewayRegistry } from '../sync/central/gateway-registry.js';
import { CatalogIntake } from '../sync/central/catalog-intake.js';
import { GatewayHub } from '../sync/central/gateway-hub.js';
import { FleetConfig } from '../sync/central/fleet-config.js';
import { SqliteChangeFeed, SqliteGatewayPresence, SqliteManagedRevisions, SqlitePendingCommands, type GatewayPresence, type PendingCommands } from '../sync/central/ports.js';
import type { Core } from './core.js';
import { httpDoor, mqttDoor, present, radioService, serialDoor, upstreamDoor, type HttpDoorExtras } from './doors.js';

/**
 * The central role (`role: central`, docs/sync.md): the gateway's doors, plus the gateways that
 * sync into it: their registry, their MQTT sessions and the commands that wait for them (the hub),
 * the catalogs they send (intake) and the /gateways routes. Loaded only for this role.
 * Door order and its reasons: see gateway.ts.
 */
export async function composeCentral(core: Core, daemon: Pick<HttpDoorExtras, 'health'>): Promise<Door[]> {
  const { catalog, registry, clock, logger, metrics, pipeline } = core;
  const gateways = new GatewayRegistry(catalog, registry, core.store.gateways, clock);
  const intake = new CatalogIntake(catalog, registry, core.store, clock, core.config.central);
  // Every write of the catalog tables goes through the registry: on PostgreSQL, committed there first.
  const write = <T>(work: () => T) => registry.write(work);
  let presence: GatewayPresence = new SqliteGatewayPresence(core.store.gateways, write);
  let pendingCommands: PendingCommands = new SqlitePendingCommands(core.store.gateways);
  // Several nodes (docs/scale-out.md): PostgreSQL behind the same ports, loaded only when configured.
  const scaleOut = core.config.central.postgres ? await import('../scale-out/compose.js').then((m) => m.scaleOutParts(core)) : undefined;
  const cluster = core.config.central.redis ? await import('../scale-out/compose.js').then((m) => m.brokerCluster(core)) : undefined;
  if (scaleOut) {
    presence = scaleOut.presence(presence);
    pendingCommands = scaleOut.pendingCommands;
  }
  const hub = new GatewayHub({ catalog, gateways, intake, presence, pendingCommands, events: core.events, clock, logger });
  // Provisioning down (docs/sync.md, "Manage a fleet from the central").
  const fleet = new FleetConfig({
    store: core.store,
    revisions: new SqliteManagedRevisions(core.store, write),
    clock,
    logger,
    limits: core.config.central,
    send: (topic, payload) => hub.send(topic, payload),
    connected: (id) => hub.connected(id),
  });
  hub.fleet = fleet;
  if (scaleOut) hub.shared = () => hub.settled();
  // Every change that can alter a managed device's definition raises its revision (when it did).
  registry.on('deviceChanged', (deviceId: string) => fleet.refresh(deviceId));
  registry.on('tokenRevoked', (tokenId: string) => {
    const deviceId = core.store.tokens.get(tokenId)?.deviceId;
    if (deviceId) fleet.refresh(deviceId);
  });
  const refreshAll = () => fleet.refreshAll().catch((err) => logger.error({ err }, 'fleet: definitions not refreshed'));
  new SqliteChangeFeed(catalog).subscribe(() => setImmediate(refreshAll));
  void refreshAll();
  metrics.counterFrom('outpost_gateway_events_total', "Device events gateways forwarded (re-published as the central's)", () => hub.eventsForwarded);
  metrics.counterFrom('outpost_gateway_events_dropped_total', 'Device events from gateways dropped (not readable, or for a device not behind that gateway here)', () => hub.eventsDropped);
  metrics.counterFrom('outpost_fleet_config_sent_total', 'Managed-device definitions sent to gateways', () => fleet.sentMessages);
  // Before the radio's and MQTT's sinks: a command for a device behind a gateway goes to the hub.
  core.commands.addSink(hub);
  metrics.counterFrom('outpost_sync_duplicates_total', 'States a gateway sent again that were already held (acknowledged, not stored twice)', () => pipeline.duplicates);
  metrics.gauge('outpost_gateways_connected', 'Gateways with an MQTT session now', () => hub.connectedCount);
  metrics.counterFrom('outpost_gateway_commands_queued_total', 'Commands kept for an offline gateway', () => hub.commandsQueued);
  metrics.counterFrom('outpost_gateway_refusals_total', 'Gateway messages refused on gateway/<id>/errors', () => hub.refusals);
  const radio = radioService(core);
  const onLorawan = radio.provisioning.onChange;
  // After the commit: on PostgreSQL the settings are tried on the cache and rolled back first, and
  // the radio's sessions must not take a change that may not happen.
  radio.provisioning.onChange = (deviceId) =>
    registry.afterCommit(() => {
      onLorawan(deviceId);
      fleet.refresh(deviceId);
    });
  return present([
    scaleOut?.door((gatewayId) => hub.deliverKept(gatewayId)),
    await upstreamDoor(core, radio),
    await serialDoor(core, radio),
    cluster?.door,
    await mqttDoor(core, hub, cluster?.broker),
    radio,
    httpDoor(core, { radio, health: daemon.health, routes: gatewayRoutes(gateways, (id) => hub.connected(id) || (scaleOut?.connectedElsewhere(id) ?? false), fleet, { store: core.store, states: core.stateReads }, (id) => hub.forget(id)), writesRefused: scaleOut?.writesRefused }),
  ]);
}
