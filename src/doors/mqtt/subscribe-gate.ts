import type { AedesPublishPacket, Client, Subscription } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import type { Catalog } from '../../store/catalog.js';
import type { Logger } from '../../ops/logger.js';
import { maySubscribe } from '../../doors/mqtt/acl.js';
import { DeliveryBatch } from '../../doors/mqtt/delivery-batch.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import type { Refusals } from '../../doors/mqtt/refusals.js';
import type { MqttSessions } from '../../doors/mqtt/sessions.js';
import type { SubscriptionIndex } from '../../doors/mqtt/subscriptions.js';
import { topicKind } from '../../wire/topics.js';

type SubscribeDone = (error: Error | null, subscription?: Subscription | null) => void;

export interface SubscribeGateDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  logger: Logger;
  metrics: MqttMetrics;
  sessions: MqttSessions;
  subscriptions: SubscriptionIndex;
  refusals: Refusals;
  gateways?: GatewaySessions;
}

/**
 * aedes' `authorizeSubscribe` and `authorizeForward` hooks: who may subscribe to what (the rules
 * are acl.ts's), the per-connection subscription limit, and the last word on each delivery. Keeps
 * the subscription index (subscriptions.ts) in step with what was granted. The deliveries it lets
 * through to one connection in a turn go out in one write (delivery-batch.ts).
 */
export class SubscribeGate {
  readonly #deps: SubscribeGateDeps;
  readonly #deliveries = new DeliveryBatch();

  constructor(deps: SubscribeGateDeps) {
    this.#deps = deps;
  }

  /** aedes calls its hooks without a try/catch: anything thrown in one would end the process. */
  readonly authorizeSubscribe = (client: Client, sub: Subscription, done: SubscribeDone): void => {
    try {
      this.#decide(client, sub, done);
    } catch (err) {
      this.#deps.logger.error({ err, clientId: client.id, filter: sub.topic }, 'mqtt subscribe failed inside the gateway: connection closed');
      done(err instanceof Error ? err : new Error(String(err)));
    }
  };

  #decide(client: Client, sub: Subscription, done: SubscribeDone): void {
    const { catalog, config, logger, metrics, subscriptions, gateways } = this.#deps;
    const principal = this.#deps.sessions.principal(client);
    if (principal && sub.topic.includes('\u0000')) return this.#deps.refusals.protocolViolation(client, principal, sub.topic, 'topic filter contains U+0000', done);
    // A filter the client already holds (a QoS change) is not a new one.
    const limit = config.maxSubscriptionsPerConnection;
    if (principal && !subscriptions.holds(client, sub.topic) && subscriptions.count(client) >= limit) {
      logger.info({ clientId: client.id, tokenId: principal.tokenId, limit }, 'mqtt subscription refused: too many subscriptions');
      metrics.refused.inc('TOO_MANY_SUBSCRIPTIONS');
      done(null, null);
      return;
    }
    const byGateways = principal && gateways?.maySubscribe(principal, sub.topic);
    if (!principal || !(byGateways ?? maySubscribe(principal, sub.topic, (assetId) => catalog.assetById(assetId)?.deviceId))) {
      logger.info({ clientId: client.id, tokenId: principal?.tokenId, filter: sub.topic }, 'mqtt subscription refused');
      metrics.refused.inc('SUBSCRIBE_FORBIDDEN');
      done(null, null); // SUBACK 0x80, the connection stays
      return;
    }
    // QoS 0 and 1 (docs/mqtt.md); a QoS 2 request is granted QoS 1.
    if (sub.qos > 1) sub.qos = 1;
    // Indexed now, not on aedes' `subscribe` event: aedes adds this filter before it asks about the
    // next one of the same SUBSCRIBE, so the limit above counts exactly as aedes does.
    subscriptions.add(client, principal, sub.topic);
    done(null, sub);
  }

  /** UNSUBSCRIBE (aedes' `unsubscribe` event). */
  unsubscribed(client: Client, filters: readonly string[]): void {
    for (const filter of filters) this.#deps.subscriptions.remove(client, filter);
  }

  /** Client packets are never forwarded as published: subscribers get what the service publishes. */
  readonly authorizeForward = (client: Client | null, packet: AedesPublishPacket): AedesPublishPacket | null => {
    if ((packet as { clientId?: string }).clientId !== undefined) return null;
    // A gateway's wildcard subscriptions deliver only its own devices' messages.
    const gateways = this.#deps.gateways;
    if (client && gateways && !gateways.mayReceive(this.#deps.sessions.principal(client), packet.topic)) return null;
    this.#deps.metrics.messagesOut.inc(topicKind(packet.topic));
    this.#deliveries.hold(client);
    return packet;
  };
}
