import type { Aedes, PublishPacket } from 'aedes';

type Done = (err?: Error) => void;

const noop = () => {};

/**
 * Stops aedes from routing the packets clients publish; the service's own publishes (no client)
 * are routed as before. The one place the door replaces a method of aedes, because aedes 1.2.0 has
 * no hook for it:
 *
 * Every packet a client publishes is consumed by the door in `authorizePublish` (publish-intake.ts:
 * states to the pipeline, commands to the router) and what subscribers get is published by the
 * service (echo, feed, commands). After `authorizePublish` calls back, aedes' publish handler
 * (lib/handlers/publish.js `enqueuePublish`) writes the PUBACK and calls `broker.publish(packet,
 * client)`, which always runs the whole route (aedes.js `publishFuncsQoS`): a new aedes-packet, the
 * retained-store step, `enqueueOffline` (a persistence `subscriptionsByTopic` match and an
 * `outgoingEnqueueCombi`, two promises), the mqemitter match, and the `published` hook and event —
 * for nobody, since `authorizeForward` (subscribe-gate.ts) drops client packets anyway. Measured on
 * this code base (aedes 1.2.0, the door's fan-out emitter, 300 000 publishes pipelined 100 at a time,
 * no subscriber): 1.2 µs of CPU per QoS 1 message and 0.7 µs per QoS 0 message, about 15 % of
 * mosquitto's whole cost per QoS 1 message in bench/mqtt.ts. The supported alternatives do not
 * remove it: an error from `authorizePublish` closes the connection (aedes documents it so, after MQTT-3.3.5-2;
 * and aedes issue #210: "there is none in MQTT 3.1.1"); the `published` hook runs after the route;
 * a custom `mq` that drops client packets still pays the packet and the offline-queue lookup
 * (0.8–1.0 µs per QoS 1 message, measured the same way).
 *
 * aedes calls `publish(packet, client, done)` for client packets (and wills) and
 * `publish(packet, done)` for its own ($SYS) and the service's; both forms stay as documented.
 */
export function consumeClientPublishes(broker: Aedes): void {
  const route = broker.publish.bind(broker) as (packet: PublishPacket, done: Done) => void;
  (broker as unknown as { publish: unknown }).publish = (packet: PublishPacket, client: unknown, done?: Done) => {
    if (typeof client === 'function') return route(packet, client as Done);
    if (client == null) return route(packet, done ?? noop);
    done?.();
  };
}
