import { ServiceError } from '../../core/errors.js';
import type { Clock } from '../../core/time.js';
import type { Catalog } from '../../store/catalog.js';
import type { GatewayStore, GatewayRecord } from '../../store/gateways.js';
import type { FleetSummary } from '../../store/fleet.js';
import type { Registry } from '../../registry/registry.js';
import { isJsonObject, memberIgnoringCase } from '../../core/json.js';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/**
 * `GET /gateway/<id>`: `{id, name, connected, lastSeen, devices, config}`; `config` says how far the
 * gateway is with its managed devices (`pending`: those whose newest revision it has not applied).
 */
export function gatewayView(gateway: GatewayRecord, devices: string[], connected: boolean, config: FleetSummary) {
  return {
    id: gateway.id,
    name: gateway.name,
    createdOn: iso(gateway.createdOn),
    connected,
    lastSeen: iso(gateway.lastSeen),
    devices,
    config: { managed: config.managed, pending: config.pending, lastAppliedAt: iso(config.lastAppliedAt) },
  };
}

/**
 * The central's gateways: the rules for creating and deleting them, shared by the HTTP API and the
 * CLI. Deleting a gateway revokes its tokens (live sessions close) and leaves its devices, and
 * their data, at the central, assigned to no gateway.
 */
export class GatewayRegistry {
  readonly store: GatewayStore;
  readonly #catalog: Catalog;
  readonly #registry: Registry;
  readonly #clock: Clock;

  constructor(catalog: Catalog, registry: Registry, gateways: GatewayStore, clock: Clock) {
    this.#catalog = catalog;
    this.#registry = registry;
    this.#clock = clock;
    this.store = gateways;
  }

  create(body: unknown): { gateway: GatewayRecord; token: string; tokenId: string } {
    if (!isJsonObject(body ?? {})) throw new ServiceError('INVALID_BODY', 'gateway must be a JSON object {"name"}');
    const name = memberIgnoringCase((body ?? {}) as Record<string, unknown>, 'name') ?? 'gateway';
    if (typeof name !== 'string' || name.length === 0 || name.length > 128) throw new ServiceError('INVALID_BODY', '"name" must be a string of 1 to 128 characters');
    const created = this.store.create(name, this.#clock.now());
    this.#catalog.invalidate();
    return created;
  }

  /** A write of the catalog (see Registry.write): answered once it is durable, its events after. */
  write<T>(work: () => T): Promise<T> {
    return this.#registry.write(work);
  }

  require(id: string): GatewayRecord {
    const gateway = this.store.get(id);
    if (!gateway) throw new ServiceError('GATEWAY_NOT_FOUND', `gateway ${id} not found`);
    return gateway;
  }

  delete(id: string): void {
    const tokens = this.store.delete(id);
    if (!tokens) throw new ServiceError('GATEWAY_NOT_FOUND', `gateway ${id} not found`);
    this.#catalog.invalidate();
    for (const tokenId of tokens) this.#registry.emit('tokenRevoked', tokenId);
  }
}
