import { ServiceError } from '../../core/errors.js';
import { ID_PATTERN } from '../../core/ids.js';
import type { Clock } from '../../core/time.js';
import type { Logger } from '../../ops/logger.js';
import type { Store } from '../../store/store.js';
import type { FleetSummary } from '../../store/fleet.js';
import type { LorawanDeviceRecord } from '../../store/lorawan-devices.js';
import { codecSettingsView } from '../../device-codecs/device-codecs.js';
import { configDeviceTopic } from '../../wire/topics.js';
import { managedDeviceContent, type AppliedRevisions, type LorawanCounters, type ManagedDeviceDefinition } from '../../wire/messages.js';
import type { ManagedRevisions } from './ports.js';

/** What the fleet reads to compute definitions (the catalog of the central), and its gateways. */
export type FleetStores = Pick<Store, 'devices' | 'assets' | 'tokens' | 'lorawanDevices' | 'gateways'>;

export interface FleetConfigDeps {
  store: FleetStores;
  /** Where revisions and applied reports are kept (the SQLite port today). */
  revisions: ManagedRevisions;
  clock: Clock;
  logger: Logger;
  limits: { devicesPerGateway: number };
  /** Publishes a config message to the gateway (QoS 1, as the service). */
  send: (topic: string, payload: string) => void;
  connected: (gatewayId: string) => boolean;
}

const hex = (b: Buffer | null) => (b ? b.toString('hex').toUpperCase() : undefined);

/** A device's LoRaWAN settings as `PUT /device/<id>/lorawan` takes them, keys included (they travel only on the gateway's own link). */
function lorawanBody(r: LorawanDeviceRecord): Record<string, unknown> {
  const body: Record<string, unknown> = { activation: r.activation, fPort: r.fPort };
  if (r.devEui) body.devEui = r.devEui;
  if (r.activation === 'abp') Object.assign(body, { devAddr: r.devAddr, nwkSKey: hex(r.nwkSKey), appSKey: hex(r.appSKey), fCntUp: r.fCntUp, fCntDown: r.fCntDown });
  else Object.assign(body, { joinEui: r.joinEui, appKey: hex(r.appKey) });
  return body;
}

/**
 * Provisioning down (docs/sync.md, "Manage a fleet from the central"): a managed device's whole
 * definition — name, texts, assets with profiles, codecs, LoRaWAN settings, the hash of its token —
 * is kept per gateway at a revision raised by every change, and sent on
 * `gateway/<GatewayID>/config/device/<DeviceID>` to a connected gateway. The gateway reports what
 * it applied on `…/config/applied` (on connect, and after applying); whatever is newer goes out then,
 * in revision order. Nothing is kept only in memory except which revisions were already sent on the
 * current session, so a restart of either side resends exactly what is missing.
 */
export class FleetConfig {
  readonly #deps: FleetConfigDeps;
  /** Per connected gateway: the revision last sent per device on its current session. */
  readonly #sent = new Map<string, Map<string, number>>();
  sentMessages = 0;

  constructor(deps: FleetConfigDeps) {
    this.#deps = deps;
  }

  /** The definition of a device as its gateway gets it, without the revision; undefined if the device is gone. */
  definition(deviceId: string): Omit<ManagedDeviceDefinition, 'revision'> | undefined {
    const { store } = this.#deps;
    const device = store.devices.get(deviceId);
    if (!device) return undefined;
    const lorawan = store.lorawanDevices.get(deviceId);
    const definition: Omit<ManagedDeviceDefinition, 'revision'> = {
      device: { id: device.id, name: device.name, title: device.title, description: device.description },
      assets: store.assets.list(deviceId).map((a) => ({ name: a.name, is: a.is, profile: a.profile, title: a.title, description: a.description })),
      codec: device.codec ? codecSettingsView(device) : null,
      tokenHash: store.tokens.deviceTokenHash(deviceId),
    };
    if (lorawan) definition.lorawan = lorawanBody(lorawan);
    return definition;
  }

