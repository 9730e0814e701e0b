import type { Aedes } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import type { RateLimiter } from '../../core/rate-limit.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { StateReads } from '../../store/state-reads.js';
import type { StatePipeline } from '../../ingest/ingest.js';
import type { CommandRouter } from '../../commands/router.js';
import type { Registry } from '../../registry/registry.js';
import type { DeviceEvents } from '../../ingest/device-events.js';
import type { MetricsRegistry } from '../../ops/metrics.js';
import type { Logger } from '../../ops/logger.js';
import type { Door } from '../../doors/door.js';
import { createBroker, MqttListeners, type BrokerCluster, type MqttPorts } from '../../doors/mqtt/broker.js';
import { consumeClientPublishes } from '../../doors/mqtt/client-publishes.js';
import { MqttCommandSink } from '../../doors/mqtt/command-sink.js';
import { CommandIntake } from '../../doors/mqtt/command-intake.js';
import { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import { PublishIntake } from '../../doors/mqtt/publish-intake.js';
import { Refusals } from '../../doors/mqtt/refusals.js';
import { RetainedFeed, deliverRetained, loadRetained, pruneRetained } from '../../doors/mqtt/retained-feed.js';
import { ServicePublisher } from '../../doors/mqtt/service-publisher.js';
import { MqttSessions } from '../../doors/mqtt/sessions.js';
import { StateIntake } from '../../doors/mqtt/state-intake.js';
import { SubscribeGate } from '../../doors/mqtt/subscribe-gate.js';
import { SubscriptionIndex } from '../../doors/mqtt/subscriptions.js';

export type { MqttPorts } from '../../doors/mqtt/broker.js';

export interface MqttDoorDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  /** Latest states, read once at start to rebuild the retained feed. */
  states: StateReads;
  pipeline: StatePipeline;
  registry: Registry;
  commands: CommandRouter;
  /** Radio and delivery events, published on `device/<id>/events` (QoS 0). */
  events?: DeviceEvents;
  rateLimiter: RateLimiter;
  metrics: MetricsRegistry;
  logger: Logger;
  clock: Clock;
  /** Central role: sessions of `gateway:` tokens (docs/sync.md). Without it gateway tokens are refused. */
  gateways?: GatewaySessions;
  /** Several central nodes (docs/scale-out.md): the broker's messages and persistence through Redis. */
  cluster?: BrokerCluster;
}

/**
 * The MQTT door (docs/mqtt.md; how it is built: docs/architecture.md, "MQTT door"): an embedded
 * aedes broker whose hooks turn publishes into pipeline requests and enforce the token ACLs.
 * Everything subscribers receive is published by the service itself (echo and feed after the
 * commit, commands through the router, errors, retained feed); the packets clients publish are
 * never forwarded as they are. This class only composes the parts and runs their lifecycle.
 */
export class MqttDoor implements Door {
  readonly name = 'mqtt';
  readonly #deps: MqttDoorDeps;
  readonly retained = new RetainedFeed();
  readonly #metrics: MqttMetrics;
  readonly #subscriptions = new SubscriptionIndex();
  readonly #sessions: MqttSessions;
  readonly #publisher: ServicePublisher;
  readonly #gate: SubscribeGate;
  readonly #intake: PublishIntake;
  readonly #listeners: MqttListeners;
  #broker: Aedes | undefined;
  #flushTimer: NodeJS.Timeout | undefined;

