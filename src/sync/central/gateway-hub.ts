import type { Client } from 'aedes';
import { canReadAny, type Principal } from '../../core/access.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { Logger } from '../../ops/logger.js';
import type { AssetCommand, CommandSink, DeviceCommand, SinkOutcome } from '../../commands/router.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import { TEMPLATES, assetTopic, gatewayErrorsTopic, matchTemplate, parseGatewayTopic } from '../../wire/topics.js';
import { commandPayload, errorReport, gatewayStatusPayload, type GatewayStatus } from '../../wire/messages.js';
import type { GatewayRegistry } from './gateway-registry.js';
import type { CatalogIntake } from './catalog-intake.js';
import type { JsonValue } from '../../core/json.js';

const DAY_MS = 86_400_000;

/** How the hub publishes as the service (set by the MQTT door once it runs). */
export type ServicePublish = (topic: string, payload: string, retain: boolean) => void;

/**
 * The central's live view of its gateways (docs/sync.md):
 * - their MQTT sessions: which are connected, their ACL (the device rights of every device behind
 *   the gateway on one connection; wildcard command subscriptions filtered to those devices), the
 *   catalog and status topics, refusals on `gateway/<id>/errors`;
 * - the `gateway` command sink: a command for a device behind a gateway goes down its session
 *   (`"gateway": "sent"`) or waits here for 24 h or `meta.ttl` seconds (`"queued"`) and goes out
 *   when the gateway subscribes again.
 */
export class GatewayHub implements GatewaySessions, CommandSink {
  readonly name = 'gateway';
  readonly #catalog: Catalog;
  readonly #gateways: GatewayRegistry;
  readonly #intake: CatalogIntake;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #sessions = new Map<string, Set<Client>>();
  #publish: ServicePublish = () => {};
  commandsQueued = 0;
  refusals = 0;

  constructor(deps: { catalog: Catalog; gateways: GatewayRegistry; intake: CatalogIntake; clock: Clock; logger: Logger }) {
    this.#catalog = deps.catalog;
    this.#gateways = deps.gateways;
    this.#intake = deps.intake;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  attach(publish: ServicePublish): void {
    this.#publish = publish;
  }

  connected(gatewayId: string): boolean {
    return (this.#sessions.get(gatewayId)?.size ?? 0) > 0;
  }

  get connectedCount(): number {
    return this.#sessions.size;
  }

  // ---- sessions

  opened(principal: Principal, client: Client): void {
    const id = principal.gatewayId;
    if (!id) return;
    let set = this.#sessions.get(id);
    if (!set) this.#sessions.set(id, (set = new Set()));
    set.add(client);
    this.#touch(id);
    this.#logger.info({ gatewayId: id }, 'gateway connected');
  }

  closed(principal: Principal, client: Client): void {
    const id = principal.gatewayId;
    if (!id) return;
    const set = this.#sessions.get(id);
    set?.delete(client);
    if (set && set.size === 0) this.#sessions.delete(id);
    this.#touch(id);
    this.#logger.info({ gatewayId: id }, 'gateway disconnected');
  }

  #touch(gatewayId: string): void {
    try {
      this.#gateways.store.touch(gatewayId, this.#clock.now());
    } catch (err) {
      this.#logger.debug({ err }, 'gateway last seen not recorded');
    }
  }

