import type { Client, PublishPacket } from 'aedes';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import type { MqttSessions } from '../../doors/mqtt/sessions.js';
import { PublishNotAllowed, type Refusals } from '../../doors/mqtt/refusals.js';
import { payloadBytes, type PublishCallback, type StateIntake } from '../../doors/mqtt/state-intake.js';
import type { CommandIntake } from '../../doors/mqtt/command-intake.js';
import { parsePublishTopic } from '../../wire/topics.js';

export interface PublishIntakeDeps {
  sessions: MqttSessions;
  states: StateIntake;
  commands: CommandIntake;
  refusals: Refusals;
  logger: Logger;
  metrics: MqttMetrics;
  gateways?: GatewaySessions;
}

/**
 * aedes' `authorizePublish` hook: every packet a client publishes ends here. It is consumed by the
 * service — states go to the ingest pipeline, commands to the router, a gateway's own topics to the
 * central, anything else closes the connection — and never forwarded as it is (see
 * client-publishes.ts). For QoS 1 aedes writes the PUBACK when `done` is called without an error.
 */
export class PublishIntake {
  readonly #deps: PublishIntakeDeps;

  constructor(deps: PublishIntakeDeps) {
    this.#deps = deps;
  }

  /** aedes calls its hooks without a try/catch: anything thrown in one would end the process. */
  readonly authorizePublish = (client: Client | null, packet: PublishPacket, done: PublishCallback): void => {
    try {
      this.#dispatch(client, packet, done);
    } catch (err) {
      this.#deps.logger.error({ err, clientId: client?.id, topic: packet.topic }, 'mqtt publish failed inside the gateway: connection closed');
      done(err instanceof Error ? err : new Error(String(err)));
    }
  };

  #dispatch(client: Client | null, packet: PublishPacket, done: PublishCallback): void {
    const principal = client && this.#deps.sessions.principal(client);
    if (!client || !principal) {
      done(new PublishNotAllowed('no session'));
      return;
    }
    const { refusals, metrics, gateways } = this.#deps;
    // A last will is published by aedes on the client's behalf when its connection drops: it carries
    // no packet id (it never crossed the wire as a PUBLISH) and must not be taken for a violation.
    const isWill = packet === (client as { will?: unknown }).will;
    // MQTT 3.1.1 §2.3.1 and §4.7.3: the server closes the connection for these.
    if (packet.qos > 0 && !packet.messageId && !isWill) return refusals.protocolViolation(client, principal, packet.topic, `QoS ${packet.qos} publish with packet id 0`, done);
    if (packet.topic.includes('\u0000')) return refusals.protocolViolation(client, principal, packet.topic, 'topic name contains U+0000', done);
    if (gateways && (packet.topic.startsWith('gateway/') || (principal.kind === 'gateway' && packet.topic.endsWith('/events')))) {
      // A gateway's catalog, status, fleet reports and its devices' events (central role): handled
      // there, refused for anyone else.
      const refusal = gateways.publish(principal, packet.topic, payloadBytes(packet.payload));
      if (refusal) return refusals.notAllowed(client, principal, packet.topic, refusal, done);
      // Several central nodes: a catalog message is acknowledged once the other nodes can see what
      // it created (a node killed right after must not leave the next one refusing the device).
      const shared = gateways.shared?.();
      if (shared) return void shared.then(() => done(null), () => {});
      return done(null);
    }
    // Nothing a client publishes is stored as a broker retained message: the feed is the retained view.
    packet.retain = false;
    const topic = parsePublishTopic(packet.topic);
    switch (topic.kind) {
      case 'asset-state':
      case 'asset-state-by-id':
      case 'device-state':
        metrics.messagesIn.inc(topic.kind);
        return this.#deps.states.take(client, principal, packet, topic, done);
      case 'asset-command':
      case 'asset-command-by-id':
      case 'device-command':
        metrics.messagesIn.inc(topic.kind);
        return this.#deps.commands.take(client, principal, packet, topic, done);
      default:
        metrics.messagesIn.inc('other');
        refusals.notAllowed(client, principal, packet.topic, 'no such topic', done);
    }
  }
}
