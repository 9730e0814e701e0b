import { createHash } from 'node:crypto';
import type { Clock } from '../core/time.js';
import { normalizeProfile } from '../core/profiles.js';
import { isServiceError } from '../core/errors.js';
import type { AssetKind, AssetRecord } from '../core/model.js';
import type { Catalog } from '../store/catalog.js';
import type { Store } from '../store/store.js';
import type { Registry } from '../registry/registry.js';
import type { DeviceCodecs } from '../device-codecs/device-codecs.js';
import { parseCodecSettings, setDeviceCodec } from '../device-codecs/device-codecs.js';
import type { LorawanProvisioning } from '../lpwan/provisioning.js';
import type { Logger } from '../ops/logger.js';
import { configAppliedTopic, lorawanCountersTopic, parseGatewayTopic } from '../wire/topics.js';
import { parseManagedDeviceMessage, type ManagedDeviceDefinition, type ManagedDeviceMessage } from '../wire/messages.js';

export interface ApplierDeps {
  gatewayId: string;
  store: Store;
  catalog: Catalog;
  registry: Registry;
  codecs: DeviceCodecs;
  /** The radio's LoRaWAN settings, when the radio side runs here. */
  lorawan?: LorawanProvisioning;
  clock: Clock;
  logger: Logger;
}

/** A managed ABP device's counters go up at most this often (docs/sync.md). */
const COUNTERS_INTERVAL_MS = 60_000;

/** The LoRaWAN settings without the counters: a change of these (keys, address) replaces the session; counters alone never do. */
function lorawanDigest(settings: Record<string, unknown> | undefined): string | null {
  if (!settings) return null;
  const { fCntUp: _u, fCntDown: _d, ...rest } = settings;
  return createHash('sha256').update(JSON.stringify(rest)).digest('base64url');
}

/**
 * The gateway's side of provisioning down (docs/sync.md, "Manage a fleet from the central"): it
 * applies each `gateway/<GatewayID>/config/device/<DeviceID>` message from its central — the device
 * with the same ID, its assets by name (those not listed go), its codecs, its LoRaWAN settings, and
 * the hash of its token so the token issued at the central works here — and reports the revisions
 * it applied on `…/config/applied`: all of them after every connect, the new ones after applying.
 * Messages are applied one at a time in the order they came (the central sends in revision order);
 * an older revision than the one applied changes nothing. Applied revisions are in the database,
 * so a restart loses nothing: the central resends whatever is newer.
 */
export class ManagedDeviceApplier {
  readonly #deps: ApplierDeps;
  #queue: Promise<void> = Promise.resolve();
  /** Revisions applied since the last report, sent together once the queue is idle. */
  readonly #unreported = new Map<string, number>();
  #reportScheduled = false;
  /** ABP counters last reported, per managed device. */
  readonly #reportedCounters = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #countersReportedAt = -Infinity;
  /** How the applier publishes to the central (the link's direct publish, QoS 1); set by the sync. */
  publish: (topic: string, payload: string) => Promise<void> = async () => {};
  applied = 0;
  failed = 0;

  constructor(deps: ApplierDeps) {
    this.#deps = deps;
  }

  start(): void {
    this.#timer = setInterval(() => void this.reportCounters(), COUNTERS_INTERVAL_MS).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** A config message from the central; anything else is not the applier's. */
  take(topic: string, payload: Buffer): boolean {
    const parsed = parseGatewayTopic(topic);
    if (parsed.kind !== 'config-device' || parsed.gatewayId !== this.#deps.gatewayId) return false;
    let message: ManagedDeviceMessage;
    try {
      message = parseManagedDeviceMessage(parsed.deviceId, payload);
    } catch (err) {
      this.failed++;
      this.#deps.logger.error({ err: isServiceError(err) ? err.message : err, deviceId: parsed.deviceId }, 'fleet: config message refused');
      return true;
    }
    this.#queue = this.#queue.then(() => this.#apply(parsed.deviceId, message)).catch((err) => {
      this.failed++;
      this.#deps.logger.error({ err, deviceId: parsed.deviceId }, 'fleet: config message not applied');
    });
    return true;
  }

