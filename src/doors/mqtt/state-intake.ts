import { performance } from 'node:perf_hooks';
import type { Client, PublishPacket } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import { ServiceError, isServiceError } from '../../core/errors.js';
import type { Principal } from '../../core/access.js';
import type { RateLimiter } from '../../core/rate-limit.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { StatePipeline } from '../../ingest/ingest.js';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import type { Refusals } from '../../doors/mqtt/refusals.js';
import type { PublishTopic } from '../../wire/topics.js';

export type StateTopic = Extract<PublishTopic, { kind: 'asset-state' | 'asset-state-by-id' | 'device-state' }>;
export type PublishCallback = (error?: Error | null) => void;

export interface StateIntakeDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  pipeline: StatePipeline;
  rateLimiter: RateLimiter;
  clock: Clock;
  logger: Logger;
  metrics: MqttMetrics;
  refusals: Refusals;
  gateways?: GatewaySessions;
}

export function payloadBytes(payload: Buffer | string): Buffer {
  return typeof payload === 'string' ? Buffer.from(payload) : payload;
}

/**
 * State publishes (docs/mqtt.md, "Publishing states"): the topic's device must be the token's own
 * (or, at a central, one behind the gateway), then size and rate limits, then the ingest pipeline.
 * The PUBACK is the `done` callback, called once the state is committed (or refused for what it
 * contains); a failure of the gateway itself leaves the state unacknowledged.
 */
export class StateIntake {
  readonly #deps: StateIntakeDeps;

  constructor(deps: StateIntakeDeps) {
    this.#deps = deps;
  }

