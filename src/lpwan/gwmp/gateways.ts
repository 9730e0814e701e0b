import type { Clock } from '../../core/time.js';
import type { GatewayStat } from './protocol.js';

/** What the door knows of one packet forwarder. */
export interface GatewayState {
  eui: string;
  version: number;
  /** Where PULL_RESP goes: the source of the most recent PULL_DATA (the forwarder's NAT hole). */
  downlink: { address: string; port: number } | undefined;
  lastPullAt: number | undefined;
  lastSeenAt: number;
  /** The last `stat`, known fields only (./protocol.ts readStat). */
  stat: GatewayStat | undefined;
  uplinks: number;
  downlinks: number;
  txErrors: number;
}

export interface GatewayTableOptions {
  clock: Clock;
  /** Gateways kept at most; past it the one heard least recently is forgotten. */
  max: number;
  /** A gateway not heard for this long is forgotten (ms). */
  expiryMs: number;
  /** A gateway whose last PULL_DATA is older than this is offline: no downlink path (ms). */
  onlineMs: number;
}

/** One gateway as /healthz shows it. */
export interface GatewaySummaryEntry {
  eui: string;
  online: boolean;
  lastSeen: string;
  protocolVersion: number;
  uplinks: number;
  downlinks: number;
  txErrors: number;
  stat?: GatewayStat;
}

export interface GatewaySummary {
  known: number;
  online: number;
  max: number;
  evicted: number;
  expired: number;
  /** The most recently heard gateways first, at most the number asked for. */
  recent: GatewaySummaryEntry[];
}

/**
 * The gateways the packet forwarder door has heard from. Anyone who reaches the UDP port can name
 * any EUI, so the table is bounded (the least recently heard gateway goes first), forgets gateways
 * not heard for a while, and every operation is O(1) amortized whatever the senders do: maps keep
 * their insertion order, so re-inserting on every datagram keeps them ordered by last contact.
 */
export class GatewayTable {
  readonly #options: GatewayTableOptions;
  /** Every known gateway, least recently heard first. */
  readonly #byContact = new Map<string, GatewayState>();
  /** Gateways with a PULL_DATA, least recent PULL_DATA first (those at the front go offline first). */
  readonly #byPull = new Map<string, GatewayState>();
  #evicted = 0;
  #expired = 0;

  constructor(options: GatewayTableOptions) {
    this.#options = options;
  }

  get evicted(): number {
    return this.#evicted;
  }

  get size(): number {
    return this.#byContact.size;
  }

  get(eui: string): GatewayState | undefined {
    return this.#byContact.get(eui);
  }

  /**
   * The gateway of a datagram just received, created when new; `isNew` tells the caller (who logs
   * it). Past the bound the least recently heard gateway is forgotten: a flood of made-up EUIs
   * pushes out other made-up EUIs, and a real forwarder comes back with its next PULL_DATA.
   */
  heard(eui: string, version: number): { gateway: GatewayState; isNew: boolean; evicted: GatewayState | undefined } {
    const now = this.#options.clock.now();
    this.#expire(now);
    let gateway = this.#byContact.get(eui);
    const isNew = gateway === undefined;
    let evicted: GatewayState | undefined;
    if (gateway) this.#byContact.delete(eui);
    else {
      gateway = { eui, version, downlink: undefined, lastPullAt: undefined, lastSeenAt: now, stat: undefined, uplinks: 0, downlinks: 0, txErrors: 0 };
      if (this.#byContact.size >= this.#options.max) {
        evicted = this.#byContact.values().next().value;
        if (evicted) this.#forget(evicted);
        this.#evicted++;
      }
    }
    gateway.version = version;
    gateway.lastSeenAt = now;
    this.#byContact.set(eui, gateway);
    return { gateway, isNew, evicted };
  }

  /** A PULL_DATA from `address:port`: the gateway's downlink path from now on. */
  pulled(gateway: GatewayState, address: string, port: number): void {
    gateway.downlink = { address, port };
    gateway.lastPullAt = this.#options.clock.now();
    this.#byPull.delete(gateway.eui);
    this.#byPull.set(gateway.eui, gateway);
  }

  isOnline(gateway: GatewayState, now = this.#options.clock.now()): boolean {
    return gateway.lastPullAt !== undefined && gateway.lastPullAt >= now - this.#options.onlineMs;
  }

  /** Gateways with a recent PULL_DATA (those that can take downlinks). */
  online(): number {
    const now = this.#options.clock.now();
    for (const gateway of this.#byPull.values()) {
      if (this.isOnline(gateway, now)) break;
      this.#byPull.delete(gateway.eui);
    }
    return this.#byPull.size;
  }

  summary(recentLimit: number): GatewaySummary {
    const now = this.#options.clock.now();
    this.#expire(now);
    const recent: GatewaySummaryEntry[] = [];
    // Newest are at the end of the map; a bounded walk from there would need a reverse iterator, so
    // the keys are copied (at most `max` strings) and only the last few gateways are read.
    const euis = [...this.#byContact.keys()];
    for (let i = euis.length - 1; i >= 0 && recent.length < recentLimit; i--) {
      const g = this.#byContact.get(euis[i]!)!;
      recent.push({
        eui: g.eui,
        online: this.isOnline(g, now),
        lastSeen: new Date(g.lastSeenAt).toISOString(),
        protocolVersion: g.version,
        uplinks: g.uplinks,
        downlinks: g.downlinks,
        txErrors: g.txErrors,
        ...(g.stat ? { stat: g.stat } : {}),
      });
    }
    return { known: this.#byContact.size, online: this.online(), max: this.#options.max, evicted: this.#evicted, expired: this.#expired, recent };
  }

  /** Forgets gateways not heard for `expiryMs`: they are at the front of the contact order. */
  #expire(now: number): void {
    const before = now - this.#options.expiryMs;
    for (const gateway of this.#byContact.values()) {
      if (gateway.lastSeenAt >= before) break;
      this.#forget(gateway);
      this.#expired++;
    }
  }

  #forget(gateway: GatewayState): void {
    this.#byContact.delete(gateway.eui);
    this.#byPull.delete(gateway.eui);
  }
}
