import type { DeviceStore } from './devices.js';
import type { HistoryPage, HistoryQuery, StateStore } from './states.js';

/** An asset's latest state: the one with the greatest `at` (ties: the last received). */
export interface LatestState {
  at: number;
  valueJson: string;
}

/**
 * Everything the daemon reads about states (docs/architecture.md, "Ports of the central"): the
 * HTTP API's latest state and history, the asset views, the MQTT door's retained feed at start,
 * `outpost status`. A gateway and a single-machine central read their SQLite file; central nodes
 * on PostgreSQL read PostgreSQL itself (docs/scale-out.md), so every node answers with what any
 * node stored. Both answer alike: the same history order, the same opaque cursors (`<at>:<id>` in
 * base64url), the same page byte budget.
 */
export interface StateReads {
  latest(assetId: string): Promise<LatestState | undefined>;
  /** The latest state of each of these assets that has one. */
  latestOf(assetIds: readonly string[]): Promise<Map<string, LatestState>>;
  /** Every asset's latest state (the MQTT retained feed, rebuilt at start). */
  allLatest(): Promise<Array<LatestState & { assetId: string }>>;
  /** Newest first; see StateStore.history for the cursor and the budget. */
  history(assetId: string, query: HistoryQuery): Promise<HistoryPage>;
  /**
   * The `at` of each device's newest latest state (the device list's "last seen"); `deviceOf` maps
   * an asset to its device for a store that does not hold the catalog.
   */
  lastSeenByDevice(deviceOf: (assetId: string) => string | undefined): Promise<Map<string, number>>;
  /** States stored (PostgreSQL: the planner's estimate, see docs/scale-out.md) and when the newest was received. */
  figures(): Promise<{ stored: number; lastReceivedAt: number | null }>;
}

/** The node's own SQLite file: StateStore's answers, unchanged. */
export class SqliteStateReads implements StateReads {
  readonly #states: StateStore;
  readonly #devices: DeviceStore;

  constructor(store: { states: StateStore; devices: DeviceStore }) {
    this.#states = store.states;
    this.#devices = store.devices;
  }

  async latest(assetId: string): Promise<LatestState | undefined> {
    return this.#states.latest(assetId);
  }

  async latestOf(assetIds: readonly string[]): Promise<Map<string, LatestState>> {
    return this.#states.latestOf(assetIds);
  }

  async allLatest(): Promise<Array<LatestState & { assetId: string }>> {
    return this.#states.allLatest();
  }

  async history(assetId: string, query: HistoryQuery): Promise<HistoryPage> {
    return this.#states.history(assetId, query);
  }

  async lastSeenByDevice(): Promise<Map<string, number>> {
    return this.#devices.lastStateAtByDevice();
  }

  async figures(): Promise<{ stored: number; lastReceivedAt: number | null }> {
    return { stored: this.#states.count(), lastReceivedAt: this.#states.lastReceivedAt() };
  }
}
