import type { Client } from 'aedes';
import type { Principal } from '../../core/access.js';
import type { ServiceError } from '../../core/errors.js';
import type { StatePipeline } from '../../ingest/ingest.js';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';

/** The refusal of an unauthorized publish: aedes closes the connection when authorizePublish errs. */
export class PublishNotAllowed extends Error {
  override name = 'PublishNotAllowed';
}

/** A packet MQTT 3.1.1 says the server must close the connection for (aedes closes it on this error). */
export class ProtocolViolation extends Error {
  override name = 'ProtocolViolation';
}

export interface RefusalDeps {
  pipeline: StatePipeline;
  logger: Logger;
  metrics: MqttMetrics;
}

/**
 * How the door says no (docs/mqtt.md, "Errors"): a protocol violation or a publish the token may not
 * make closes the connection (MQTT 3.1.1 has no other way); a message refused for what it contains
 * is acknowledged and reported on `device/<id>/errors`, like the pipeline's own refusals.
 */
export class Refusals {
  readonly #deps: RefusalDeps;

  constructor(deps: RefusalDeps) {
    this.#deps = deps;
  }

  protocolViolation(client: Client, principal: Principal, topic: string, why: string, done: (error: Error) => void): void {
    this.#deps.metrics.refused.inc('PROTOCOL_VIOLATION');
    this.#deps.logger.warn({ clientId: client.id, tokenId: principal.tokenId, topic: topic.slice(0, 256), why }, 'mqtt protocol violation: connection closed');
    done(new ProtocolViolation(why));
  }

  notAllowed(client: Client, principal: Principal, topic: string, why: string, done: (error: Error) => void): void {
    this.#deps.metrics.refused.inc('FORBIDDEN');
    this.#deps.logger.warn({ clientId: client.id, tokenId: principal.tokenId, topic, why }, 'mqtt publish not allowed: connection closed');
    done(new PublishNotAllowed(`publish to ${topic} not allowed: ${why}`));
  }

  /** A refusal the door detects before the pipeline (limits, unknown asset id): reported like the pipeline's. */
  report(deviceId: string, topic: string, err: ServiceError): void {
    this.#deps.metrics.refused.inc(err.code);
    this.#deps.pipeline.reportRefusal(deviceId, topic, err);
  }

  /** A refusal already reported elsewhere (by the pipeline), counted here. */
  count(code: string): void {
    this.#deps.metrics.refused.inc(code);
  }
}
