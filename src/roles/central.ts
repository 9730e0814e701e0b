import type { Door } from '../doors/door.js';
import { gatewayRoutes } from '../doors/http/gateway-routes.js';
import { GatewayRegistry } from '../sync/central/gateway-registry.js';
import { CatalogIntake } from '../sync/central/catalog-intake.js';
import { GatewayHub } from '../sync/central/gateway-hub.js';
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
  const hub = new GatewayHub({ catalog, gateways, intake, clock, logger });
  // Before the radio's and MQTT's sinks: a command for a device behind a gateway goes to the hub.
  core.commands.addSink(hub);
  metrics.counterFrom('outpost_sync_duplicates_total', 'States a gateway sent again that were already held (acknowledged, not stored twice)', () => pipeline.duplicates);
  metrics.gauge('outpost_gateways_connected', 'Gateways with an MQTT session now', () => hub.connectedCount);
  metrics.counterFrom('outpost_gateway_commands_queued_total', 'Commands kept for an offline gateway', () => hub.commandsQueued);
  metrics.counterFrom('outpost_gateway_refusals_total', 'Gateway messages refused on gateway/<id>/errors', () => hub.refusals);
  const radio = radioService(core);
  return present([
    await upstreamDoor(core),
    await serialDoor(core, radio),
    await mqttDoor(core, hub),
    radio,
    httpDoor(core, { radio, health: daemon.health, routes: gatewayRoutes(gateways, (id) => hub.connected(id)) }),
  ]);
}
