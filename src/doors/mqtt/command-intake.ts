import type { Client, PublishPacket } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import { ServiceError, isServiceError } from '../../core/errors.js';
import { canCommand, type Principal } from '../../core/access.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { CommandRouter } from '../../commands/router.js';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { Refusals } from '../../doors/mqtt/refusals.js';
import type { ServicePublisher } from '../../doors/mqtt/service-publisher.js';
import { payloadBytes, type PublishCallback } from '../../doors/mqtt/state-intake.js';
import type { PublishTopic } from '../../doors/mqtt/topics.js';
import { hasMemberIgnoringCase, isJsonObject, parseJson } from '../../core/json.js';

export type CommandTopic = Extract<PublishTopic, { kind: 'asset-command' | 'asset-command-by-id' | 'device-command' }>;

export interface CommandIntakeDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  commands: CommandRouter;
  clock: Clock;
  logger: Logger;
  metrics: MqttMetrics;
  publisher: ServicePublisher;
  refusals: Refusals;
}

/**
 * Command publishes of application tokens with the `command` scope (docs/mqtt.md, "Sending
 * commands"): the payload goes to the command router, which delivers it to every sink. A refused
 * command is acknowledged and reported on the target device's errors topic.
 */
export class CommandIntake {
  readonly #deps: CommandIntakeDeps;

  constructor(deps: CommandIntakeDeps) {
    this.#deps = deps;
  }

  take(client: Client, principal: Principal, packet: PublishPacket, topic: CommandTopic, done: PublishCallback): void {
    if (!canCommand(principal)) return this.#deps.refusals.notAllowed(client, principal, packet.topic, 'commands need an application token with the "command" scope', done);
    try {
      this.#send(principal, topic, payloadBytes(packet.payload));
    } catch (err) {
      if (!isServiceError(err)) {
        this.#deps.logger.error({ err, clientId: client.id, topic: packet.topic }, 'mqtt command failed');
        return done(err instanceof Error ? err : new Error(String(err)));
      }
      this.#refused(client, principal, packet.topic, topic, err);
    }
    done(null);
  }

  #send(principal: Principal, topic: CommandTopic, payload: Buffer): void {
    const { commands, config } = this.#deps;
    if (payload.length > config.payloadLimit) throw new ServiceError('PAYLOAD_TOO_LARGE', `payload of ${payload.length} bytes is over the limit of ${config.payloadLimit}`);
    const body = parseJson(payload.toString('utf8'), 'command');
    if (topic.kind === 'device-command') {
      commands.sendDeviceCommand(principal, topic.deviceId, body, undefined, 'mqtt');
      return;
    }
    // A bare JSON value is the command's value, as a bare value is a state's value.
    const message = isJsonObject(body) && hasMemberIgnoringCase(body, 'value') ? body : { value: body };
    const target = topic.kind === 'asset-command' ? { deviceId: topic.deviceId, assetName: topic.assetName } : { assetId: topic.assetId };
    commands.sendAssetCommand(principal, target, message, 'mqtt');
  }

  #refused(client: Client, principal: Principal, published: string, topic: CommandTopic, err: ServiceError): void {
    const { catalog, clock, logger, metrics, publisher } = this.#deps;
    metrics.refused.inc(err.code);
    logger.info({ clientId: client.id, tokenId: principal.tokenId, topic: published, code: err.code, error: err.message }, 'mqtt command refused');
    const deviceId = 'deviceId' in topic ? topic.deviceId : catalog.assetById(topic.assetId)?.deviceId;
    if (deviceId && catalog.device(deviceId)) publisher.publishError(deviceId, { at: clock.now(), topic: published, code: err.code, error: err.message });
  }
}