  constructor(deps: MqttDoorDeps) {
    this.#deps = deps;
    const { config, catalog, logger, clock, gateways } = deps;
    const metrics = new MqttMetrics(deps.metrics, { connections: () => this.#broker?.connectedClients ?? 0, retained: () => this.retained.size });
    this.#metrics = metrics;
    const subscriptions = this.#subscriptions;
    this.#sessions = new MqttSessions({ config, catalog, logger, metrics, subscriptions, gateways });
    this.#publisher = new ServicePublisher({ config, clock, metrics, subscriptions, retained: this.retained, everywhere: deps.cluster !== undefined });
    const refusals = new Refusals({ pipeline: deps.pipeline, logger, metrics });
    const sessions = this.#sessions;
    this.#gate = new SubscribeGate({ config, catalog, logger, metrics, sessions, subscriptions, refusals, gateways });
    const states = new StateIntake({ ...deps, metrics, refusals });
    const commands = new CommandIntake({ config, catalog, commands: deps.commands, logger, metrics, refusals });
    this.#intake = new PublishIntake({ sessions, states, commands, refusals, logger, metrics, gateways });
    this.#listeners = new MqttListeners(config, logger, metrics);
  }

  async start(): Promise<MqttPorts> {
    const { config, catalog, pipeline, registry, commands, logger } = this.#deps;
    await loadRetained(this.retained, catalog, this.#deps.states);
    let ticks = 0;
    this.#flushTimer = setInterval(() => {
      this.#metrics.flush();
      if (++ticks % 60 === 0) this.#publisher.sweep();
    }, 1000).unref();
    const sessions = this.#sessions;
    const broker = await createBroker(config, {
      authenticate: (client, username, _password, done) => sessions.authenticate(client, username, done),
      authorizePublish: this.#intake.authorizePublish,
      authorizeSubscribe: this.#gate.authorizeSubscribe,
      authorizeForward: this.#gate.authorizeForward,
    }, this.#deps.cluster);
    this.#broker = broker;
    if (this.#deps.cluster) this.#followFeeds(this.#deps.cluster);
    consumeClientPublishes(broker);
    this.#publisher.attach(broker);
    broker.on('client', (client) => sessions.opened(client));
    broker.on('clientDisconnect', (client) => sessions.closed(client));
    broker.on('subscribe', (subs, client) => {
      deliverRetained(this.retained, subs, client);
      const principal = sessions.principal(client);
      if (principal?.kind === 'gateway') this.#deps.gateways?.subscribed(principal);
    });
    broker.on('unsubscribe', (filters, client) => this.#gate.unsubscribed(client, filters));
    broker.on('clientError', (client, err) => logger.debug({ clientId: client.id, err: err.message }, 'mqtt client error'));
    broker.on('connectionError', (_client, err) => logger.debug({ err: err.message }, 'mqtt connection error'));
    broker.on('error' as 'closed', (err?: unknown) => logger.error({ err }, 'mqtt broker error'));

    pipeline.on('state', this.#publisher.onState);
    pipeline.on('refused', this.#publisher.onRefused);
    commands.on('refused', this.#publisher.onRefused);
    this.#deps.events?.on('event', this.#publisher.onDeviceEvent);
    registry.on('tokenRevoked', this.#onTokenRevoked);
    registry.on('assetDeleted', this.#onAssetDeleted);
    registry.on('deviceDeleted', this.#onDeviceDeleted);
    catalog.on('externalChange', this.#onExternalChange);
    commands.addSink(new MqttCommandSink(broker, this.#subscriptions));
    return this.#listeners.listen(broker);
  }

  /** Stops accepting, closes every session (in-flight states still commit: the daemon flushes after). */
  async stop(): Promise<void> {
    const { catalog, pipeline, registry, commands } = this.#deps;
    const closed = this.#listeners.close();
    if (this.#broker) {
      const broker = this.#broker;
      await new Promise<void>((resolve) => broker.close(() => resolve()));
    }
    await closed;
    clearInterval(this.#flushTimer);
    this.#metrics.flush();
    pipeline.off('state', this.#publisher.onState);
    pipeline.off('refused', this.#publisher.onRefused);
    commands.off('refused', this.#publisher.onRefused);
    this.#deps.events?.off('event', this.#publisher.onDeviceEvent);
    registry.off('tokenRevoked', this.#onTokenRevoked);
    registry.off('assetDeleted', this.#onAssetDeleted);
    registry.off('deviceDeleted', this.#onDeviceDeleted);
    catalog.off('externalChange', this.#onExternalChange);
  }

  /**
   * Several nodes: the feed messages other nodes publish keep this node's retained feed current,
   * so a new subscriber here gets the latest state whichever node stored it.
   */
  #followFeeds(cluster: BrokerCluster): void {
    cluster.mq!.on('device/+/asset/+/feed', (packet: { topic: string; payload?: unknown }, done: () => void) => {
      try {
        const [, deviceId, , name] = packet.topic.split('/');
        const message = JSON.parse(Buffer.from(packet.payload as Buffer).toString('utf8')) as { value: unknown; at: string };
        const at = Date.parse(message.at);
        if (deviceId && name && Number.isFinite(at)) this.retained.offer(deviceId, name, at, JSON.stringify(message.value));
      } catch {
        // Not a feed message of ours: nothing to keep.
      }
      done();
    });
  }

  /** For the central's gateway sessions: publish as the service (status retained, queued commands, errors). */
  publishAsService(topic: string, payload: string, retain: boolean): void {
    this.#publisher.publish(topic, payload, 1, retain);
  }

  /** Revoking a token ends its live sessions (HTTP/daemon-side revocations). */
  readonly #onTokenRevoked = (tokenId: string) => {
    setImmediate(() => this.#sessions.closeToken(tokenId, 'token revoked'));
  };

  readonly #onAssetDeleted = (asset: { deviceId: string; name: string }) => this.retained.removeAsset(asset.deviceId, asset.name);
  readonly #onDeviceDeleted = (deviceId: string) => this.retained.removeDevice(deviceId);

  /** The CLI committed from another process: recheck the live sessions' tokens and the retained feed. */
  readonly #onExternalChange = () => {
    setImmediate(() => {
      this.#sessions.closeRevoked();
      pruneRetained(this.retained, this.#deps.catalog);
    });
  };
}
