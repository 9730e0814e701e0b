import type { Door } from '../doors/door.js';
import type { Core } from './core.js';
import { httpDoor, mqttDoor, present, radioService, serialDoor, upstreamDoor, type HttpDoorExtras } from './doors.js';

/**
 * The gateway role (`role: gateway`, the default): devices talk to it over HTTP, MQTT and radio,
 * and it forwards upstream when `upstream.url` is set.
 *
 * The doors in start order; the daemon stops them in reverse (HTTP, radio, MQTT, serial, upstream):
 * - the upstream link starts first and stops last: what the other doors committed is in the
 *   outbox by then, and its PUBACKs in flight still count;
 * - HTTP starts last and stops first: the console's live streams and requests in flight end
 *   before MQTT closes;
 * - the radio stops before MQTT: uplinks it is still handling commit and announce their states;
 * - the serial modems stop after the network server reading them, and wait for their raw frames.
 * Command sinks: the radio's is added when it is built, before MQTT's (added when MQTT starts).
 */
export async function composeGateway(core: Core, daemon: Pick<HttpDoorExtras, 'health'>): Promise<Door[]> {
  const radio = radioService(core);
  return present([
    await upstreamDoor(core, radio),
    await serialDoor(core, radio),
    await mqttDoor(core),
    radio,
    httpDoor(core, { radio, health: daemon.health }),
  ]);
}
