import { readFileSync } from 'node:fs';
import { ConfigError } from '../core/config.js';
import type { UpstreamConfig } from '../core/config.js';
import type { Principal } from '../core/access.js';
import { isServiceError } from '../core/errors.js';
import { parseTimestamp, type Clock } from '../core/time.js';
import type { Store } from '../store/store.js';
import type { Catalog } from '../store/catalog.js';
import type { StateWriter } from '../ingest/state-writer.js';
import type { Registry } from '../registry/registry.js';
import type { CommandRouter } from '../commands/router.js';
import type { MetricsRegistry } from '../ops/metrics.js';
import type { Logger } from '../ops/logger.js';
import { Outbox, type OutboxStatus } from './outbox.js';
import { UpstreamLink } from './upstream-link.js';
import { configDeviceFilter, gatewayErrorsTopic, gatewayStatusTopic } from '../wire/topics.js';
import type { DeviceCodecs } from '../device-codecs/device-codecs.js';
import type { LorawanProvisioning } from '../lpwan/provisioning.js';
import { ManagedDeviceApplier } from './fleet-applier.js';
import type { DeviceEvent, DeviceEvents } from '../ingest/device-events.js';
import { eventsTopic } from '../wire/topics.js';
import { eventPayload } from '../wire/messages.js';
import { OFFLINE_STATUS, gatewayStatusPayload } from '../wire/messages.js';
import { isJsonObject, memberIgnoringCase } from '../core/json.js';
import { parsePublishTopic } from '../wire/topics.js';

/** Commands from the upstream enter the local router with the rights the upstream granted them. */
const UPSTREAM: Principal = { tokenId: 'upstream', kind: 'app', deviceId: null, scopes: ['command'] };

export interface UpstreamHealth extends OutboxStatus {
  link: 'up' | 'down' | 'off';
}

export interface UpstreamSyncDeps {
  config: UpstreamConfig;
  store: Store;
  catalog: Catalog;
  writer: StateWriter;
  registry: Registry;
  commands: CommandRouter;
  metrics: MetricsRegistry;
  clock: Clock;
  logger: Logger;
  version: string;
  /** For managed devices' codecs and LoRaWAN settings (docs/sync.md, "Manage a fleet from the central"). */
  codecs: DeviceCodecs;
  lorawan?: LorawanProvisioning;
  /** The devices' radio and delivery events, forwarded to the central (best effort, QoS 0). */
  events?: DeviceEvents;
}

