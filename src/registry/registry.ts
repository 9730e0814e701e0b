import { EventEmitter } from 'node:events';
import { ServiceError } from '../core/errors.js';
import { ID_PATTERN, assetNameProblem, type TokenKind } from '../core/ids.js';
import { normalizeProfile, type Profile } from '../core/profiles.js';
import type { Clock } from '../core/time.js';
import type { Catalog } from '../store/catalog.js';
import type { Store } from '../store/store.js';
import { ASSET_KINDS, SCOPES, type AssetKind, type AssetRecord, type DeviceRecord, type Scope, type TokenRecord } from '../core/model.js';
import { isJsonObject, memberIgnoringCase } from '../core/json.js';
import { codecSettingsView, parseCodecSettings, type DeviceCodecs } from '../device-codecs/device-codecs.js';
import type { CatalogWrites } from './catalog-writes.js';

function optionalText(body: Record<string, unknown>, key: string): string | null | undefined {
  const v = memberIgnoringCase(body, key);
  if (v === undefined || v === null) return v as null | undefined;
  if (typeof v !== 'string') throw new ServiceError('INVALID_BODY', `"${key}" must be a string or null`);
  return v;
}

function requireObject(body: unknown, what: string): Record<string, unknown> {
  if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', `${what} must be a JSON object`);
  return body;
}

function parseKind(raw: unknown): AssetKind {
  const kind = typeof raw === 'string' ? raw.toLowerCase() : raw;
  if (!(ASSET_KINDS as readonly unknown[]).includes(kind)) throw new ServiceError('INVALID_BODY', `"is" must be one of ${ASSET_KINDS.join(', ')}`);
  return kind as AssetKind;
}

export function parseScopes(raw: unknown): Scope[] {
  const list = typeof raw === 'string' ? raw.split(',').map((s) => s.trim()).filter(Boolean) : raw;
  if (!Array.isArray(list) || list.length === 0 || !list.every((s) => (SCOPES as readonly unknown[]).includes(s))) {
    throw new ServiceError('INVALID_BODY', `"scopes" must be a non-empty list of ${SCOPES.join(', ')}`);
  }
  return [...new Set(list as Scope[])];
}

/** `deviceChanged`: the device or one of its assets was created, changed or deleted (the upstream catalog listens). */
type RegistryEvents = { tokenRevoked: [tokenId: string]; deviceDeleted: [deviceId: string]; assetDeleted: [AssetRecord]; deviceChanged: [deviceId: string] };

/** The aggregates the registry changes. */
export type RegistryStores = Pick<Store, 'devices' | 'assets' | 'tokens' | 'gateways' | 'fleet' | 'managedHere' | 'transaction'>;

/**
 * Devices, assets and tokens: the rules for creating and changing them, shared by the HTTP API
 * and the CLI so both refuse the same things with the same messages.
 */
export class Registry extends EventEmitter<RegistryEvents> {
  readonly #catalog: Catalog;
  readonly #store: RegistryStores;
  readonly #clock: Clock;
  // Read on every use: a config reload changes the limit in place.
  readonly #limits: { assetsPerDevice: number };

  /** Central role: how many devices one gateway may have (config `central`, read on every use). */
  readonly #central: { devicesPerGateway: number } | undefined;

  /** Set on a central whose catalog's record is PostgreSQL (docs/scale-out.md); unset, writes commit in SQLite at once. */
  writes: CatalogWrites | undefined;
  /** Events (and afterCommit work) of a write not yet committed: they go out once it is (see `write`). */
  #held: Array<() => void> | undefined;

  constructor(catalog: Catalog, store: RegistryStores, clock: Clock, limits: { assetsPerDevice: number }, central?: { devicesPerGateway: number }) {
    super();
    this.#central = central;
    this.#catalog = catalog;
    this.#store = store;
    this.#clock = clock;
    this.#limits = limits;
  }

