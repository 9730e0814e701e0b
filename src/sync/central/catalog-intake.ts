import { ServiceError, isServiceError } from '../../core/errors.js';
import { ID_PATTERN } from '../../core/ids.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { GatewayStore } from '../../store/gateways.js';
import type { Store } from '../../store/store.js';
import type { Registry } from '../../registry/registry.js';
import { isJsonObject, memberIgnoringCase } from '../../core/json.js';

/**
 * The central's side of the gateway catalog (`gateway/<GatewayID>/device/<DeviceID>`, docs/sync.md):
 * a gateway's description of one of its devices creates or updates the device with the same ID,
 * assigned to that gateway, and its assets by name; an empty payload marks it removed at the
 * gateway (its data stays). A device ID that exists here for another gateway, or for none, is
 * refused: the caller reports it on `gateway/<GatewayID>/errors`. So is a new device beyond
 * `central.devicesPerGateway` (docs/security.md, "Sync limits"): one gateway token must not be able
 * to fill the central with devices.
 */
export class CatalogIntake {
  readonly #catalog: Catalog;
  readonly #registry: Registry;
  readonly #store: Pick<Store, 'devices' | 'fleet' | 'transaction'>;
  readonly #gateways: GatewayStore;
  readonly #clock: Clock;
  readonly #limits: { devicesPerGateway: number };

  constructor(
    catalog: Catalog,
    registry: Registry,
    store: Pick<Store, 'devices' | 'gateways' | 'fleet' | 'transaction'>,
    clock: Clock,
    limits: { devicesPerGateway: number },
  ) {
    this.#limits = limits;
    this.#catalog = catalog;
    this.#registry = registry;
    this.#store = store;
    this.#gateways = store.gateways;
    this.#clock = clock;
  }

  /**
   * Applies one catalog message; a refusal is resolved (and nothing changed), never thrown. On a
   * central on PostgreSQL the change is committed there first (Registry.write); a refusal
   * STORE_UNAVAILABLE means it was not, and the message is to be tried again.
   */
  async apply(gatewayId: string, deviceId: string, payload: Buffer): Promise<ServiceError | undefined> {
    try {
      await this.#registry.write(() => this.#store.transaction(() => this.#apply(gatewayId, deviceId, payload)));
      return undefined;
    } catch (err) {
      this.#catalog.invalidate();
      if (isServiceError(err)) return err;
      throw err;
    }
  }

  #apply(gatewayId: string, deviceId: string, payload: Buffer): void {
    if (!ID_PATTERN.test(deviceId)) throw new ServiceError('INVALID_BODY', `device ID ${JSON.stringify(deviceId)} is not 24 characters of A-Z, a-z and 0-9`);
    const existing = this.#store.devices.get(deviceId);
    if (existing && existing.gatewayId !== gatewayId) {
      const owner = existing.gatewayId ? `gateway ${existing.gatewayId}` : 'no gateway';
      throw new ServiceError('DEVICE_NOT_ASSIGNED', `device ${deviceId} exists at the central and belongs to ${owner}`);
    }
    // A device managed here flows down to the gateway; its gateway does not describe it back up.
    if (this.#store.fleet.live(deviceId)) throw new ServiceError('MANAGED_BY_CENTRAL', `device ${deviceId} is managed by the central; its definition comes from here`);
    if (payload.length === 0) {
      if (existing) {
        this.#gateways.setRemovedAtGateway(deviceId, this.#clock.now());
        this.#catalog.invalidate();
      }
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(payload.toString('utf8'));
    } catch {
      throw new ServiceError('INVALID_JSON', 'catalog message is not valid JSON');
    }
    if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', 'catalog message must be a JSON object {id, name, title, description, assets}');
    const id = memberIgnoringCase(body, 'id');
    if (id !== undefined && id !== deviceId) throw new ServiceError('INVALID_BODY', `"id" ${JSON.stringify(id)} differs from the topic's device ${deviceId}`);
    const assets = memberIgnoringCase(body, 'assets') ?? [];
    if (!Array.isArray(assets)) throw new ServiceError('INVALID_BODY', '"assets" must be an array');
    const fields = { name: memberIgnoringCase(body, 'name'), title: memberIgnoringCase(body, 'title'), description: memberIgnoringCase(body, 'description') };
    if (existing) {
      this.#registry.updateDevice(deviceId, fields);
      if (existing.removedAtGateway !== null && existing.removedAtGateway !== undefined) this.#gateways.setRemovedAtGateway(deviceId, null);
    } else {
      const limit = this.#limits.devicesPerGateway;
      if (this.#gateways.deviceCount(gatewayId) >= limit) {
        throw new ServiceError('GATEWAY_DEVICE_LIMIT', `gateway ${gatewayId} already has ${limit} devices at the central (central.devicesPerGateway); device ${deviceId} not created`);
      }
      this.#registry.createDevice({ ...fields, id: deviceId, gateway: gatewayId }, { managed: false });
    }
    for (const asset of assets) {
      if (!isJsonObject(asset)) throw new ServiceError('INVALID_BODY', '"assets" must hold objects {name, is, profile, title, description}');
      const name = memberIgnoringCase(asset, 'name');
      if (typeof name !== 'string') throw new ServiceError('INVALID_NAME', 'every asset needs a "name"');
      const { name: _n, ...rest } = asset;
      this.#registry.upsertAsset(deviceId, name, rest);
    }
    this.#catalog.invalidate();
  }
}
