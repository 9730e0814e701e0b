import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { readFileSync } from 'node:fs';
import { Aedes, type AedesOptions, type Client } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import { createFanout } from '../../doors/mqtt/fanout.js';
import { listen } from '../../doors/listen.js';
import { guardPacketSizes, PUBLISH_HEADER_ROOM, type PacketLimits, type PacketViolation } from '../../doors/mqtt/packet-guard.js';

/** Several central nodes (docs/scale-out.md): a broker id of its own, and the shared emitter and persistence. */
export interface BrokerCluster {
  id: string;
  mq: AedesOptions['mq'];
  persistence: unknown;
}

export type BrokerHooks = Pick<AedesOptions, 'authenticate' | 'authorizePublish' | 'authorizeSubscribe' | 'authorizeForward'>;

export type MqttPorts = {
  mqtt: number;
  mqttTls?: number;
};

/** The embedded aedes broker with the door's settings (docs/mqtt.md) and hooks. */
export function createBroker(config: OutpostConfig['mqtt'], hooks: BrokerHooks, cluster?: BrokerCluster): Promise<Aedes> {
  return Aedes.createBroker({
    id: cluster?.id ?? 'outpost',
    // Fan-out without aedes' default delivery queue, whose drain recursed into a stack overflow
    // (see fanout.ts). Several central nodes: the same, through Redis (docs/scale-out.md).
    mq: cluster?.mq ?? createFanout(),
    ...(cluster ? { persistence: cluster.persistence } : {}),
    // Slow or frozen subscribers are cut off instead of holding buffers forever.
    drainTimeout: 20_000,
    connectTimeout: 15_000,
    heartbeatInterval: 60_000,
    // MQTT 3.1 limits client ids to 23 characters; SDKs send longer ones and brokers accept them.
    // (aedes applies this to 3.1 only; sessions.ts caps every version in bytes.)
    maxClientsIdLength: config.maxClientIdBytes,
    preConnect: (_client, packet, done) => {
      // Sessions are always clean: commands reach only current subscribers (docs/mqtt.md), and
      // the service keeps no per-client queues in memory. CONNACK says "no session present".
      packet.clean = true;
      done(null, true);
    },
    ...hooks,
  });
}

/**
 * The door's listeners: mqtt.port, and mqtt.tls.port when TLS is on. Each connection's packets are
 * size-checked from their headers on (packet-guard.ts) before aedes parses them.
 */
export class MqttListeners {
  readonly #servers: Server[] = [];
  readonly #config: OutpostConfig['mqtt'];
  readonly #logger: Logger;
  readonly #metrics: MqttMetrics;

  constructor(config: OutpostConfig['mqtt'], logger: Logger, metrics: MqttMetrics) {
    this.#config = config;
    this.#logger = logger;
    this.#metrics = metrics;
  }

  async listen(broker: Aedes): Promise<MqttPorts> {
    const config = this.#config;
    const accept = (socket: Socket) => this.#accept(broker, socket);
    const plain = createServer(accept);
    this.#servers.push(plain);
    const ports: MqttPorts = { mqtt: await listen(plain, config.port, config.host, { host: 'mqtt.host', port: 'mqtt.port' }) };
    if (config.tls.enabled) {
      if (!config.tls.cert || !config.tls.key) throw new Error('mqtt.tls.enabled needs mqtt.tls.cert and mqtt.tls.key');
      const secure = createTlsServer({ cert: readFileSync(config.tls.cert), key: readFileSync(config.tls.key) }, accept);
      this.#servers.push(secure as unknown as Server);
      ports.mqttTls = await listen(secure as unknown as Server, config.tls.port, config.host, { host: 'mqtt.host', port: 'mqtt.tls.port' });
    }
    return ports;
  }

  /** Stops accepting; resolves once every listener closed (after its connections ended). */
  close(): Promise<void> {
    return Promise.all(this.#servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(() => {});
  }

  #accept(broker: Aedes, socket: Socket): void {
    // From the live config (a reload may change payloadLimit), fixed for the connection's lifetime.
    const { connectPacketLimit, payloadLimit } = this.#config;
    const limits: PacketLimits = { connect: connectPacketLimit, packet: payloadLimit + PUBLISH_HEADER_ROOM };
    // The guard only fires on a later read, after aedes took the connection and gave its client.
    let client: Client | undefined;
    guardPacketSizes(socket, limits, (violation) => this.#packetTooLarge(socket, client, violation));
    client = broker.handle(socket);
  }

  #packetTooLarge(socket: Socket, client: Client | undefined, violation: PacketViolation): void {
    this.#metrics.refused.inc('PACKET_TOO_LARGE');
    this.#logger.warn(
      { clientId: client?.id ?? undefined, remote: socket.remoteAddress, packetType: violation.type, length: violation.length, limit: violation.limit },
      violation.length < 0 ? 'mqtt packet with a malformed length: connection closed' : 'mqtt packet over its size limit: connection closed',
    );
  }
}
