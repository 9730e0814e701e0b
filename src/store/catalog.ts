import { EventEmitter } from 'node:events';
import { hashToken, tokenKindOf } from '../core/ids.js';
import type { Principal } from '../core/access.js';
import { ProfileValidators, type ValueCheck } from '../core/profiles.js';
import type { AssetRecord, DeviceRecord } from '../core/model.js';
import type { Store } from './store.js';

/** What the catalog reads through, and the data version that tells it another process committed. */
export type CatalogSource = Pick<Store, 'devices' | 'assets' | 'tokens' | 'dataVersion'>;

/** Misses are cached too (as null); a cap keeps a flood of unknown tokens or ids from growing memory. */
const CACHE_LIMIT = 50_000;

function remember<V>(cache: Map<string, V>, key: string, value: V): V {
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(key, value);
  return value;
}

export interface CachedAsset extends AssetRecord {
  check: (value: unknown) => ValueCheck;
}

/**
 * Read-through caches of devices, assets (with their compiled profile validators) and tokens, so the
 * hot path does no SQL lookups. The CLI writes the same database from another process: every token
 * lookup (the first step of each request, MQTT connection and publish) compares SQLite's
 * `data_version`, and any commit from another connection empties the caches. That makes CLI-created
 * devices usable, and CLI-revoked tokens refused, on the very next request; a timer in the daemon
 * checks too, so sessions of revoked tokens are closed without waiting for traffic.
 * It keeps its store to itself: code that writes takes the aggregate it needs (docs/architecture.md).
 */
export class Catalog extends EventEmitter<{ externalChange: [] }> {
  readonly #store: CatalogSource;
  /** Compiled profile validators, shared with the registry so a profile is compiled before it is stored. */
  readonly validators = new ProfileValidators();
  readonly #devices = new Map<string, DeviceRecord | null>();
  readonly #assetsById = new Map<string, CachedAsset | null>();
  /** By device, then name: no key string is built per lookup (two per uplink on the hot path). */
  readonly #assetsByName = new Map<string, Map<string, CachedAsset | null>>();
  /** Entries in #assetsByName, bounded by CACHE_LIMIT like each of the other caches (names that do not exist are cached too). */
  #assetsByNameCount = 0;
  readonly #principals = new Map<string, Principal | null>();
  #dataVersion: number;

  constructor(store: CatalogSource) {
    super();
    this.#store = store;
    this.#dataVersion = store.dataVersion();
  }

  /** Drops every cache if another process committed; returns whether it did. */
  syncWithDisk(): boolean {
    const version = this.#store.dataVersion();
    if (version === this.#dataVersion) return false;
    this.#dataVersion = version;
    this.invalidate();
    this.emit('externalChange');
    return true;
  }

  /** Called after this process changes devices, assets or tokens. */
  invalidate(): void {
    this.#devices.clear();
    this.#assetsById.clear();
    this.#assetsByName.clear();
    this.#assetsByNameCount = 0;
    this.#principals.clear();
  }

  principalForSecret(secret: string): Principal | undefined {
    this.syncWithDisk();
    if (!tokenKindOf(secret)) return undefined;
    const hash = hashToken(secret);
    let principal = this.#principals.get(hash);
    if (principal === undefined) {
      const token = this.#store.tokens.findByHash(hash);
      principal = token ? { tokenId: token.id, kind: token.kind, deviceId: token.deviceId, scopes: token.scopes } : null;
      if (principal && token!.gatewayId) {
        const gatewayId = token!.gatewayId;
        principal.gatewayId = gatewayId;
        principal.ownsDevice = (deviceId) => this.device(deviceId)?.gatewayId === gatewayId;
      }
      remember(this.#principals, hash, principal);
    }
    return principal ?? undefined;
  }

  /** Whether a token id is still live (used to close sessions of revoked tokens). */
  isTokenLive(tokenId: string): boolean {
    const token = this.#store.tokens.get(tokenId);
    return !!token && token.revokedOn === null;
  }

  device(id: string): DeviceRecord | undefined {
    let device = this.#devices.get(id);
    if (device === undefined) {
      device = this.#store.devices.get(id) ?? null;
      remember(this.#devices, id, device);
    }
    return device ?? undefined;
  }

  #withValidator(asset: AssetRecord | undefined): CachedAsset | null {
    if (!asset) return null;
    // One literal, not `{ ...asset, check }`: a spread copy takes its layout from the record it
    // copies, so the cached assets had hundreds of hidden classes, and every read of an asset's
    // field on the hot path (each state's `check`, `id`, `name`) missed V8's inline caches.
    return {
      id: asset.id,
      deviceId: asset.deviceId,
      name: asset.name,
      title: asset.title,
      description: asset.description,
      is: asset.is,
      profile: asset.profile,
      createdOn: asset.createdOn,
      updatedOn: asset.updatedOn,
      check: this.validators.validatorFor(asset.profile),
    };
  }

  assetByName(deviceId: string, name: string): CachedAsset | undefined {
    let byName = this.#assetsByName.get(deviceId);
    let asset = byName?.get(name);
    if (asset === undefined) {
      asset = this.#withValidator(this.#store.assets.byName(deviceId, name));
      if (this.#assetsByNameCount >= CACHE_LIMIT) {
        this.#assetsByName.clear();
        this.#assetsByNameCount = 0;
        byName = undefined;
      }
      if (!byName) this.#assetsByName.set(deviceId, (byName = new Map()));
      byName.set(name, asset);
      this.#assetsByNameCount++;
    }
    return asset ?? undefined;
  }

  assetById(id: string): CachedAsset | undefined {
    let asset = this.#assetsById.get(id);
    if (asset === undefined) {
      asset = this.#withValidator(this.#store.assets.byId(id));
      remember(this.#assetsById, id, asset);
    }
    return asset ?? undefined;
  }
}