  take(client: Client, principal: Principal, packet: PublishPacket, topic: StateTopic, done: PublishCallback): void {
    if (principal.kind === 'gateway') return this.#fromGateway(client, principal, packet, topic, done);
    const { catalog, rateLimiter, clock, refusals } = this.#deps;
    const own = principal.kind === 'device' ? principal.deviceId : null;
    if (!own) return refusals.notAllowed(client, principal, packet.topic, 'only a device token publishes states', done);
    if (topic.kind === 'asset-state-by-id') {
      const asset = catalog.assetById(topic.assetId);
      if (!asset) {
        refusals.report(own, packet.topic, new ServiceError('ASSET_NOT_FOUND', `asset ${topic.assetId} not found`));
        return done(null);
      }
      if (asset.deviceId !== own) return refusals.notAllowed(client, principal, packet.topic, 'asset of another device', done);
    } else if (topic.deviceId !== own) {
      return refusals.notAllowed(client, principal, packet.topic, 'topic of another device', done);
    }
    const payload = payloadBytes(packet.payload);
    if (this.#overLimit(own, packet.topic, payload)) return done(null);
    const wait = rateLimiter.take(principal.tokenId, clock.now());
    if (wait > 0) {
      refusals.report(own, packet.topic, new ServiceError('RATE_LIMITED', `token over its rate limit; retry in ${wait} s`, { retryAfter: wait }));
      return done(null);
    }
    this.#store(client, principal, packet, payload, topic, own, done);
  }

  /**
   * A state of a device behind this gateway: the device's own rights, no per-token rate limit (a
   * backlog drain must not be throttled into loss). One of another gateway's devices is
   * acknowledged and reported on the gateway's errors topic, so the link keeps draining.
   */
  #fromGateway(client: Client, principal: Principal, packet: PublishPacket, topic: StateTopic, done: PublishCallback, waited = false): void {
    // Once only, so states that waited keep their order among themselves.
    const writing = waited ? undefined : this.#deps.gateways!.writing?.(principal.gatewayId!);
    if (writing) return void writing.then(() => this.#fromGateway(client, principal, packet, topic, done, true));
    const deviceId = topic.kind === 'asset-state-by-id' ? this.#deps.catalog.assetById(topic.assetId)?.deviceId : topic.deviceId;
    if (!deviceId || !this.#deps.gateways!.mayPublishState(principal, deviceId, packet.topic)) return done(null);
    const payload = payloadBytes(packet.payload);
    if (this.#overLimit(deviceId, packet.topic, payload)) return done(null);
    this.#store(client, principal, packet, payload, topic, deviceId, done);
  }

  /** mqtt.payloadLimit, read per message from the live config (a reload may change it). */
  #overLimit(deviceId: string, topic: string, payload: Buffer): boolean {
    const limit = this.#deps.config.payloadLimit;
    if (payload.length <= limit) return false;
    this.#deps.refusals.report(deviceId, topic, new ServiceError('PAYLOAD_TOO_LARGE', `payload of ${payload.length} bytes is over the limit of ${limit}`));
    return true;
  }

  /** Hands an authorized state publish to the pipeline; the PUBACK waits for the commit. */
  #store(client: Client, principal: Principal, packet: PublishPacket, payload: Buffer, topic: StateTopic, own: string, done: PublishCallback): void {
    const { pipeline, catalog, metrics } = this.#deps;
    const started = packet.qos > 0 ? performance.now() : 0;
    const acknowledge = () => {
      if (started) metrics.pubackSeconds.observe((performance.now() - started) / 1000);
      done(null);
    };
    const failed = (err: unknown) => {
      // A central node whose PostgreSQL is away (docs/scale-out.md): the PUBACK waits and the write
      // is tried again while the client stays. Closing instead would make a gateway take the state
      // for one its upstream can never take (set aside after three closes).
      if (isServiceError(err) && err.code === 'STORE_UNAVAILABLE' && !client.closed) {
        setTimeout(() => this.#store(client, principal, packet, payload, topic, own, done), 1000).unref();
        return;
      }
      this.#failed(client, principal, packet, own, err, done);
    };
    // The topic checks before were the rights check; a gateway's states may be re-sends.
    const resent = principal.kind === 'gateway';
    if (topic.kind === 'device-state') {
      pipeline
        .ingest({ deviceId: own, via: 'mqtt', payload: { bytes: payload, format: 'device' }, label: 'device state', topic: packet.topic, resent })
        .then((outcome) => {
          for (const r of outcome.refused) metrics.refused.inc(r.code);
          acknowledge();
        }, failed);
      return;
    }
    const assetName = topic.kind === 'asset-state' ? topic.assetName : catalog.assetById(topic.assetId)?.name;
    if (assetName === undefined) return failed(new ServiceError('ASSET_NOT_FOUND', `asset ${(topic as { assetId: string }).assetId} not found`));
    pipeline
      // The echo repeats the exact bytes published: they ride to the state event as the reply.
      .ingest({ deviceId: own, via: 'mqtt', payload: { asset: assetName, bytes: payload, form: 'text' }, label: `asset "${assetName}"`, topic: packet.topic, resent, reply: payload })
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
  #failed(client: Client, principal: Principal, packet: PublishPacket, own: string, err: unknown, done: PublishCallback): void {
    const { logger, refusals } = this.#deps;
    if (!isServiceError(err)) {
      logger.error({ err, clientId: client.id, tokenId: principal.tokenId, topic: packet.topic }, 'mqtt state publish failed inside the gateway: not stored, not acknowledged, connection closed');
      refusals.report(own, packet.topic, new ServiceError('INTERNAL', 'internal error: the state was not stored and is not acknowledged (the connection is closed, so the client resends it); the gateway log has the details'));
      done(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    switch (err.code) {
      case 'FORBIDDEN':
        return refusals.notAllowed(client, principal, packet.topic, err.message, done);
      case 'STORAGE_UNAVAILABLE':
      case 'STORE_UNAVAILABLE':
      case 'OUTBOX_FULL':
        // Not stored, so not acknowledged: the client resends after reconnecting.
        refusals.report(own, packet.topic, err);
        logger.error({ clientId: client.id, topic: packet.topic, err: err.message }, 'mqtt state not stored: closing the connection');
        return done(err);
      default:
        // Bad input on an allowed topic: already reported on device/<id>/errors; acknowledged, not stored.
        refusals.count(err.code);
        return done(null);
    }
  }
}