  /**
   * Every catalog write of the HTTP API, the CLI and the gateway intake goes through here:
   * `work` calls the synchronous methods below (or changes the store itself). On one machine it
   * runs now; on a central on PostgreSQL it is decided under the cluster's lock and resolves once
   * PostgreSQL committed it (503 STORE_UNAVAILABLE when it does not answer, nothing changed). The
   * events the work raises (a revoked token closing sessions, a device's revision) are held until
   * then, so nothing acts on a change that did not happen.
   */
  async write<T>(work: () => T): Promise<T> {
    const writes = this.writes;
    if (!writes) return work();
    const held: Array<() => void> = [];
    const result = await writes.run(() => {
      this.#held = held;
      try {
        return work();
      } finally {
        this.#held = undefined;
        // The dry run's reads may have filled the caches with rows that were rolled back.
        this.#catalog.invalidate();
      }
    });
    this.#catalog.invalidate();
    for (const then of held) then();
    return result;
  }

  override emit<K extends keyof RegistryEvents>(event: K, ...args: RegistryEvents[K]): boolean {
    if (this.#held) {
      this.#held.push(() => super.emit(event, ...(args as never)));
      return true;
    }
    return super.emit(event, ...(args as never));
  }

  /** Runs `work` once the write under way (if any) is committed, with its events; at once otherwise. */
  afterCommit(work: () => void): void {
    if (this.#held) this.#held.push(work);
    else work();
  }

  /**
   * At a gateway, a device its central manages is read-only to every local writer (docs/sync.md,
   * "Manage a fleet from the central"): its definition comes down from the central, and a local
   * change would be overwritten by the next revision anyway.
   */
  assertLocallyEditable(id: string): void {
    if (this.#store.managedHere.isManaged(id)) {
      throw new ServiceError('MANAGED_BY_CENTRAL', `device ${id} is managed by the central: change it there (PUT /device/${id}/… at the central), not at this gateway`);
    }
  }

  requireDevice(id: string): DeviceRecord {
    const device = this.#catalog.device(id);
    if (!device) throw new ServiceError('DEVICE_NOT_FOUND', `device ${id} not found`);
    return device;
  }

  /**
   * `gateway` (central role) makes the device managed for that gateway: its definition goes down to
   * it. The gateway catalog's own devices are assigned but not managed (`managed: false`).
   */
  createDevice(body: unknown, options: { managed?: boolean } = {}): { device: DeviceRecord; token: string; tokenId: string } {
    const b = requireObject(body ?? {}, 'device');
    const name = memberIgnoringCase(b, 'name') ?? 'device';
    if (typeof name !== 'string' || name.length === 0 || name.length > 128) throw new ServiceError('INVALID_BODY', '"name" must be a string of 1 to 128 characters');
    const id = memberIgnoringCase(b, 'id');
    if (id !== undefined && id !== null) {
      // An admin may choose the ID (pre-assigning a device to a gateway at a central, docs/sync.md).
      if (typeof id !== 'string' || !ID_PATTERN.test(id)) throw new ServiceError('INVALID_BODY', '"id" must be 24 characters of A-Z, a-z and 0-9');
      if (this.#store.devices.get(id)) throw new ServiceError('DEVICE_EXISTS', `device ${id} already exists`);
    }
    const gateway = memberIgnoringCase(b, 'gateway');
    if (gateway !== undefined && gateway !== null) {
      if (typeof gateway !== 'string' || !this.#store.gateways.get(gateway)) {
        throw new ServiceError('GATEWAY_NOT_FOUND', `gateway ${String(gateway)} not found`);
      }
      const limit = this.#central?.devicesPerGateway;
      if (limit !== undefined && this.#store.gateways.deviceCount(gateway) >= limit) {
        throw new ServiceError('GATEWAY_DEVICE_LIMIT', `gateway ${gateway} already has ${limit} devices (central.devicesPerGateway)`);
      }
    }
    // One transaction (one commit) for the device and, when it is managed, its fleet row.
    const created = this.#store.transaction(() => {
      const device = this.#store.devices.create(
        {
          name,
          title: optionalText(b, 'title'),
          description: optionalText(b, 'description'),
          id: (id as string | null | undefined) ?? undefined,
          gatewayId: (gateway as string | null | undefined) ?? null,
        },
        this.#clock.now(),
      );
      if (gateway && options.managed !== false) this.#store.fleet.assign(device.device.id, gateway as string);
      return device;
    });
    this.#catalog.invalidate();
    this.emit('deviceChanged', created.device.id);
    return created;
  }

  updateDevice(id: string, body: unknown): DeviceRecord {
    this.requireDevice(id);
    this.assertLocallyEditable(id);
    const b = requireObject(body, 'device');
    const fields: { name?: string; title?: string | null; description?: string | null } = {};
    const name = memberIgnoringCase(b, 'name');
    if (name !== undefined) {
      if (typeof name !== 'string' || name.length === 0 || name.length > 128) throw new ServiceError('INVALID_BODY', '"name" must be a string of 1 to 128 characters');
      fields.name = name;
    }
    const title = optionalText(b, 'title');
    if (title !== undefined) fields.title = title;
    const description = optionalText(b, 'description');
    if (description !== undefined) fields.description = description;
    this.#store.devices.update(id, fields, this.#clock.now());
    this.#catalog.invalidate();
    this.emit('deviceChanged', id);
    return this.requireDevice(id);
  }

  deleteDevice(id: string): void {
    this.requireDevice(id);
    this.assertLocallyEditable(id);
    const tokenIds = this.#store.tokens.liveDeviceTokenIds(id);
    this.#store.devices.delete(id);
    this.#catalog.invalidate();
    for (const tokenId of tokenIds) this.emit('tokenRevoked', tokenId);
    this.emit('deviceDeleted', id);
    this.emit('deviceChanged', id);
  }

  /** POST .../assets: a new asset; an existing name is 400 ASSET_EXISTS (the cloud SDKs rely on it). */
  createAsset(deviceId: string, body: unknown): AssetRecord {
    this.requireDevice(deviceId);
    this.assertLocallyEditable(deviceId);
    const b = requireObject(body, 'asset');
    const name = memberIgnoringCase(b, 'name');
    const problem = assetNameProblem(name);
    if (problem) throw new ServiceError('INVALID_NAME', `"name" ${problem}`);
    if (this.#store.assets.byName(deviceId, name as string)) {
      throw new ServiceError('ASSET_EXISTS', `asset "${name as string}" already exists on device ${deviceId}`);
    }
    return this.#insertAsset(deviceId, name as string, b, memberIgnoringCase(b, 'is'));
  }

  /** PUT .../asset/<name>: create or update; `is` defaults to sensor on create and stays on update. */
  upsertAsset(deviceId: string, name: string, body: unknown): { asset: AssetRecord; created: boolean } {
    this.requireDevice(deviceId);
    this.assertLocallyEditable(deviceId);
    const b = requireObject(body, 'asset');
    const bodyName = memberIgnoringCase(b, 'name');
    if (bodyName !== undefined && bodyName !== name) throw new ServiceError('INVALID_BODY', `"name" ${JSON.stringify(bodyName)} must equal the path's asset name "${name}"`);
    const problem = assetNameProblem(name);
    if (problem) throw new ServiceError('INVALID_NAME', `asset name ${problem}`);
    const existing = this.#store.assets.byName(deviceId, name);
    if (!existing) return { asset: this.#insertAsset(deviceId, name, b, memberIgnoringCase(b, 'is') ?? 'sensor'), created: true };
    const next: AssetRecord = { ...existing };
    const is = memberIgnoringCase(b, 'is');
    if (is !== undefined) next.is = parseKind(is);
    const profile = memberIgnoringCase(b, 'profile');
    if (profile !== undefined) next.profile = this.#compiledProfile(profile);
    const title = optionalText(b, 'title');
    if (title !== undefined) next.title = title;
    const description = optionalText(b, 'description');
    if (description !== undefined) next.description = description;
    const updated = this.#store.assets.update(next, this.#clock.now());
    this.#catalog.invalidate();
    this.emit('deviceChanged', deviceId);
    return { asset: updated, created: false };
  }

  /** A profile is compiled before it is stored: one that cannot be is refused (422) rather than failing every state later. */
  #compiledProfile(raw: unknown): Profile {
    const profile = normalizeProfile(raw);
    this.#catalog.validators.assertCompiles(profile);
    return profile;
  }

  #insertAsset(deviceId: string, name: string, b: Record<string, unknown>, is: unknown): AssetRecord {
    const kind = parseKind(is);
    const rawProfile = memberIgnoringCase(b, 'profile');
    if (rawProfile === undefined) throw new ServiceError('INVALID_PROFILE', '"profile" is required');
    const profile = this.#compiledProfile(rawProfile);
    if (this.#store.assets.count(deviceId) >= this.#limits.assetsPerDevice) {
      throw new ServiceError('TOO_MANY_ASSETS', `device ${deviceId} already has the maximum of ${this.#limits.assetsPerDevice} assets`);
    }
    const asset = this.#store.assets.create(
      { deviceId, name, is: kind, profile, title: optionalText(b, 'title') ?? null, description: optionalText(b, 'description') ?? null },
      this.#clock.now(),
    );
    this.#catalog.invalidate();
    this.emit('deviceChanged', deviceId);
    return asset;
  }

  deleteAsset(deviceId: string, name: string): void {
    this.requireDevice(deviceId);
    this.assertLocallyEditable(deviceId);
    const asset = this.#store.assets.byName(deviceId, name);
    if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${name}" not found on device ${deviceId}`);
    this.#store.assets.delete(asset.id);
    this.#catalog.invalidate();
    this.emit('assetDeleted', asset);
    this.emit('deviceChanged', deviceId);
  }

  createAppToken(body: unknown): { token: TokenRecord; secret: string } {
    const b = requireObject(body, 'token');
    const name = memberIgnoringCase(b, 'name');
    if (typeof name !== 'string' || name.length === 0 || name.length > 128) throw new ServiceError('INVALID_BODY', '"name" must be a string of 1 to 128 characters');
    const kind = (memberIgnoringCase(b, 'kind') ?? 'app') as TokenKind;
    if (kind !== 'app') throw new ServiceError('INVALID_BODY', '"kind" must be "app" (device tokens come with their device)');
    const created = this.#store.tokens.create({ kind, name, deviceId: null, scopes: parseScopes(memberIgnoringCase(b, 'scopes')) }, this.#clock.now());
    this.#catalog.invalidate();
    return created;
  }

  revokeToken(id: string): void {
    if (!this.#store.tokens.revoke(id, this.#clock.now())) {
      const token = this.#store.tokens.get(id);
      if (!token) throw new ServiceError('TOKEN_NOT_FOUND', `token ${id} not found`);
      return; // already revoked: revoking is idempotent
    }
    this.#catalog.invalidate();
    this.emit('tokenRevoked', id);
  }

  /**
   * New codec settings for a device (compiled first: a bad one leaves the old active). The cached
   * device record holds its payload format, so the catalog forgets it, as after every write here.
   */
  async setDeviceCodec(codecs: DeviceCodecs, device: DeviceRecord, body: unknown): Promise<{ uplink: unknown; downlink: unknown; warnings: string[] }> {
    this.assertLocallyEditable(device.id);
    const settings = parseCodecSettings(body);
    const { codec, warnings, version } = await codecs.compile(settings);
    const source = JSON.stringify(settings);
    try {
      // Compiled first and outside the write (it may take a while): the write itself is the store's.
      await this.write(() => {
        this.#store.devices.update(device.id, { payloadFormat: settings.uplink.format, codec: source }, this.#clock.now());
        this.#catalog.invalidate();
        this.emit('deviceChanged', device.id);
      });
    } catch (err) {
      codec.dispose();
      throw err;
    }
    codecs.activate(device.id, source, codec, version);
    return { ...codecSettingsView(this.#store.devices.get(device.id)!), warnings };
  }

  rotateDeviceToken(deviceId: string): { tokenId: string; token: string } {
    const device = this.requireDevice(deviceId);
    this.assertLocallyEditable(deviceId);
    const { token, secret, revoked } = this.#store.tokens.rotateDeviceToken(deviceId, device.name, this.#clock.now());
    this.#catalog.invalidate();
    for (const id of revoked) this.emit('tokenRevoked', id);
    this.emit('deviceChanged', deviceId);
    return { tokenId: token.id, token: secret };
  }
}
