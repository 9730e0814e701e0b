import { createServer, type Server, type AddressInfo, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Aedes, type AedesPublishPacket, type AuthenticateError, type Client, type PublishPacket, type Subscription } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import { ServiceError, isServiceError } from '../../core/errors.js';
import { canCommand, type Principal } from '../../core/access.js';
import { RateLimiter } from '../../core/rate-limit.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { StatePipeline, StateEvent, RefusalEvent, AssetRefusal } from '../../ingest/ingest.js';
import { echoPayload, feedPayload } from '../../ingest/ingest.js';
import type { CommandRouter } from '../../commands/router.js';
import type { Registry } from '../../registry/registry.js';
import type { DeviceStateDecoder } from '../../ingest/decoders.js';
import { eventPayload, type DeviceEvent, type DeviceEvents } from '../../ingest/device-events.js';
import { hasMember, isPlainObject, parseJson, parseMqttAssetState } from '../../ingest/messages.js';
import type { MetricsRegistry, Counter, Histogram } from '../../ops/metrics.js';
import type { Logger } from '../../ops/logger.js';
import { maySubscribe } from '../../doors/mqtt/acl.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import { RetainedFeed, feedMessage } from '../../doors/mqtt/retained-feed.js';
import { MqttCommandSink } from '../../doors/mqtt/command-sink.js';
import { createFanout } from '../../doors/mqtt/fanout.js';
import { guardPacketSizes, PUBLISH_HEADER_ROOM, type PacketLimits, type PacketViolation } from '../../doors/mqtt/packet-guard.js';
import { assetTopic, errorsTopic, eventsTopic, filterMatches, parsePublishTopic, topicKind, type PublishTopic } from '../../doors/mqtt/topics.js';

export interface MqttDoorDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  pipeline: StatePipeline;
  registry: Registry;
  commands: CommandRouter;
  decoders: DeviceStateDecoder;
  /** Radio and delivery events, published on `device/<id>/events` (QoS 0). */
  events?: DeviceEvents;
  rateLimiter: RateLimiter;
  metrics: MetricsRegistry;
  logger: Logger;
  clock: Clock;
  /** Central role: sessions of `gateway:` tokens (docs/sync.md). Without it gateway tokens are refused. */
  gateways?: GatewaySessions;
}

export interface MqttPorts {
  mqtt: number;
  mqttTls?: number;
}

/** What the door knows about a connection once its token checked out. */
interface Session {
  principal: Principal;
}

type PublishCallback = (error?: Error | null) => void;

const noop = () => {};

/**
 * A counter by one label, counted in plain numbers on the hot path and added to the registry's
 * counter once a second (formatting Prometheus labels for every message costs more than the count).
 */
class LabelledCount {
  readonly #counts = new Map<string, number>();
  constructor(
    readonly counter: Counter,
    readonly label: string,
  ) {}

  inc(value: string): void {
    this.#counts.set(value, (this.#counts.get(value) ?? 0) + 1);
  }

  flush(): void {
    for (const [value, n] of this.#counts) if (n > 0) this.counter.inc({ [this.label]: value }, n);
    this.#counts.clear();
  }
}

/** The refusal of an unauthorized publish: aedes closes the connection when authorizePublish errs. */
class PublishNotAllowed extends Error {
  override name = 'PublishNotAllowed';
}

/** A packet MQTT 3.1.1 says the server must close the connection for (aedes closes it on this error). */
class ProtocolViolation extends Error {
  override name = 'ProtocolViolation';
}

function connectRefusal(code: 2 | 3 | 4 | 5, message: string): AuthenticateError {
  const err = new Error(message) as AuthenticateError;
  err.returnCode = code;
  return err;
}

function asBuffer(payload: Buffer | string): Buffer {
  return typeof payload === 'string' ? Buffer.from(payload) : payload;
}

/**
 * The MQTT door (docs/mqtt.md): an embedded aedes broker whose hooks turn publishes into pipeline
 * requests and enforce the token ACLs. Everything subscribers receive is published by the service
 * itself (echo and feed after the commit, commands through the router, errors, retained feed); the
 * packets clients publish are never forwarded as they are.
 */
export class MqttDoor {
  readonly #deps: MqttDoorDeps;
  readonly #sessions = new WeakMap<Client, Session>();
  readonly #byToken = new Map<string, Set<Client>>();
  readonly #byDevice = new Map<string, Set<Client>>();
  /** Sessions of application tokens: with the device's own sessions, the only possible feed/echo subscribers. */
  readonly #appClients = new Set<Client>();
  readonly retained = new RetainedFeed();
  readonly #servers: Server[] = [];
  #broker: Aedes | undefined;
  #sink: MqttCommandSink | undefined;
  /**
   * Client ids whose session authenticated but is not registered with the broker yet, so two
   * connections racing for one id are told apart like registered ones.
   */
  readonly #claimedIds = new Map<string, Client>();
  readonly #messagesIn: LabelledCount;
  readonly #messagesOut: LabelledCount;
  readonly #refused: LabelledCount;
  readonly #connections: LabelledCount;
  #flushTimer: NodeJS.Timeout | undefined;
  readonly #pubackSeconds: Histogram;
  /** Reports on `device/<id>/errors`, per device: a flood of bad messages must not become a flood of reports. */
  readonly #errorReports: RateLimiter;
  /** Reports held back by #errorReports since the device's last delivered one (told in the next one). */
  readonly #droppedReports = new Map<string, number>();
  readonly #reportsDropped: Counter;
  readonly #onState = (event: StateEvent) => this.#publishState(event);
  readonly #onRefused = (event: RefusalEvent) => this.#publishRefusal(event);
  readonly #onDeviceEvent = (deviceId: string, event: DeviceEvent) => {
    const topic = eventsTopic(deviceId);
    if (this.#hasSubscriber(deviceId, topic)) this.#publish(topic, eventPayload(event), 0);
  };