  /**
   * After every connect (once subscribed): every revision applied, so the central sends what is
   * newer; and the ABP counters, unless they went up less than a minute ago.
   */
  async reportAll(): Promise<void> {
    this.#unreported.clear();
    await this.publish(configAppliedTopic(this.#deps.gatewayId), JSON.stringify(this.#deps.store.managedHere.revisions()));
    if (this.#deps.clock.now() - this.#countersReportedAt >= COUNTERS_INTERVAL_MS) await this.reportCounters();
  }

  /** Resolves once every message received so far is applied (tests, benchmark, stop). */
  idle(): Promise<void> {
    return this.#queue;
  }

  async #apply(deviceId: string, message: ManagedDeviceMessage): Promise<void> {
    const { store } = this.#deps;
    const held = store.managedHere.get(deviceId);
    if (held && held.revision >= message.revision) return this.#report(deviceId, held.revision);
    if ('deleted' in message) this.#remove(deviceId, message.revision, held !== undefined && !held.deleted);
    else await this.#define(message, held?.lorawanDigest ?? null);
    this.applied++;
    this.#report(deviceId, message.revision);
  }

  /** Unassigned, moved or deleted at the central: the device goes (with its history, like a local delete). */
  #remove(deviceId: string, revision: number, wasManaged: boolean): void {
    const { store, catalog, registry, clock } = this.#deps;
    const exists = wasManaged && store.devices.get(deviceId) !== undefined;
    const tokens = exists ? store.tokens.liveDeviceTokenIds(deviceId) : [];
    store.transaction(() => {
      if (exists) store.devices.delete(deviceId);
      store.managedHere.record(deviceId, revision, true, null, clock.now());
    });
    if (!exists) return;
    catalog.invalidate();
    for (const id of tokens) registry.emit('tokenRevoked', id);
    registry.emit('deviceDeleted', deviceId);
    this.#deps.lorawan?.onChange(deviceId);
  }

  async #define(def: ManagedDeviceDefinition, lorawanBefore: string | null): Promise<void> {
    const { store, catalog, registry, clock, logger } = this.#deps;
    const id = def.device.id;
    const now = clock.now();
    const removedAssets: AssetRecord[] = [];
    let revokedTokens: string[] = [];
    store.transaction(() => {
      const { name, title, description } = def.device;
      if (store.devices.get(id)) store.devices.update(id, { name, title, description }, now);
      else {
        // Created with a token of its own whose secret nobody would ever see: the central's replaces it.
        const created = store.devices.create({ id, name, title, description }, now);
        store.tokens.revoke(created.tokenId, now);
      }
      const current = new Map(store.assets.list(id).map((a) => [a.name, a]));
      for (const a of def.assets) {
        const profile = normalizeProfile(a.profile);
        const fields = { is: a.is as AssetKind, profile, title: a.title, description: a.description };
        const held = current.get(a.name);
        current.delete(a.name);
        if (!held) store.assets.create({ deviceId: id, name: a.name, ...fields }, now);
        else if (JSON.stringify([held.is, held.profile, held.title, held.description]) !== JSON.stringify([fields.is, fields.profile, fields.title, fields.description])) {
          store.assets.update({ ...held, ...fields }, now);
        }
      }
      for (const gone of current.values()) {
        store.assets.delete(gone.id);
        removedAssets.push(gone);
      }
      // The central's token: its hash replaces whatever token the device had here.
      if (def.tokenHash) revokedTokens = store.tokens.adoptDeviceTokenHash(id, name, def.tokenHash, now);
      store.managedHere.record(id, def.revision, false, lorawanBefore, now);
    });
    catalog.invalidate();
    for (const asset of removedAssets) registry.emit('assetDeleted', asset);
    for (const tokenId of revokedTokens) registry.emit('tokenRevoked', tokenId);
    registry.emit('deviceChanged', id);

    const device = store.devices.get(id)!;
    if (def.codec) {
      const wanted = JSON.stringify(parseCodecSettings(def.codec));
      if (wanted !== device.codec) {
        try {
          await setDeviceCodec(store, this.#deps.codecs, clock, device, def.codec);
          catalog.invalidate();
        } catch (err) {
          logger.error({ err: isServiceError(err) ? err.message : err, deviceId: id }, 'fleet: codec of a managed device does not load here; the previous one stays');
        }
      }
    }
    this.#applyLorawan(id, def.lorawan, lorawanBefore, def.revision);
  }

  /**
   * LoRaWAN settings are put only when they changed (counters aside): putting them replaces the
   * session, and an unrelated change (a title) must not reset an ABP device's counters. Counters
   * from the central never go below the ones kept here.
   */
  #applyLorawan(deviceId: string, settings: Record<string, unknown> | undefined, before: string | null, revision: number): void {
    const { store, clock, logger } = this.#deps;
    const digest = lorawanDigest(settings);
    if (digest === before) return;
    const lorawan = this.#deps.lorawan;
    if (!lorawan) {
      if (settings) logger.warn({ deviceId }, 'fleet: a managed device has LoRaWAN settings but the radio side is off here');
      return;
    }
    try {
      if (settings) {
        const local = store.lorawanDevices.get(deviceId);
        const body = { ...settings };
        if (local && body.activation === 'abp' && local.activation === 'abp') {
          body.fCntUp = Math.max(local.fCntUp, Number(body.fCntUp ?? 0));
          body.fCntDown = Math.max(local.fCntDown, Number(body.fCntDown ?? 0));
        }
        lorawan.put(deviceId, body);
      } else if (store.lorawanDevices.get(deviceId)) {
        lorawan.delete(deviceId);
      }
      store.managedHere.record(deviceId, revision, false, digest, clock.now());
    } catch (err) {
      logger.error({ err: isServiceError(err) ? err.message : err, deviceId }, 'fleet: LoRaWAN settings of a managed device not applied');
    }
  }

  #report(deviceId: string, revision: number): void {
    this.#unreported.set(deviceId, revision);
    if (this.#reportScheduled) return;
    this.#reportScheduled = true;
    // Once the queue is idle: one report for a burst of messages, not one per message.
    setTimeout(() => {
      void this.#queue.then(() => {
        this.#reportScheduled = false;
        if (this.#unreported.size === 0) return;
        const report = Object.fromEntries(this.#unreported);
        this.#unreported.clear();
        return this.publish(configAppliedTopic(this.#deps.gatewayId), JSON.stringify(report));
      });
    }, 20);
  }

  /** Managed ABP devices whose counters moved since the last report (docs/sync.md): at most once a minute. */
  async reportCounters(): Promise<void> {
    const { store } = this.#deps;
    this.#countersReportedAt = this.#deps.clock.now();
    for (const deviceId of store.managedHere.liveDeviceIds()) {
      const record = store.lorawanDevices.get(deviceId);
      if (!record || record.activation !== 'abp') continue;
      const payload = JSON.stringify({ fCntUp: record.fCntUp, fCntDown: record.fCntDown });
      if (this.#reportedCounters.get(deviceId) === payload) continue;
      this.#reportedCounters.set(deviceId, payload);
      await this.publish(lorawanCountersTopic(this.#deps.gatewayId, deviceId), payload);
    }
  }
}