function readPem(path: string | null, key: string): Buffer | undefined {
  if (!path) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    // A setting that cannot be used is a configuration error (exit 2 naming the key), like the MQTT TLS files.
    throw new ConfigError(`config key upstream.${key}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/**
 * The gateway side of upstream sync (docs/sync.md): the outbox filled by the state writer, one
 * link to an Outpost central (gateway token) or one per listed device (a third-party upstream),
 * commands from the upstream into the local command router, the retained gateway status, and the
 * bounds and counters operators look at.
 */
export class UpstreamSync {
  readonly outbox: Outbox;
  /** Gateway mode: applies the managed devices' definitions the central sends. */
  readonly applier: ManagedDeviceApplier | undefined;
  readonly #deps: UpstreamSyncDeps;
  readonly #links: UpstreamLink[] = [];
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #gatewayId: string | null;
  commandsReceived = 0;
  eventsForwarded = 0;
  #hooked = false;
  /** Stalls of links replaced by a reconfigure, so the counter never goes down. */
  #pastStalls = 0;

  constructor(deps: UpstreamSyncDeps) {
    this.#deps = deps;
    this.#gatewayId = deps.config.token ? deps.config.gatewayId : null;
    this.outbox = new Outbox({ store: deps.store, catalog: deps.catalog, clock: deps.clock, config: deps.config, logger: deps.logger });
    if (this.#gatewayId !== null) {
      const { store, catalog, registry, codecs, lorawan, clock, logger } = deps;
      this.applier = new ManagedDeviceApplier({ gatewayId: this.#gatewayId, store, catalog, registry, codecs, lorawan, clock, logger });
      this.applier.publish = (topic, payload) => this.#links[0]?.publishDirect(topic, payload, false) ?? Promise.resolve();
    }
    this.#registerMetrics();
  }

  #registerMetrics(): void {
    const m = this.#deps.metrics;
    const o = this.outbox;
    m.gauge('outpost_outbox_depth', 'Rows waiting in the upstream outbox', () => o.depth);
    m.gauge('outpost_outbox_bytes', 'Topic and payload bytes waiting in the upstream outbox', () => o.bytes);
    m.gauge('outpost_outbox_oldest_age_seconds', 'Age of the oldest row in the upstream outbox (0 when empty)', () => {
      const oldest = o.depth > 0 ? o.rows.oldestCreatedAt() : null;
      return oldest === null ? 0 : Math.max(0, (this.#deps.clock.now() - oldest) / 1000);
    });
    m.counterFrom('outpost_outbox_sent_total', 'Outbox rows acknowledged by the upstream', () => o.status().sent);
    m.counterFrom('outpost_outbox_dropped_total', 'Outbox rows dropped by maxBytes, maxAgeDays or a purge', () => o.status().dropped);
    m.counterFrom('outpost_outbox_rejected_total', 'States refused because the outbox was full (whenFull: reject-new)', () => o.status().rejected);
    m.counterFrom('outpost_outbox_set_aside_total', 'Outbox rows the upstream can never take (too large, or closing the link), removed unsent', () => o.status().setAside);
    m.gauge('outpost_upstream_link_up', '1 when every upstream connection is up', () => (this.link === 'up' ? 1 : 0));
    m.counterFrom('outpost_upstream_stalls_total', 'Upstream connections dropped by the drain watchdog', () => this.#pastStalls + this.#links.reduce((n, l) => n + l.stalls, 0));
    m.counterFrom('outpost_upstream_commands_total', 'Commands received from the upstream', () => this.commandsReceived);
    if (this.applier) {
      const applier = this.applier;
      m.counterFrom('outpost_fleet_applied_total', 'Managed-device revisions applied from the central', () => applier.applied);
      m.counterFrom('outpost_fleet_failed_total', 'Managed-device messages from the central that could not be applied', () => applier.failed);
    }
  }

  get link(): 'up' | 'down' | 'off' {
    if (this.#links.length === 0) return 'off';
    return this.#links.every((l) => l.up) ? 'up' : 'down';
  }

  health(): UpstreamHealth {
    return { link: this.link, ...this.outbox.status() };
  }

  start(): void {
    const { config, writer, registry, catalog, clock, logger } = this.#deps;
    // Once: a reconfigure stops and starts the links again, the outbox hook stays.
    if (!this.#hooked) writer.addBatchHook(this.outbox);
    this.#hooked = true;
    registry.on('deviceChanged', this.#onDeviceChanged);
    catalog.on('externalChange', this.#onExternalChange);
    this.outbox.on('rows', this.#onRows);
    this.outbox.announceAll();
    const tls = { ca: readPem(config.ca, 'ca'), cert: readPem(config.cert, 'cert'), key: readPem(config.key, 'key') };
    const common = {
      url: config.url!,
      tls,
      window: config.window,
      reconnectMinMs: config.reconnectMinMs,
      reconnectMaxMs: config.reconnectMaxMs,
      stallSeconds: config.stallSeconds,
      maxMessageBytes: config.maxMessageBytes,
    };
    if (this.#gatewayId !== null) {
      const gatewayId = this.#gatewayId;
      this.#links.push(
        new UpstreamLink(
          {
            ...common,
            name: 'central',
            username: config.token!,
            clientId: `outpost-gateway-${gatewayId}`,
            will: { topic: gatewayStatusTopic(gatewayId), payload: OFFLINE_STATUS },
            // Commands come down as one device command message each (one LoRa frame for a radio device).
            subscriptions: ['device/+/command', gatewayErrorsTopic(gatewayId), configDeviceFilter(gatewayId)],
            owns: () => true,
            onMessage: (topic, payload) => this.#onCentralMessage(topic, payload),
            onUp: () => void this.#publishStatus(),
            onSubscribed: () => void this.applier?.reportAll(),
          },
          this.outbox,
          clock,
          logger,
        ),
      );
    } else {
      for (const [localId, remote] of Object.entries(config.devices ?? {})) {
        this.#links.push(
          new UpstreamLink(
            {
              ...common,
              name: localId,
              username: remote.token,
              clientId: `outpost-${localId}`,
              subscriptions: [`device/${remote.id}/asset/+/command`],
              owns: (deviceId) => deviceId === localId,
              onMessage: (topic, payload) => this.#onCommand(topic, payload, localId),
            },
            this.outbox,
            clock,
            logger,
          ),
        );
      }
    }
    this.outbox.setLink('down');
    for (const link of this.#links) link.start();
    this.#timers.push(
      setInterval(() => {
        this.outbox.setLink(this.link);
        this.outbox.flushCounters();
      }, 1000).unref(),
    );
    this.#timers.push(setInterval(() => this.outbox.enforceAge(), 60_000).unref());
    if (this.#gatewayId !== null) this.#timers.push(setInterval(() => void this.#publishStatus(), config.statusIntervalSeconds * 1000).unref());
    this.outbox.enforceAge();
    this.applier?.start();
    if (this.#gatewayId !== null) this.#deps.events?.on('event', this.#onDeviceEvent);
  }

  /**
   * A device event goes up as it happens (docs/sync.md): QoS 0 and not through the outbox — link
   * quality and command outcomes are live information, and a backlog of them after an outage is
   * worth less than the states it would delay. Lost while the link is down.
   */
  readonly #onDeviceEvent = (deviceId: string, event: DeviceEvent) => {
    const link = this.#links[0];
    if (!link?.up) return;
    this.eventsForwarded++;
    void link.publishDirect(eventsTopic(deviceId), eventPayload(event), false, 0);
  };

  /**
   * A config reload (docs/operations.md): the links reconnect with the new settings (URL, TLS
   * files, token, window, backoff, bounds, device tokens); the outbox and its rows stay. Switching
   * between a central (token + gatewayId) and per-device tokens changes what the outbox holds,
   * so that needs a restart.
   */
  async reconfigure(next: UpstreamConfig): Promise<void> {
    const config = this.#deps.config;
    if (!next.url) throw new Error('turning upstream sync off needs a restart');
    if (next.gatewayId !== config.gatewayId || !!next.token !== !!config.token) throw new Error('changing upstream.gatewayId, or between a gateway token and device tokens, needs a restart');
    // Files first: a missing one refuses the reload while the running links carry on.
    for (const key of ['ca', 'cert', 'key'] as const) readPem(next[key], key);
    await this.stop();
    this.#pastStalls += this.#links.reduce((n, l) => n + l.stalls, 0);
    this.#links.length = 0;
    this.#timers.length = 0;
    Object.assign(config, next);
    this.start();
  }

  async stop(): Promise<void> {
    const { registry, catalog } = this.#deps;
    for (const t of this.#timers) clearInterval(t);
    this.applier?.stop();
    this.#deps.events?.off('event', this.#onDeviceEvent);
    registry.off('deviceChanged', this.#onDeviceChanged);
    catalog.off('externalChange', this.#onExternalChange);
    this.outbox.off('rows', this.#onRows);
    const offline = this.#gatewayId !== null ? { topic: gatewayStatusTopic(this.#gatewayId), payload: OFFLINE_STATUS } : undefined;
    await Promise.all(this.#links.map((l) => l.stop(offline)));
    this.outbox.setLink('down');
    this.outbox.flushCounters();
  }

  readonly #onRows = (deviceIds: ReadonlySet<string>) => {
    for (const link of this.#links) link.notify(deviceIds);
  };

  readonly #onDeviceChanged = (deviceId: string) => {
    try {
      this.outbox.announceDevice(deviceId);
    } catch (err) {
      this.#deps.logger.error({ err, deviceId }, 'outbox: catalog message not queued');
    }
  };

  /** The CLI changed devices or purged the outbox from another process. */
  readonly #onExternalChange = () => {
    setImmediate(() => {
      try {
        this.outbox.recount();
        this.outbox.announceAll();
      } catch (err) {
        this.#deps.logger.error({ err }, 'outbox: refresh after an external change failed');
      }
    });
  };

  #publishStatus(): Promise<void> {
    if (this.#gatewayId === null) return Promise.resolve();
    const status = this.outbox.status();
    const payload = gatewayStatusPayload({
      online: true,
      version: this.#deps.version,
      outbox: { depth: status.depth, oldestAt: status.oldestAt === null ? null : new Date(status.oldestAt).toISOString() },
    });
    return this.#links[0]?.publishDirect(gatewayStatusTopic(this.#gatewayId), payload, true) ?? Promise.resolve();
  }

  #onCentralMessage(topic: string, payload: Buffer): void {
    if (this.#gatewayId !== null && topic === gatewayErrorsTopic(this.#gatewayId)) {
      this.#deps.logger.warn({ error: payload.toString('utf8').slice(0, 1000) }, 'the central refused a message of this gateway');
      return;
    }
    if (this.applier?.take(topic, payload)) return;
    const parsed = parsePublishTopic(topic);
    if (parsed.kind === 'device-command') return this.#onDeviceCommand(parsed.deviceId, payload);
    this.#onCommand(topic, payload, null);
  }

  /** `device/<id>/command` from the central: one device command into the local router (one frame for a radio device), with the central's `at`. */
  #onDeviceCommand(deviceId: string, payload: Buffer): void {
    const { commands, logger, clock } = this.#deps;
    try {
      const body = JSON.parse(payload.toString('utf8')) as unknown;
      const atText = isJsonObject(body) ? memberIgnoringCase(body, 'at') : undefined;
      const at = (typeof atText === 'string' ? parseTimestamp(atText) : undefined) ?? clock.now();
      this.commandsReceived++;
      const delivery = commands.sendDeviceCommand({ principal: UPSTREAM, via: 'upstream', deviceId, body, at });
      logger.debug({ deviceId, delivered: delivery.delivered }, 'upstream device command delivered');
    } catch (err) {
      if (isServiceError(err)) logger.warn({ deviceId, code: err.code, error: err.message }, 'upstream device command refused');
      else logger.warn({ err, deviceId }, 'upstream device command not readable');
    }
  }

  /** `device/<id>/asset/<name>/command` from the upstream: into the local router with the upstream's `at`. */
  #onCommand(topic: string, payload: Buffer, localId: string | null): void {
    const levels = topic.split('/');
    if (levels.length !== 5 || levels[0] !== 'device' || levels[2] !== 'asset' || levels[4] !== 'command') return;
    const deviceId = localId ?? levels[1]!;
    const assetName = levels[3]!;
    const { commands, logger, clock } = this.#deps;
    try {
      let body: unknown;
      try {
        body = JSON.parse(payload.toString('utf8'));
      } catch {
        body = { value: payload.toString('utf8') };
      }
      const message = isJsonObject(body) && memberIgnoringCase(body, 'value') !== undefined ? body : { value: body };
      const atText = memberIgnoringCase(message as Record<string, unknown>, 'at');
      const at = (typeof atText === 'string' ? parseTimestamp(atText) : undefined) ?? clock.now();
      this.commandsReceived++;
      const command = { value: memberIgnoringCase(message as Record<string, unknown>, 'value'), meta: memberIgnoringCase(message as Record<string, unknown>, 'meta') };
      const delivery = commands.sendAssetCommand({ principal: UPSTREAM, via: 'upstream', target: { deviceId, assetName }, body: command, at });
      logger.debug({ deviceId, assetName, delivered: delivery.delivered }, 'upstream command delivered');
    } catch (err) {
      if (isServiceError(err)) logger.warn({ deviceId, assetName, code: err.code, error: err.message }, 'upstream command refused');
      else logger.error({ err, topic }, 'upstream command failed');
    }
  }
}