  /** Read per message from the live config: a config reload may change it. */
  get #payloadLimit(): number {
    return this.#deps.config.payloadLimit;
  }

  constructor(deps: MqttDoorDeps) {
    this.#deps = deps;
    this.#errorReports = new RateLimiter(deps.config.errorsPerSecond, deps.config.errorsBurst);
    const m = deps.metrics;
    m.gauge('outpost_mqtt_connections', 'MQTT connections open now', () => this.#broker?.connectedClients ?? 0);
    this.#connections = new LabelledCount(m.counter('outpost_mqtt_connections_total', 'MQTT connection attempts by result (accepted, refused)'), 'result');
    this.#messagesIn = new LabelledCount(m.counter('outpost_mqtt_messages_in_total', 'MQTT messages received, by topic kind'), 'kind');
    this.#messagesOut = new LabelledCount(m.counter('outpost_mqtt_messages_out_total', 'MQTT messages delivered to subscribers, by topic kind'), 'kind');
    this.#refused = new LabelledCount(m.counter('outpost_mqtt_refused_total', 'MQTT messages and subscriptions refused, by code'), 'code');
    this.#pubackSeconds = m.histogram('outpost_mqtt_puback_seconds', 'Time from a QoS 1 state publish to its PUBACK (includes the commit)', [
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
    ]);
    this.#reportsDropped = m.counter('outpost_mqtt_error_reports_dropped_total', 'Reports not published on device/<id>/errors because the device was over mqtt.errorsPerSecond');
    m.gauge('outpost_mqtt_retained_feed_messages', 'Latest feed messages held for new subscribers', () => this.retained.size);
  }

  async start(): Promise<MqttPorts> {
    const { config, catalog, pipeline, registry, commands, logger } = this.#deps;
    this.#loadRetained();
    let ticks = 0;
    this.#flushTimer = setInterval(() => {
      this.#flushCounts();
      if (++ticks % 60 === 0) this.#errorReports.sweep(this.#deps.clock.now());
    }, 1000).unref();
    const broker = await Aedes.createBroker({
      id: 'outpost',
      // Fan-out without aedes' default delivery queue, whose drain recursed into a stack overflow
      // (see fanout.ts).
      mq: createFanout(),
      // Slow or frozen subscribers are cut off instead of holding buffers forever.
      drainTimeout: 20_000,
      connectTimeout: 15_000,
      heartbeatInterval: 60_000,
      // MQTT 3.1 limits client ids to 23 characters; SDKs send longer ones and brokers accept them.
      // (aedes applies this to 3.1 only; #authenticate caps every version in bytes.)
      maxClientsIdLength: config.maxClientIdBytes,
      preConnect: (_client, packet, done) => {
        // Sessions are always clean: commands reach only current subscribers (docs/mqtt.md), and
        // the service keeps no per-client queues in memory. CONNACK says "no session present".
        packet.clean = true;
        done(null, true);
      },
      authenticate: (client, username, _password, done) => this.#authenticate(client, username, done),
      authorizePublish: (client, packet, done) => this.#authorizePublish(client, packet, done),
      authorizeSubscribe: (client, sub, done) => this.#authorizeSubscribe(client, sub, done),
      authorizeForward: (client, packet) => this.#authorizeForward(packet, client),
    });
    this.#broker = broker;
    // Every packet a client publishes is consumed by the service (states go to the pipeline, commands
    // to the router, anything else is refused) and what subscribers get is re-published by it. aedes
    // would still route each client packet after authorizePublish calls back (a Packet, an offline
    // queue lookup and a topic match per message, for nobody: authorizeForward drops them anyway), so
    // publishes that come from a client stop here; the service's own publishes (no client) go through.
    const route = broker.publish.bind(broker) as (packet: PublishPacket, done: (err?: Error) => void) => void;
    (broker as unknown as { publish: unknown }).publish = (packet: PublishPacket, client: unknown, done?: (err?: Error) => void) => {
      if (typeof client === 'function') return route(packet, client as (err?: Error) => void);
      if (client == null) return route(packet, done ?? noop);
      done?.();
    };
    broker.on('client', (client) => this.#registerSession(client));
    broker.on('clientDisconnect', (client) => this.#unregisterSession(client));
    broker.on('subscribe', (subs, client) => {
      this.#deliverRetained(subs, client);
      this.#gatewaySubscribed(client);
    });
    broker.on('clientError', (client, err) => logger.debug({ clientId: client.id, err: err.message }, 'mqtt client error'));
    broker.on('connectionError', (_client, err) => logger.debug({ err: err.message }, 'mqtt connection error'));
    broker.on('error' as 'closed', (err?: unknown) => logger.error({ err }, 'mqtt broker error'));

    pipeline.on('state', this.#onState);
    pipeline.on('refused', this.#onRefused);
    this.#deps.events?.on('event', this.#onDeviceEvent);
    registry.on('tokenRevoked', this.#onTokenRevoked);
    registry.on('assetDeleted', this.#onAssetDeleted);
    registry.on('deviceDeleted', this.#onDeviceDeleted);
    catalog.on('externalChange', this.#onExternalChange);
    this.#sink = new MqttCommandSink(broker, this.#byDevice);
    commands.addSink(this.#sink);

    const accept = (socket: Socket) => this.#accept(socket);
    const plain = createServer(accept);
    this.#servers.push(plain);
    const ports: MqttPorts = { mqtt: await listen(plain, config.port, config.host) };
    if (config.tls.enabled) {
      if (!config.tls.cert || !config.tls.key) throw new Error('mqtt.tls.enabled needs mqtt.tls.cert and mqtt.tls.key');
      const secure = createTlsServer({ cert: readFileSync(config.tls.cert), key: readFileSync(config.tls.key) }, accept);
      this.#servers.push(secure as unknown as Server);
      ports.mqttTls = await listen(secure as unknown as Server, config.tls.port, config.host);
    }
    return ports;
  }

  /** Stops accepting, closes every session (in-flight states still commit: the daemon flushes after). */
  async stop(): Promise<void> {
    const { catalog, pipeline, registry } = this.#deps;
    const closed = this.#servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
    if (this.#broker) {
      const broker = this.#broker;
      await new Promise<void>((resolve) => broker.close(() => resolve()));
    }
    await Promise.all(closed);
    clearInterval(this.#flushTimer);
    this.#flushCounts();
    pipeline.off('state', this.#onState);
    pipeline.off('refused', this.#onRefused);
    this.#deps.events?.off('event', this.#onDeviceEvent);
    registry.off('tokenRevoked', this.#onTokenRevoked);
    registry.off('assetDeleted', this.#onAssetDeleted);
    registry.off('deviceDeleted', this.#onDeviceDeleted);
    catalog.off('externalChange', this.#onExternalChange);
  }

  #flushCounts(): void {
    for (const c of [this.#connections, this.#messagesIn, this.#messagesOut, this.#refused]) c.flush();
  }

  // ---- retained feed

  #loadRetained(): void {
    const { catalog } = this.#deps;
    for (const latest of catalog.store.states.allLatest()) {
      const asset = catalog.assetById(latest.assetId);
      if (!asset) continue;
      this.retained.offer(asset.deviceId, asset.name, latest.at, latest.valueJson);
    }
  }

  #deliverRetained(subs: Subscription[], client: Client): void {
    const sent = new Set<string>();
    for (const sub of subs) {
      if ((sub.qos as number) === 128) continue;
      for (const message of this.retained.matching(sub.topic)) {
        if (sent.has(message.topic)) continue;
        sent.add(message.topic);
        client.publish({ cmd: 'publish', topic: message.topic, payload: Buffer.from(feedMessage(message)), qos: Math.min(sub.qos, 1) as 0 | 1, retain: true, dup: false }, noop);
      }
    }
  }

  // ---- sessions

  /** A new connection: its packets are size-checked from their headers on, then aedes takes it. */
  #accept(socket: Socket): void {
    // From the live config (a reload may change payloadLimit), fixed for the connection's lifetime.
    const { connectPacketLimit, payloadLimit } = this.#deps.config;
    const limits: PacketLimits = { connect: connectPacketLimit, packet: payloadLimit + PUBLISH_HEADER_ROOM };
    guardPacketSizes(socket, limits, (violation) => this.#packetTooLarge(socket, violation));
    this.#broker!.handle(socket, undefined as never);
  }

  #packetTooLarge(socket: Socket, violation: PacketViolation): void {
    this.#refused.inc('PACKET_TOO_LARGE');
    const client = (socket as unknown as { client?: Client }).client;
    this.#deps.logger.warn(
      { clientId: client?.id ?? undefined, remote: socket.remoteAddress, packetType: violation.type, length: violation.length, limit: violation.limit },
      violation.length < 0 ? 'mqtt packet with a malformed length: connection closed' : 'mqtt packet over its size limit: connection closed',
    );
  }

  #authenticate(client: Client, username: string | undefined, done: (error: AuthenticateError | null, success: boolean | null) => void): void {
    try {
      this.#authenticateUnguarded(client, username, done);
    } catch (err) {
      // e.g. the store cannot be read: CONNACK 3, "server unavailable", and the client retries later.
      this.#deps.logger.error({ err, clientId: client.id }, 'mqtt connection failed inside the gateway');
      done(connectRefusal(3, 'server unavailable'), null);
    }
  }

  #authenticateUnguarded(client: Client, username: string | undefined, done: (error: AuthenticateError | null, success: boolean | null) => void): void {
    const principal = username ? this.#deps.catalog.principalForSecret(username) : undefined;
    if (!principal) {
      this.#connections.inc('refused');
      // The password is never looked at, and neither it nor the user name is logged.
      this.#deps.logger.info({ clientId: client.id, remote: client.conn && (client.conn as { remoteAddress?: string }).remoteAddress }, 'mqtt connection refused: unknown or revoked token');
      done(connectRefusal(4, 'bad user name or password'), null);
      return;
    }
    if (principal.kind === 'gateway' && !this.#deps.gateways) {
      this.#connections.inc('refused');
      done(connectRefusal(5, 'gateway tokens connect only to a central instance'), null);
      return;
    }
    const idProblem = this.#clientIdProblem(client, principal);
    if (idProblem) {
      this.#connections.inc('refused');
      this.#deps.logger.info({ clientId: client.id.slice(0, 64), tokenId: principal.tokenId }, `mqtt connection refused: ${idProblem}`);
      done(connectRefusal(2, idProblem), null);
      return;
    }
    this.#claimedIds.set(client.id, client);
    // A session that never registers (closed during the handshake) must not keep its claim.
    client.conn.once('close', () => {
      if (this.#claimedIds.get(client.id) === client) this.#claimedIds.delete(client.id);
    });
    this.#sessions.set(client, { principal });
    this.#connections.inc('accepted');
    done(null, true);
  }

  /**
   * Why a client id is refused (CONNACK 2): too long, a NUL in it, or held by a live session of
   * another principal. MQTT lets a new connection take over the session of its client id; across
   * principals that would let any device disconnect any other by using its id, so only the same
   * principal (the same device, or the same application token) may take over.
   */
  #clientIdProblem(client: Client, principal: Principal): string | undefined {
    const id = client.id;
    const limit = this.#deps.config.maxClientIdBytes;
    if (Buffer.byteLength(id) > limit) return `client id longer than ${limit} bytes`;
    if (id.includes('\u0000')) return 'client id contains U+0000';
    const registered = (this.#broker as unknown as { clients: Record<string, Client | undefined> } | undefined)?.clients[id];
    const holders = [registered, this.#claimedIds.get(id)];
    for (const holder of holders) {
      if (!holder || holder === client || holder.closed) continue;
      const other = this.#sessions.get(holder)?.principal;
      if (other && !samePrincipal(other, principal)) return 'client id in use by another token';
    }
    return undefined;
  }

  #registerSession(client: Client): void {
    if (this.#claimedIds.get(client.id) === client) this.#claimedIds.delete(client.id);
    const session = this.#sessions.get(client);
    if (!session) return;
    const { principal } = session;
    addTo(this.#byToken, principal.tokenId, client);
    if (principal.deviceId) addTo(this.#byDevice, principal.deviceId, client);
    if (principal.kind === 'app') this.#appClients.add(client);
    if (principal.kind === 'gateway') this.#deps.gateways?.opened(principal, client);
    this.#deps.logger.debug({ clientId: client.id, tokenId: principal.tokenId, kind: principal.kind }, 'mqtt session opened');
  }

  #unregisterSession(client: Client): void {
    const session = this.#sessions.get(client);
    if (!session) return;
    removeFrom(this.#byToken, session.principal.tokenId, client);
    if (session.principal.deviceId) removeFrom(this.#byDevice, session.principal.deviceId, client);
    this.#appClients.delete(client);
    if (session.principal.kind === 'gateway') this.#deps.gateways?.closed(session.principal, client);
  }

  /**
   * Whether a session holds a filter matching this topic of the device: only its own sessions and
   * applications' may (the ACL). Publishing through aedes costs a packet, a persistence lookup and a
   * routing match per message; the common cases — nobody subscribed, or a device subscribed to its
   * commands only — skip all of that for the echo, feed and errors messages nobody would get.
   */
  #hasSubscriber(deviceId: string, topic: string): boolean {
    const own = this.#byDevice.get(deviceId);
    if (own) for (const client of own) if (subscribedTo(client, topic)) return true;
    for (const client of this.#appClients) if (subscribedTo(client, topic)) return true;
    return false;
  }

  /** Revoking a token ends its live sessions (HTTP/daemon-side revocations). */
  readonly #onTokenRevoked = (tokenId: string) => {
    setImmediate(() => this.#closeToken(tokenId, 'token revoked'));
  };

  readonly #onAssetDeleted = (asset: { deviceId: string; name: string }) => this.retained.removeAsset(asset.deviceId, asset.name);
  readonly #onDeviceDeleted = (deviceId: string) => this.retained.removeDevice(deviceId);

  /** The CLI committed from another process: recheck the live sessions' tokens and the retained feed. */
  readonly #onExternalChange = () => {
    setImmediate(() => {
      const { catalog } = this.#deps;
      for (const tokenId of [...this.#byToken.keys()]) {
        if (!catalog.isTokenLive(tokenId)) this.#closeToken(tokenId, 'token revoked');
      }
      for (const message of [...this.retained.matching('device/#')]) {
        const [, deviceId, , name] = message.topic.split('/');
        if (!catalog.assetByName(deviceId!, name!)) this.retained.removeAsset(deviceId!, name!);
      }
    });
  };

  #closeToken(tokenId: string, reason: string): void {
    const clients = this.#byToken.get(tokenId);
    if (!clients) return;
    this.#byToken.delete(tokenId);
    for (const client of clients) {
      this.#deps.logger.info({ clientId: client.id, tokenId }, `mqtt session closed: ${reason}`);
      client.close();
    }
  }

  // ---- publishes from clients

  /** aedes calls its hooks without a try/catch: anything thrown in one would end the process. */
  #authorizePublish(client: Client | null, packet: PublishPacket, done: PublishCallback): void {
    try {
      this.#authorizePublishUnguarded(client, packet, done);
    } catch (err) {
      this.#deps.logger.error({ err, clientId: client?.id, topic: packet.topic }, 'mqtt publish failed inside the gateway: connection closed');
      done(err instanceof Error ? err : new Error(String(err)));
    }
  }

  #authorizePublishUnguarded(client: Client | null, packet: PublishPacket, done: PublishCallback): void {
    const session = client && this.#sessions.get(client);
    if (!client || !session) {
      done(new PublishNotAllowed('no session'));
      return;
    }
    // MQTT 3.1.1 §2.3.1 and §4.7.3: the server closes the connection for these.
    if (packet.qos > 0 && !packet.messageId) return this.#protocolViolation(client, session.principal, packet.topic, `QoS ${packet.qos} publish with packet id 0`, done);
    if (packet.topic.includes('\u0000')) return this.#protocolViolation(client, session.principal, packet.topic, 'topic name contains U+0000', done);
    // Nothing a client publishes is stored as a broker retained message: the feed is the retained view.
    const gateways = this.#deps.gateways;
    if (gateways && packet.topic.startsWith('gateway/')) {
      // A gateway's catalog and status (central role): handled there, refused for anyone else.
      const refusal = gateways.publish(session.principal, packet.topic, asBuffer(packet.payload));
      if (refusal) return this.#notAllowed(client, session.principal, packet, refusal, done);
      return done(null);
    }
    packet.retain = false;
    const topic = parsePublishTopic(packet.topic);
    switch (topic.kind) {
      case 'asset-state':
      case 'asset-state-by-id':
      case 'device-state':
        this.#messagesIn.inc(topic.kind);
        this.#statePublish(client, session.principal, packet, topic, done);
        return;
      case 'asset-command':
      case 'asset-command-by-id':
      case 'device-command':
        this.#messagesIn.inc(topic.kind);
        this.#commandPublish(client, session.principal, packet, topic, done);
        return;
      default:
        this.#messagesIn.inc('other');
        this.#notAllowed(client, session.principal, packet, 'no such topic', done);
    }
  }

  #protocolViolation(client: Client, principal: Principal, topic: string, why: string, done: (error: Error) => void): void {
    this.#refused.inc('PROTOCOL_VIOLATION');
    this.#deps.logger.warn({ clientId: client.id, tokenId: principal.tokenId, topic: topic.slice(0, 256), why }, 'mqtt protocol violation: connection closed');
    done(new ProtocolViolation(why));
  }

  #notAllowed(client: Client, principal: Principal, packet: PublishPacket, why: string, done: PublishCallback): void {
    this.#refused.inc('FORBIDDEN');
    this.#deps.logger.warn({ clientId: client.id, tokenId: principal.tokenId, topic: packet.topic, why }, 'mqtt publish not allowed: connection closed');
    done(new PublishNotAllowed(`publish to ${packet.topic} not allowed: ${why}`));
  }

  /** A refusal the door detects before the pipeline (limits, unknown asset id): reported like the pipeline's. */
  #refuse(deviceId: string, topic: string, err: ServiceError): void {
    this.#refused.inc(err.code);
    this.#deps.pipeline.reportRefusal(deviceId, topic, err);
  }

  #statePublish(
    client: Client,
    principal: Principal,
    packet: PublishPacket,
    topic: Extract<PublishTopic, { kind: 'asset-state' | 'asset-state-by-id' | 'device-state' }>,
    done: PublishCallback,
  ): void {
    const { catalog, pipeline, rateLimiter, clock, decoders } = this.#deps;
    if (principal.kind === 'gateway') {
      // A state of a device behind this gateway: the device's own rights, no per-token rate limit
      // (a backlog drain must not be throttled into loss). One of another gateway's devices is
      // acknowledged and reported on the gateway's errors topic, so the link keeps draining.
      const deviceId = topic.kind === 'asset-state-by-id' ? catalog.assetById(topic.assetId)?.deviceId : topic.deviceId;
      if (!deviceId || !this.#deps.gateways!.mayPublishState(principal, deviceId, packet.topic)) return done(null);
      const size = asBuffer(packet.payload).length;
      if (size > this.#payloadLimit) {
        this.#refuse(deviceId, packet.topic, new ServiceError('PAYLOAD_TOO_LARGE', `payload of ${size} bytes is over the limit of ${this.#payloadLimit}`));
        return done(null);
      }
      return this.#storeState(client, principal, packet, topic, deviceId, done);
    }
    const own = principal.kind === 'device' ? principal.deviceId : null;
    if (!own) return this.#notAllowed(client, principal, packet, 'only a device token publishes states', done);
    if (topic.kind === 'asset-state-by-id') {
      const asset = catalog.assetById(topic.assetId);
      if (!asset) {
        this.#refuse(own, packet.topic, new ServiceError('ASSET_NOT_FOUND', `asset ${topic.assetId} not found`));
        return done(null);
      }
      if (asset.deviceId !== own) return this.#notAllowed(client, principal, packet, 'asset of another device', done);
    } else if (topic.deviceId !== own) {
      return this.#notAllowed(client, principal, packet, 'topic of another device', done);
    }
    const payload = asBuffer(packet.payload);
    if (payload.length > this.#payloadLimit) {
      this.#refuse(own, packet.topic, new ServiceError('PAYLOAD_TOO_LARGE', `payload of ${payload.length} bytes is over the limit of ${this.#payloadLimit}`));
      return done(null);
    }
    const wait = rateLimiter.take(principal.tokenId, clock.now());
    if (wait > 0) {
      this.#refuse(own, packet.topic, new ServiceError('RATE_LIMITED', `token over its rate limit; retry in ${wait} s`, { retryAfter: wait }));
      return done(null);
    }
    this.#storeState(client, principal, packet, topic, own, done);
  }

  /** Hands an authorized state publish to the pipeline; the PUBACK waits for the commit. */
  #storeState(
    client: Client,
    principal: Principal,
    packet: PublishPacket,
    topic: Extract<PublishTopic, { kind: 'asset-state' | 'asset-state-by-id' | 'device-state' }>,
    own: string,
    done: PublishCallback,
  ): void {
    const { pipeline, decoders } = this.#deps;
    const payload = asBuffer(packet.payload);
    const started = packet.qos > 0 ? performance.now() : 0;
    const acknowledge = () => {
      if (started) this.#pubackSeconds.observe((performance.now() - started) / 1000);
      done(null);
    };
    const failed = (err: unknown) => this.#stateFailed(client, principal, packet, own, err, done);
    if (topic.kind === 'device-state') {
      pipeline
        .publishDeviceState({
          principal,
          deviceId: own,
          decode: (device, receivedAt) => decoders.decodeByDeviceFormat(device, payload, 'device state', 'mqtt', receivedAt),
          source: 'mqtt',
          topic: packet.topic,
        })
        .then((outcome) => {
          for (const r of outcome.refused) this.#refused.inc(r.code);
          acknowledge();
        }, failed);
      return;
    }
    pipeline
      .publishAssetState({
        principal,
        target: topic.kind === 'asset-state' ? { deviceId: own, assetName: topic.assetName } : { assetId: topic.assetId },
        parse: (asset, limits) => parseMqttAssetState(payload, asset.profile.type, `asset "${asset.name}"`, limits.jsonDepth),
        echo: payload,
        source: 'mqtt',
        topic: packet.topic,
      })
      .then(acknowledge, failed);
  }

  /**
   * A state publish that did not go through. A refusal (ServiceError) is the client's message being
   * wrong: acknowledged, so a client that resends until acknowledged does not loop, and reported.
   * Anything else is a failure of the gateway itself (a bug, a damaged store): the state is not
   * stored, so it is not acknowledged either — the connection is closed, the only way MQTT 3.1.1 has
   * to say so, and the client resends the state after reconnecting. It is logged with its stack and
   * reported as INTERNAL (without the details, which are the gateway's business).
   */
  #stateFailed(client: Client, principal: Principal, packet: PublishPacket, own: string, err: unknown, done: PublishCallback): void {
    if (!isServiceError(err)) {
      this.#deps.logger.error({ err, clientId: client.id, tokenId: principal.tokenId, topic: packet.topic }, 'mqtt state publish failed inside the gateway: not stored, not acknowledged, connection closed');
      this.#refuse(own, packet.topic, new ServiceError('INTERNAL', 'internal error: the state was not stored and is not acknowledged (the connection is closed, so the client resends it); the gateway log has the details'));
      done(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    switch (err.code) {
      case 'FORBIDDEN':
        return this.#notAllowed(client, principal, packet, err.message, done);
      case 'STORAGE_UNAVAILABLE':
      case 'OUTBOX_FULL':
        // Not stored, so not acknowledged: the client resends after reconnecting.
        this.#refuse(own, packet.topic, err);
        this.#deps.logger.error({ clientId: client.id, topic: packet.topic, err: err.message }, 'mqtt state not stored: closing the connection');
        return done(err);
      default:
        // Bad input on an allowed topic: already reported on device/<id>/errors; acknowledged, not stored.
        this.#refused.inc(err.code);
        return done(null);
    }
  }

  #commandPublish(
    client: Client,
    principal: Principal,
    packet: PublishPacket,
    topic: Extract<PublishTopic, { kind: 'asset-command' | 'asset-command-by-id' | 'device-command' }>,
    done: PublishCallback,
  ): void {
    if (!canCommand(principal)) return this.#notAllowed(client, principal, packet, 'commands need an application token with the "command" scope', done);
    const { commands, catalog, logger } = this.#deps;
    const payload = asBuffer(packet.payload);
    try {
      if (payload.length > this.#payloadLimit) throw new ServiceError('PAYLOAD_TOO_LARGE', `payload of ${payload.length} bytes is over the limit of ${this.#payloadLimit}`);
      const body = parseJson(payload.toString('utf8'), 'command');
      if (topic.kind === 'device-command') {
        commands.sendDeviceCommand(principal, topic.deviceId, body, undefined, 'mqtt');
      } else {
        // A bare JSON value is the command's value, as a bare value is a state's value.
        const message = isPlainObject(body) && hasMember(body, 'value') ? body : { value: body };
        const target = topic.kind === 'asset-command' ? { deviceId: topic.deviceId, assetName: topic.assetName } : { assetId: topic.assetId };
        commands.sendAssetCommand(principal, target, message, 'mqtt');
      }
    } catch (err) {
      if (!isServiceError(err)) {
        logger.error({ err, clientId: client.id, topic: packet.topic }, 'mqtt command failed');
        return done(err instanceof Error ? err : new Error(String(err)));
      }
      this.#refused.inc(err.code);
      logger.info({ clientId: client.id, tokenId: principal.tokenId, topic: packet.topic, code: err.code, error: err.message }, 'mqtt command refused');
      const deviceId = 'deviceId' in topic ? topic.deviceId : catalog.assetById(topic.assetId)?.deviceId;
      if (deviceId && catalog.device(deviceId)) this.#publishError(deviceId, { at: this.#deps.clock.now(), topic: packet.topic, code: err.code, error: err.message });
    }
    done(null);
  }

  // ---- subscriptions

  #authorizeSubscribe(client: Client, sub: Subscription, done: (error: Error | null, subscription?: Subscription | null) => void): void {
    try {
      this.#authorizeSubscribeUnguarded(client, sub, done);
    } catch (err) {
      this.#deps.logger.error({ err, clientId: client.id, filter: sub.topic }, 'mqtt subscribe failed inside the gateway: connection closed');
      done(err instanceof Error ? err : new Error(String(err)));
    }
  }

  #authorizeSubscribeUnguarded(client: Client, sub: Subscription, done: (error: Error | null, subscription?: Subscription | null) => void): void {
    const session = this.#sessions.get(client);
    const { catalog, config } = this.#deps;
    if (session && sub.topic.includes('\u0000')) return this.#protocolViolation(client, session.principal, sub.topic, 'topic filter contains U+0000', done);
    // aedes adds each granted filter before the next one of the same SUBSCRIBE is looked at, so the
    // count is exact; a filter the client already holds (a QoS change) is not a new one.
    const subscriptions = (client as unknown as { subscriptions: Record<string, unknown> }).subscriptions;
    if (session && !(sub.topic in subscriptions) && countUpTo(subscriptions, config.maxSubscriptionsPerConnection) >= config.maxSubscriptionsPerConnection) {
      this.#deps.logger.info({ clientId: client.id, tokenId: session.principal.tokenId, limit: config.maxSubscriptionsPerConnection }, 'mqtt subscription refused: too many subscriptions');
      this.#refused.inc('TOO_MANY_SUBSCRIPTIONS');
      done(null, null);
      return;
    }
    const byGateways = session && this.#deps.gateways?.maySubscribe(session.principal, sub.topic);
    if (!session || !(byGateways ?? maySubscribe(session.principal, sub.topic, (assetId) => catalog.assetById(assetId)?.deviceId))) {
      this.#deps.logger.info({ clientId: client.id, tokenId: session?.principal.tokenId, filter: sub.topic }, 'mqtt subscription refused');
      this.#refused.inc('SUBSCRIBE_FORBIDDEN');
      done(null, null); // SUBACK 0x80, the connection stays
      return;
    }
    // QoS 0 and 1 (docs/mqtt.md); a QoS 2 request is granted QoS 1.
    if (sub.qos > 1) sub.qos = 1;
    done(null, sub);
  }

  /** Client packets are never forwarded as published: subscribers get what the service publishes. */
  #authorizeForward(packet: AedesPublishPacket, client: Client | null): AedesPublishPacket | null {
    if ((packet as { clientId?: string }).clientId !== undefined) return null;
    // A gateway's wildcard subscriptions deliver only its own devices' messages.
    if (client && this.#deps.gateways && !this.#deps.gateways.mayReceive(this.#sessions.get(client)?.principal, packet.topic)) return null;
    this.#messagesOut.inc(topicKind(packet.topic));
    return packet;
  }

  #gatewaySubscribed(client: Client): void {
    const session = this.#sessions.get(client);
    if (session?.principal.kind === 'gateway') this.#deps.gateways?.subscribed(session.principal);
  }

  /** For the central's gateway sessions: publish as the service (status retained, queued commands, errors). */
  publishAsService(topic: string, payload: string, retain: boolean): void {
    this.#broker?.publish({ cmd: 'publish', topic, payload: Buffer.from(payload), qos: 1, retain, dup: false }, noop);
  }

  // ---- what the service publishes

  #publish(topic: string, payload: Buffer | string, qos: 0 | 1): void {
    this.#broker?.publish({ cmd: 'publish', topic, payload: asBuffer(payload), qos, retain: false, dup: false }, noop);
  }

  /** After the commit: the echo (exact bytes) and the feed message; the feed also becomes the retained one. */
  #publishState(event: StateEvent): void {
    const deviceId = event.device.id;
    const name = event.asset.name;
    this.retained.offer(deviceId, name, event.at, event.valueJson);
    const echo = assetTopic(deviceId, name, 'state');
    // A re-decode's correction is a feed message only: the device sent nothing to echo.
    if (!event.correction && this.#hasSubscriber(deviceId, echo)) this.#publish(echo, echoPayload(event), 1);
    const feed = assetTopic(deviceId, name, 'feed');
    if (this.#hasSubscriber(deviceId, feed)) this.#publish(feed, feedPayload(event), 1);
  }

  #publishRefusal(event: RefusalEvent): void {
    this.#publishError(event.deviceId, event);
  }

  /**
   * One message on `device/<id>/errors`, if anyone could be subscribed and the device is within
   * mqtt.errorsPerSecond; the next delivered report says how many were held back (`dropped`).
   */
  #publishError(deviceId: string, error: { at: number; topic: string; code: string; error: string; assets?: AssetRefusal[]; more?: number }): void {
    const topic = errorsTopic(deviceId);
    if (!this.#hasSubscriber(deviceId, topic)) return;
    if (this.#errorReports.take(deviceId, this.#deps.clock.now()) > 0) {
      this.#droppedReports.set(deviceId, (this.#droppedReports.get(deviceId) ?? 0) + 1);
      this.#reportsDropped.inc();
      return;
    }
    const report: Record<string, unknown> = { at: new Date(error.at).toISOString(), topic: error.topic, code: error.code, error: error.error };
    if (error.assets && error.assets.length > 1) report.assets = error.assets;
    if (error.more) report.more = error.more;
    const dropped = this.#droppedReports.get(deviceId);
    if (dropped) {
      report.dropped = dropped;
      this.#droppedReports.delete(deviceId);
    }
    this.#publish(topic, JSON.stringify(report), 1);
  }
}

/** Whether two principals are the same client for MQTT session takeover: the same device, or the same token. */
function samePrincipal(a: Principal, b: Principal): boolean {
  if (a.deviceId || b.deviceId) return a.deviceId === b.deviceId;
  return a.tokenId === b.tokenId;
}

/** The number of own keys of an object, counted no further than `limit`. */
function countUpTo(obj: object, limit: number): number {
  let n = 0;
  for (const _ in obj) if (++n >= limit) break;
  return n;
}

function subscribedTo(client: Client, topic: string): boolean {
  for (const filter in (client as unknown as { subscriptions: object }).subscriptions) if (filterMatches(filter, topic)) return true;
  return false;
}

function addTo(map: Map<string, Set<Client>>, key: string, client: Client): void {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(client);
}

function removeFrom(map: Map<string, Set<Client>>, key: string, client: Client): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(client);
  if (set.size === 0) map.delete(key);
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
