import type { Catalog } from '../../store/catalog.js';
import type { FleetStore, FleetSummary, ManagedRow } from '../../store/fleet.js';
import type { Store } from '../../store/store.js';
import type { GatewayStore, PendingCommand } from '../../store/gateways.js';
import type { AppliedRevisions, LorawanCounters } from '../../wire/messages.js';

/**
 * What the central keeps about its gateways behind small async interfaces (docs/architecture.md,
 * "Ports of the central"): the SQLite implementations below serve one machine today; a PostgreSQL
 * + Redis implementation is a second set of these classes, not a rewrite of the hub or the fleet.
 * Methods are async because the other engines answer over the network.
 */

/** Where gateways are connected and when they were last seen. `connected` is this node's own view (sync: it decides a command's route). */
export interface GatewayPresence {
  opened(gatewayId: string, at: number): Promise<void>;
  closed(gatewayId: string, at: number): Promise<void>;
}

/** Commands waiting for an offline gateway (24 h or `meta.ttl`), delivered once when it returns. */
export interface PendingCommands {
  queue(command: { gatewayId: string; deviceId: string; topic: string; payload: string; expiresAt: number }): Promise<void>;
  /** Removes and returns the gateway's unexpired commands, oldest first. */
  take(gatewayId: string, now: number): Promise<PendingCommand[]>;
}

/** A managed device's definition as now computed (its JSON without the revision), or null: the device is gone. */
export interface DefinitionChange {
  deviceId: string;
  content: string | null;
}

/** Managed-device revisions: which gateway manages each device, the definitions at their revisions, what each gateway applied. */
export interface ManagedRevisions {
  /** Of these devices, those managed for a gateway now (device → gateway). */
  managed(deviceIds: readonly string[]): Promise<Map<string, string>>;
  liveDeviceIds(): Promise<string[]>;
  /**
   * Managed for this gateway from now on (null: for none); the gateway it leaves gets a removal. Sets
   * the device's gateway. `check` runs first, in the same write (a limit decided with the write).
   */
  assign(deviceId: string, gatewayId: string | null, check?: () => void): Promise<void>;
  /** New definitions: a new revision for each that differs (a removal for a device gone); returns the gateways with something new. */
  update(changes: readonly DefinitionChange[]): Promise<Set<string>>;
  /** What the gateway has yet to apply, oldest revision first. */
  pending(gatewayId: string): Promise<ManagedRow[]>;
  recordApplied(gatewayId: string, revisions: AppliedRevisions, at: number): Promise<void>;
  recordCounters(deviceId: string, counters: LorawanCounters): Promise<void>;
  summary(gatewayId: string): Promise<FleetSummary>;
}

/** Tells the central's caches that another process or node changed devices, assets or tokens. */
export interface ChangeFeed {
  subscribe(listener: () => void): () => void;
}

/**
 * Runs a synchronous write of the catalog tables (Registry.write): at once on one machine; on a
 * central on PostgreSQL, committed there first (docs/scale-out.md).
 */
export type CatalogWrite = <T>(work: () => T) => Promise<T>;

const writeNow: CatalogWrite = async (work) => work();

export class SqliteGatewayPresence implements GatewayPresence {
  readonly #gateways: GatewayStore;
  readonly #write: CatalogWrite;

  constructor(gateways: GatewayStore, write: CatalogWrite = writeNow) {
    this.#gateways = gateways;
    this.#write = write;
  }

  async opened(gatewayId: string, at: number): Promise<void> {
    await this.#write(() => this.#gateways.touch(gatewayId, at));
  }

  async closed(gatewayId: string, at: number): Promise<void> {
    await this.#write(() => this.#gateways.touch(gatewayId, at));
  }
}

export class SqlitePendingCommands implements PendingCommands {
  readonly #gateways: GatewayStore;

  constructor(gateways: GatewayStore) {
    this.#gateways = gateways;
  }

  async queue(command: { gatewayId: string; deviceId: string; topic: string; payload: string; expiresAt: number }): Promise<void> {
    this.#gateways.queueCommand(command);
  }

  async take(gatewayId: string, now: number): Promise<PendingCommand[]> {
    return this.#gateways.takeCommands(gatewayId, now);
  }
}

export class SqliteManagedRevisions implements ManagedRevisions {
  readonly #fleet: FleetStore;
  readonly #store: Pick<Store, 'transaction'>;
  readonly #write: CatalogWrite;

  constructor(store: Pick<Store, 'fleet' | 'transaction'>, write: CatalogWrite = writeNow) {
    this.#fleet = store.fleet;
    this.#store = store;
    this.#write = write;
  }

  async managed(deviceIds: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const id of deviceIds) {
      const row = this.#fleet.live(id);
      if (row) out.set(id, row.gatewayId);
    }
    return out;
  }

  async liveDeviceIds(): Promise<string[]> {
    return this.#fleet.liveDeviceIds();
  }

  async assign(deviceId: string, gatewayId: string | null, check?: () => void): Promise<void> {
    await this.#write(() => {
      check?.();
      this.#fleet.assign(deviceId, gatewayId);
    });
  }

  /** In one transaction: one commit for a burst of changes, not one per device. */
  async update(changes: readonly DefinitionChange[]): Promise<Set<string>> {
    const gateways = new Set<string>();
    // Nothing differs (the usual answer to a reload after another node's change): no write at all,
    // which on several nodes would take the cluster's catalog lock for nothing.
    const differ = changes.filter(({ deviceId, content }) => {
      const row = this.#fleet.live(deviceId);
      return row !== undefined && (content === null || row.content !== content);
    });
    if (differ.length === 0) return gateways;
    await this.#write(() => this.#store.transaction(() => {
      for (const { deviceId, content } of changes) {
        const row = this.#fleet.live(deviceId);
        if (!row) continue;
        if (content === null) {
          this.#fleet.tombstone(row.gatewayId, deviceId);
          gateways.add(row.gatewayId);
        } else if (this.#fleet.setContent(row.gatewayId, deviceId, content) !== undefined) {
          gateways.add(row.gatewayId);
        }
      }
    }));
    return gateways;
  }

  async summary(gatewayId: string): Promise<FleetSummary> {
    return this.#fleet.summary(gatewayId);
  }

  async pending(gatewayId: string): Promise<ManagedRow[]> {
    return this.#fleet.pending(gatewayId);
  }

  async recordApplied(gatewayId: string, revisions: AppliedRevisions, at: number): Promise<void> {
    await this.#write(() => this.#fleet.applied(gatewayId, revisions, at));
  }

  async recordCounters(deviceId: string, counters: LorawanCounters): Promise<void> {
    await this.#write(() => this.#fleet.recordLorawanCounters(deviceId, counters.fCntUp, counters.fCntDown));
  }
}

/** SQLite's data version, polled by the catalog: a commit by the CLI (another process) is a change. */
export class SqliteChangeFeed implements ChangeFeed {
  readonly #catalog: Catalog;

  constructor(catalog: Catalog) {
    this.#catalog = catalog;
  }

  subscribe(listener: () => void): () => void {
    this.#catalog.on('externalChange', listener);
    return () => this.#catalog.off('externalChange', listener);
  }
}