  #owns(principal: Principal, deviceId: string | undefined): boolean {
    return deviceId !== undefined && principal.ownsDevice !== undefined && principal.ownsDevice(deviceId);
  }

  #reportError(gatewayId: string, topic: string, code: string, error: string): void {
    this.refusals++;
    this.#logger.info({ gatewayId, topic, code, error }, 'gateway message refused');
    this.#publish(gatewayErrorsTopic(gatewayId), errorReport(this.#clock.now(), topic, code, error), false);
  }

  // ---- publishes

  publish(principal: Principal, topic: string, payload: Buffer): string | undefined {
    const parsed = parseGatewayTopic(topic);
    const gatewayId = parsed.gatewayId;
    if (principal.kind !== 'gateway' || !gatewayId || gatewayId !== principal.gatewayId) return 'only a gateway publishes under its own gateway/<id>/';
    if (parsed.kind === 'status') {
      let status: unknown;
      try {
        status = JSON.parse(payload.toString('utf8'));
      } catch {
        status = undefined;
      }
      if (!status || typeof status !== 'object' || Array.isArray(status)) {
        this.#reportError(gatewayId, topic, 'INVALID_JSON', 'status must be a JSON object {"online", …}');
        return undefined;
      }
      // Re-published by the service, retained: readers of gateway/+/status get the latest at once.
      this.#publish(topic, gatewayStatusPayload(status as GatewayStatus), true);
      return undefined;
    }
    if (parsed.kind === 'catalog') {
      const refusal = this.#intake.apply(gatewayId, parsed.deviceId, payload);
      if (refusal) this.#reportError(gatewayId, topic, refusal.code, refusal.message);
      return undefined;
    }
    return 'no such gateway topic';
  }

  mayPublishState(principal: Principal, deviceId: string, topic: string): boolean {
    if (this.#owns(principal, deviceId)) return true;
    const known = this.#catalog.device(deviceId);
    this.#reportError(
      principal.gatewayId!,
      topic,
      'DEVICE_NOT_ASSIGNED',
      known ? `device ${deviceId} is not behind gateway ${principal.gatewayId}` : `device ${deviceId} not found at the central (its catalog message comes first)`,
    );
    return false;
  }

  // ---- subscriptions and delivery

  maySubscribe(principal: Principal, filter: string): boolean | undefined {
    const levels = filter.split('/');
    if (levels[0] === 'gateway') {
      if (levels.length !== 3 || (levels[2] !== 'status' && levels[2] !== 'errors')) return false;
      if (principal.kind === 'gateway') return levels[2] === 'errors' && levels[1] === principal.gatewayId;
      return canReadAny(principal) && levels[1] !== '#' && levels[1] !== '';
    }
    if (principal.kind !== 'gateway') return undefined;
    if (filter.charCodeAt(0) === 36 /* $ */) return false;
    // Every device topic template the filter can match must be one of its devices' or left open
    // (`+`/`#`): open levels are narrowed to its devices when messages are forwarded.
    let matched = false;
    for (const template of TEMPLATES) {
      const bindings = matchTemplate(levels, template);
      if (!bindings) continue;
      matched = true;
      if (bindings.D !== undefined && !this.#owns(principal, bindings.D)) return false;
      if (bindings.A !== undefined && !this.#owns(principal, this.#catalog.assetById(bindings.A)?.deviceId)) return false;
    }
    return matched;
  }

  mayReceive(principal: Principal | undefined, topic: string): boolean {
    if (!principal || principal.kind !== 'gateway') return true;
    const a = topic.indexOf('/');
    const b = topic.indexOf('/', a + 1);
    const head = topic.slice(0, a);
    const id = topic.slice(a + 1, b < 0 ? undefined : b);
    if (head === 'device') return this.#owns(principal, id);
    if (head === 'asset') return this.#owns(principal, this.#catalog.assetById(id)?.deviceId);
    if (head === 'gateway') return id === principal.gatewayId;
    return false;
  }

  subscribed(principal: Principal): void {
    const id = principal.gatewayId;
    if (!id) return;
    const pending = this.#gateways.store.takeCommands(id, this.#clock.now());
    for (const command of pending) this.#publish(command.topic, command.payload, false);
    if (pending.length > 0) this.#logger.info({ gatewayId: id, commands: pending.length }, 'commands kept for an offline gateway delivered');
  }

  // ---- the `gateway` command sink

  deliverAssetCommand(command: AssetCommand): SinkOutcome {
    return this.#deliver(command.device.gatewayId, command.device.id, [[command.asset.name, command.value]], command.meta, command.at);
  }

  deliverDeviceCommand(command: DeviceCommand): SinkOutcome {
    return this.#deliver(
      command.device.gatewayId,
      command.device.id,
      command.assets.map((a) => [a.name, command.values[a.name]!]),
      command.meta,
      command.at,
    );
  }

  #deliver(gatewayId: string | null | undefined, deviceId: string, values: Array<[string, JsonValue]>, meta: Record<string, JsonValue> | null, at: number): SinkOutcome {
    if (!gatewayId) return undefined;
    // Connected: the MQTT sink's publish on the command topics reaches the gateway's subscription.
    if (this.connected(gatewayId)) return 'sent';
    const ttl = typeof meta?.ttl === 'number' && meta.ttl > 0 ? meta.ttl * 1000 : DAY_MS;
    for (const [name, value] of values) {
      this.#gateways.store.queueCommand({ gatewayId, deviceId, topic: assetTopic(deviceId, name, 'command'), payload: commandPayload(value, at, meta), expiresAt: at + ttl });
      this.commandsQueued++;
    }
    return 'queued';
  }
}