  /**
   * `PUT /device/<id>/gateway` and `outpost device assign`: the device becomes managed for that
   * gateway (null: for none). The gateway it leaves removes it; the one it joins gets it.
   */
  async assign(deviceId: string, gatewayId: string | null): Promise<void> {
    const { store, limits, revisions } = this.#deps;
    // Checked now for a quick answer, and again within the write: on several central nodes that is
    // where the limit holds across them (docs/scale-out.md).
    const check = () => {
      const device = store.devices.get(deviceId);
      if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${deviceId} not found`);
      if (gatewayId === null) return;
      if (!ID_PATTERN.test(gatewayId) || !store.gateways.get(gatewayId)) throw new ServiceError('GATEWAY_NOT_FOUND', `gateway ${gatewayId} not found`);
      if (device.gatewayId !== gatewayId && store.gateways.deviceCount(gatewayId) >= limits.devicesPerGateway) {
        throw new ServiceError('GATEWAY_DEVICE_LIMIT', `gateway ${gatewayId} already has ${limits.devicesPerGateway} devices (central.devicesPerGateway)`);
      }
    };
    check();
    const before = (await revisions.managed([deviceId])).get(deviceId) ?? null;
    await revisions.assign(deviceId, gatewayId, check);
    // Computed now, not on the next turn: the CLI calls this in a short-lived process of its own.
    await this.#refresh([deviceId]);
    if (before !== null && before !== gatewayId) await this.#offer(before);
  }

  /**
   * After any change to a device: a new revision if its definition changed. Changes made in one turn
   * of the event loop are looked at together (one write, one commit, not one per device).
   */
  refresh(deviceId: string): void {
    this.#changed.add(deviceId);
    if (this.#changed.size > 1) return;
    setImmediate(() => {
      const ids = [...this.#changed];
      this.#changed.clear();
      this.#refresh(ids).catch((err) => this.#deps.logger.error({ err, devices: ids.length }, 'fleet: definitions not refreshed'));
    });
  }

  readonly #changed = new Set<string>();

  /** Every managed device (after another process wrote, and at start). */
  async refreshAll(): Promise<void> {
    await this.#refresh(await this.#deps.revisions.liveDeviceIds(), true);
  }

  /** Recomputes the definitions of those devices that are managed, and sends each gateway what is new for it. */
  async #refresh(deviceIds: readonly string[], offerAll = false): Promise<void> {
    const managed = await this.#deps.revisions.managed(deviceIds);
    const changes = [...managed.keys()].map((deviceId) => {
      const definition = this.definition(deviceId);
      return { deviceId, content: definition ? managedDeviceContent(definition) : null };
    });
    const gateways = changes.length > 0 ? await this.#deps.revisions.update(changes) : new Set<string>();
    if (offerAll) for (const g of this.#deps.store.gateways.list()) gateways.add(g.id);
    for (const id of gateways) await this.#offer(id);
  }

  /**
   * A session of the gateway opened. Nothing is sent to a gateway before it reported what it
   * applied — the report comes once its subscription was granted, and a message sent earlier could
   * reach no subscription yet be taken for sent. A gateway already connected (a new session taking
   * over one not yet seen closed, or a second one) keeps being served; at its next report what
   * counted as sent is forgotten, so whatever the old session lost goes out again once.
   */
  sessionOpened(gatewayId: string): void {
    if (this.#sent.has(gatewayId)) this.#forgetAtReport.add(gatewayId);
  }

  /** Its last session closed. */
  sessionClosed(gatewayId: string): void {
    this.#sent.delete(gatewayId);
    this.#forgetAtReport.delete(gatewayId);
  }

  readonly #forgetAtReport = new Set<string>();

  /** `…/config/applied`: recorded, then whatever is newer goes out. */
  async applied(gatewayId: string, revisions: AppliedRevisions): Promise<void> {
    if (!this.#sent.has(gatewayId) || this.#forgetAtReport.delete(gatewayId)) this.#sent.set(gatewayId, new Map());
    await this.#deps.revisions.recordApplied(gatewayId, revisions, this.#deps.clock.now());
    await this.#offer(gatewayId);
  }

  /** `gateway/<id>/lorawan/<DeviceID>`: an ABP device's counters, kept so a re-assigned device keeps them. */
  async counters(gatewayId: string, deviceId: string, counters: LorawanCounters): Promise<void> {
    if ((await this.#deps.revisions.managed([deviceId])).get(deviceId) !== gatewayId) throw new ServiceError('DEVICE_NOT_ASSIGNED', `device ${deviceId} is not managed for gateway ${gatewayId}`);
    await this.#deps.revisions.recordCounters(deviceId, counters);
  }

  summary(gatewayId: string): Promise<FleetSummary> {
    return this.#deps.revisions.summary(gatewayId);
  }

  /** Sends a connected gateway every revision newer than what it applied and than what this session already carried. */
  async #offer(gatewayId: string): Promise<void> {
    if (!this.#deps.connected(gatewayId)) return;
    const pending = await this.#deps.revisions.pending(gatewayId);
    // Read after the await: a session that closed (or reopened) meanwhile starts from what it applied.
    const sent = this.#sent.get(gatewayId);
    if (!sent || !this.#deps.connected(gatewayId)) return;
    for (const row of pending) {
      if ((sent.get(row.deviceId) ?? 0) >= row.revision) continue;
      sent.set(row.deviceId, row.revision);
      // The stored content is the definition's JSON object: the revision goes in front of its members.
      const payload = row.deleted ? JSON.stringify({ revision: row.revision, deleted: true }) : `{"revision":${row.revision},${row.content!.slice(1)}`;
      this.#deps.send(configDeviceTopic(gatewayId, row.deviceId), payload);
      this.sentMessages++;
    }
  }
}
