import type { Client, PublishPacket } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import { ServiceError, isServiceError } from '../../core/errors.js';
import { canCommand, type Principal } from '../../core/access.js';
import type { Catalog } from '../../store/catalog.js';
import type { CommandOrigin, CommandRouter } from '../../commands/router.js';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { Refusals } from '../../doors/mqtt/refusals.js';
import { payloadBytes, type PublishCallback } from '../../doors/mqtt/state-intake.js';
import type { PublishTopic } from '../../wire/topics.js';
import { hasMemberIgnoringCase, isJsonObject, parseJson } from '../../core/json.js';

export type CommandTopic = Extract<PublishTopic, { kind: 'asset-command' | 'asset-command-by-id' | 'device-command' }>;

export interface CommandIntakeDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  commands: CommandRouter;
  logger: Logger;
  metrics: MqttMetrics;
  refusals: Refusals;
}

/**
 * Command publishes of application tokens with the `command` scope (docs/mqtt.md, "Sending
 * commands"): the payload goes to the command router, which delivers it to every sink. A refused
 * command is acknowledged; the router reports it on the target device's errors topic, because it
 * was published on this broker (docs/architecture.md, "Ingest and commands").
 */
export class CommandIntake {
  readonly #deps: CommandIntakeDeps;

  constructor(deps: CommandIntakeDeps) {
    this.#deps = deps;
  }

  take(client: Client, principal: Principal, packet: PublishPacket, topic: CommandTopic, done: PublishCallback): void {
    if (!canCommand(principal)) return this.#deps.refusals.notAllowed(client, principal, packet.topic, 'commands need an application token with the "command" scope', done);
    const { commands, catalog } = this.#deps;
    const origin: CommandOrigin = { principal, via: 'mqtt', publishedOn: packet.topic };
    let body: unknown;
    try {
      body = this.#read(payloadBytes(packet.payload));
    } catch (err) {
      // Refused before the router saw it: the router still decides whether it is reported.
      commands.refuse(origin, 'deviceId' in topic ? topic.deviceId : catalog.assetById(topic.assetId)?.deviceId, err);
      return this.#refused(client, principal, packet.topic, err, done);
    }
    try {
      if (topic.kind === 'device-command') {
        commands.sendDeviceCommand({ ...origin, deviceId: topic.deviceId, body });
      } else {
        // A bare JSON value is the command's value, as a bare value is a state's value.
        const message = isJsonObject(body) && hasMemberIgnoringCase(body, 'value') ? body : { value: body };
        const target = topic.kind === 'asset-command' ? { deviceId: topic.deviceId, assetName: topic.assetName } : { assetId: topic.assetId };
        commands.sendAssetCommand({ ...origin, target, body: message });
      }
    } catch (err) {
      return this.#refused(client, principal, packet.topic, err, done);
    }
    done(null);
  }

  /** mqtt.payloadLimit (read per message: a reload may change it), then JSON. */
  #read(payload: Buffer): unknown {
    const { config } = this.#deps;
    if (payload.length > config.payloadLimit) throw new ServiceError('PAYLOAD_TOO_LARGE', `payload of ${payload.length} bytes is over the limit of ${config.payloadLimit}`);
    return parseJson(payload.toString('utf8'), 'command');
  }

  /** A refusal is counted and acknowledged (the router reported it); anything else closes the connection. */
  #refused(client: Client, principal: Principal, published: string, err: unknown, done: PublishCallback): void {
    const { logger, metrics } = this.#deps;
    if (!isServiceError(err)) {
      logger.error({ err, clientId: client.id, topic: published }, 'mqtt command failed');
      return done(err instanceof Error ? err : new Error(String(err)));
    }
    metrics.refused.inc(err.code);
    logger.info({ clientId: client.id, tokenId: principal.tokenId, topic: published, code: err.code, error: err.message }, 'mqtt command refused');
    done(null);
  }
}
