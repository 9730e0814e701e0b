import type { Catalog } from '../../store/catalog.js';
import type { FleetStore, ManagedRow } from '../../store/fleet.js';
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

/** Managed-device revisions: what each gateway has yet to apply, and what it reported. */
export interface ManagedRevisions {
  pending(gatewayId: string): Promise<ManagedRow[]>;
  recordApplied(gatewayId: string, revisions: AppliedRevisions, at: number): Promise<void>;
  recordCounters(deviceId: string, counters: LorawanCounters): Promise<void>;
}

/** Tells the central's caches that another process or node changed devices, assets or tokens. */
export interface ChangeFeed {
  subscribe(listener: () => void): () => void;
}

export class SqliteGatewayPresence implements GatewayPresence {
  readonly #gateways: GatewayStore;

  constructor(gateways: GatewayStore) {
    this.#gateways = gateways;
  }

  async opened(gatewayId: string, at: number): Promise<void> {
    this.#gateways.touch(gatewayId, at);
  }

  async closed(gatewayId: string, at: number): Promise<void> {
    this.#gateways.touch(gatewayId, at);
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

  constructor(fleet: FleetStore) {
    this.#fleet = fleet;
  }

  async pending(gatewayId: string): Promise<ManagedRow[]> {
    return this.#fleet.pending(gatewayId);
  }

  async recordApplied(gatewayId: string, revisions: AppliedRevisions, at: number): Promise<void> {
    this.#fleet.applied(gatewayId, revisions, at);
  }

  async recordCounters(deviceId: string, counters: LorawanCounters): Promise<void> {
    this.#fleet.recordLorawanCounters(deviceId, counters.fCntUp, counters.fCntDown);
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
