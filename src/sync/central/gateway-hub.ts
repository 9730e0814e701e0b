import type { Client } from 'aedes';
import { canReadAny, type Principal } from '../../core/access.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { Logger } from '../../ops/logger.js';
import type { AssetCommand, CommandSink, DeviceCommand, SinkOutcome } from '../../commands/router.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import { TEMPLATES, deviceCommandTopic, gatewayErrorsTopic, gatewayStatusTopic, matchTemplate, parseGatewayTopic } from '../../wire/topics.js';
import { deviceCommandPayload, errorReport, gatewayStatusPayload, parseAppliedRevisions, parseLorawanCounters, type GatewayStatus } from '../../wire/messages.js';
import { isServiceError } from '../../core/errors.js';
import { isJsonObject } from '../../core/json.js';
import { parseTimestamp } from '../../core/time.js';
import type { DeviceEvents } from '../../ingest/device-events.js';
import type { FleetConfig } from './fleet-config.js';
import type { GatewayPresence, PendingCommands } from './ports.js';
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
  readonly #presence: GatewayPresence;
  readonly #commands: PendingCommands;
  /**
   * Several central nodes (docs/scale-out.md): settles once what the gateways' messages changed is
   * committed in PostgreSQL (their PUBACK waits for it). Unset on one machine, where the change is
   * committed before `publish` returns.
   */
  shared: (() => Promise<void>) | undefined;
  /** Per gateway, its catalog and fleet messages being written, in the order they came. */
  readonly #writing = new Map<string, Promise<void>>();
  /** Provisioning down; set once the composition built it (it publishes through this hub). */
  fleet: FleetConfig | undefined;
  #publish: ServicePublish = () => {};
  commandsQueued = 0;
  refusals = 0;
  eventsForwarded = 0;
  eventsDropped = 0;
  readonly #events: DeviceEvents | undefined;

  constructor(deps: {
    catalog: Catalog;
    gateways: GatewayRegistry;
    intake: CatalogIntake;
    presence: GatewayPresence;
    pendingCommands: PendingCommands;
    events?: DeviceEvents;
    clock: Clock;
    logger: Logger;
  }) {
    this.#events = deps.events;
    this.#catalog = deps.catalog;
    this.#gateways = deps.gateways;
    this.#intake = deps.intake;
    this.#presence = deps.presence;
    this.#commands = deps.pendingCommands;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  /** Publishes as the service (QoS 1): config messages for the fleet. */
  send(topic: string, payload: string): void {
    this.#publish(topic, payload, false);
  }

  /** A deleted gateway's retained status goes (an empty retained message clears it, MQTT 3.1.1 §3.3.1.3). */
  forget(gatewayId: string): void {
    this.#publish(gatewayStatusTopic(gatewayId), '', true);
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
    // Every new session (also one that takes over a session not yet seen closed) starts from what
    // the gateway reports applied on it.
    this.fleet?.sessionOpened(id);
    this.#touch(id, 'opened');
    this.#logger.info({ gatewayId: id }, 'gateway connected');
  }

  closed(principal: Principal, client: Client): void {
    const id = principal.gatewayId;
    if (!id) return;
    const set = this.#sessions.get(id);
    set?.delete(client);
    if (set && set.size === 0) {
      this.#sessions.delete(id);
      this.fleet?.sessionClosed(id);
    }
    this.#touch(id, 'closed');
    this.#logger.info({ gatewayId: id }, 'gateway disconnected');
  }

  #touch(gatewayId: string, how: 'opened' | 'closed'): void {
    this.#presence[how](gatewayId, this.#clock.now()).catch((err) => this.#logger.debug({ err }, 'gateway last seen not recorded'));
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
    if (topic.startsWith('device/')) return this.#deviceEvent(principal, topic, payload);
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
      const deviceId = parsed.deviceId;
      this.#inOrder(gatewayId, topic, async () => {
        const refusal = await this.#intake.apply(gatewayId, deviceId, payload);
        if (refusal) throw refusal;
      });
      return undefined;
    }
    if (parsed.kind === 'config-applied' || parsed.kind === 'lorawan-counters') {
      const fleet = this.fleet;
      if (!fleet) return 'no fleet at this instance';
      this.#inOrder(gatewayId, topic, () =>
        parsed.kind === 'config-applied' ? fleet.applied(gatewayId, parseAppliedRevisions(payload)) : fleet.counters(gatewayId, parsed.deviceId, parseLorawanCounters(payload)),
      );
      return undefined;
    }
    return 'no such gateway topic';
  }

  /**
   * Runs a gateway's message's write after its earlier ones. A refusal goes to its errors topic;
   * STORE_UNAVAILABLE (PostgreSQL away, several nodes) is no refusal: the write is tried again
   * every second, and the PUBACK (`settled`) waits, so the gateway keeps the message.
   */
  #inOrder(gatewayId: string, topic: string, work: () => Promise<void>): void {
    const attempt = async (): Promise<void> => {
      for (;;) {
        try {
          return await work();
        } catch (err) {
          if (isServiceError(err) && err.code === 'STORE_UNAVAILABLE') {
            await new Promise((resolve) => setTimeout(resolve, 1000).unref());
            continue;
          }
          if (isServiceError(err)) this.#reportError(gatewayId, topic, err.code, err.message);
          else this.#logger.error({ err, gatewayId, topic }, 'gateway message failed');
          return;
        }
      }
    };
    // Nothing before it: started now, so on one machine the change is made before `publish`
    // returns (the gateway's next packet, a state of that device, may be handled in the same turn).
    const before = this.#writing.get(gatewayId);
    const next = before ? before.then(attempt) : attempt();
    this.#writing.set(gatewayId, next);
    void next.finally(() => {
      if (this.#writing.get(gatewayId) === next) this.#writing.delete(gatewayId);
    });
  }

  writing(gatewayId: string): Promise<void> | undefined {
    return this.#writing.get(gatewayId);
  }

  /** Settles once the gateways' messages taken so far are written (or refused). */
  settled(): Promise<void> {
    return Promise.all(this.#writing.values()).then(() => {});
  }

  /**
   * A gateway's device event (docs/sync.md): re-published here as the central's own event of that
   * device, so its subscribers and the console see link quality and command outcomes. Best effort:
   * one that is not readable is dropped (counted), never reported back.
   */
  #deviceEvent(principal: Principal, topic: string, payload: Buffer): string | undefined {
    const levels = topic.split('/');
    if (principal.kind !== 'gateway' || levels.length !== 3 || levels[2] !== 'events') return 'no such topic';
    const deviceId = levels[1]!;
    // Not (yet) one of its devices here — its catalog message may still be on the way: dropped,
    // never a reason to close the gateway's connection.
    if (!this.#owns(principal, deviceId)) {
      this.eventsDropped++;
      return undefined;
    }
    let event: unknown;
    try {
      event = JSON.parse(payload.toString('utf8'));
    } catch {
      event = undefined;
    }
    const at = isJsonObject(event) && typeof event.at === 'string' ? parseTimestamp(event.at) : undefined;
    if (!isJsonObject(event) || typeof event.type !== 'string' || at === undefined) {
      this.eventsDropped++;
      return undefined;
    }
    this.eventsForwarded++;
    this.#events?.publish(deviceId, { ...event, type: event.type, at, gateway: principal.gatewayId });
    return undefined;
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
      // A gateway reads its own errors and its managed devices' definitions (keys included: never anyone else).
      if (principal.kind === 'gateway') {
        if (levels[1] !== principal.gatewayId) return false;
        if (levels.length === 3) return levels[2] === 'errors';
        return levels.length === 5 && levels[2] === 'config' && levels[3] === 'device' && levels[4] !== '#' && levels[4] !== '';
      }
      if (levels.length !== 3 || (levels[2] !== 'status' && levels[2] !== 'errors')) return false;
      return canReadAny(principal) && levels[1] !== '#' && levels[1] !== '';
    }
    if (principal.kind !== 'gateway') return undefined;
    if (filter.charCodeAt(0) === 36 /* $ */) return false;
    // Device commands come down as one message each (docs/sync.md): `device/+/command`, or one of its devices'.
    if (levels.length === 3 && levels[0] === 'device' && levels[2] === 'command') return levels[1] === '+' || this.#owns(principal, levels[1]);
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
    // The device command message is the hub's, for gateways: a device's or an application's `device/+/+` never gets it.
    if (!principal || principal.kind !== 'gateway') return !(topic.startsWith('device/') && topic.endsWith('/command') && topic.split('/').length === 3);
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
    if (principal.gatewayId) this.deliverKept(principal.gatewayId);
  }

  /**
   * Sends the commands kept for a gateway connected here. Also called when another central node
   * kept one for it (docs/scale-out.md): `take` hands each command to one node only.
   */
  deliverKept(id: string): void {
    if (!this.connected(id)) return;
    this.#commands.take(id, this.#clock.now()).then(
      (pending) => {
        for (const command of pending) this.#publish(command.topic, command.payload, false);
        if (pending.length > 0) this.#logger.info({ gatewayId: id, commands: pending.length }, 'commands kept for an offline gateway delivered');
      },
      (err) => this.#logger.error({ err, gatewayId: id }, 'commands kept for an offline gateway not delivered'),
    );
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

  /**
   * A command for a device behind a gateway goes down as one `device/<id>/command` message (the
   * device command message, docs/sync.md), whether it named one asset or several: the gateway's
   * router delivers it once, so a LoRa device gets one frame. Offline: kept, as that same message.
   */
  #deliver(gatewayId: string | null | undefined, deviceId: string, values: Array<[string, JsonValue]>, meta: Record<string, JsonValue> | null, at: number): SinkOutcome {
    if (!gatewayId) return undefined;
    const topic = deviceCommandTopic(deviceId);
    const payload = deviceCommandPayload(Object.fromEntries(values), at, meta);
    if (this.connected(gatewayId)) {
      this.#publish(topic, payload, false);
      return 'sent';
    }
    const ttl = typeof meta?.ttl === 'number' && meta.ttl > 0 ? meta.ttl * 1000 : DAY_MS;
    this.#commands.queue({ gatewayId, deviceId, topic, payload, expiresAt: at + ttl }).catch((err) => this.#logger.error({ err, gatewayId, deviceId }, 'command for an offline gateway not kept'));
    this.commandsQueued++;
    return 'queued';
  }
}
