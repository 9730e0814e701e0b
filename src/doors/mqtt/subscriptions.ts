import type { Client } from 'aedes';
import type { Principal } from '../../core/access.js';
import { addTo, removeFrom } from '../../doors/mqtt/set-map.js';

/**
 * Whether a filter, split into its levels once when it was granted, matches a topic (MQTT 3.1.1
 * §4.7: `+` one level, `#` this level and all below, `$` topics only by a filter that names them).
 * The same rule as topics.ts `filterMatches`, without splitting the topic: it runs for every
 * message the service could publish.
 */
export function levelsMatch(levels: readonly string[], topic: string): boolean {
  const first = levels[0]!;
  if (topic.charCodeAt(0) === 36 /* $ */ && (first === '+' || first === '#')) return false;
  let start = 0;
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i]!;
    if (level === '#') return true;
    if (start > topic.length) return false; // the topic has fewer levels than the filter
    let end = topic.indexOf('/', start);
    if (end < 0) end = topic.length;
    if (level !== '+' && (end - start !== level.length || !topic.startsWith(level, start))) return false;
    start = end + 1;
  }
  return start > topic.length; // and not more levels either
}

/** Whose topics a session may receive, for the reach index: a device's own, or every device's (an application). */
type Reach = { kind: 'device'; deviceId: string } | { kind: 'app' };

interface Held {
  /** Undefined for a gateway session: its filters count for its limit only. */
  reach: Reach | undefined;
  /** Split into levels when the filter holds a wildcard, null for an exact topic name. */
  filters: Map<string, readonly string[] | null>;
  wildcards: number;
}

/** The leaf of a filter: the last level a matching topic ends with, or ANY_LEAF for `+` and `#`. */
const ANY_LEAF = '+';
function leafOf(filter: string): string {
  const leaf = filter.slice(filter.lastIndexOf('/') + 1);
  return leaf === '#' ? ANY_LEAF : leaf;
}

/** How many filters of a group of sessions can match topics ending with each leaf. */
class LeafCounts {
  readonly #byGroup = new Map<string, Map<string, number>>();

  change(group: string, filter: string, by: 1 | -1): void {
    const leaf = leafOf(filter);
    let counts = this.#byGroup.get(group);
    if (!counts) {
      counts = new Map();
      this.#byGroup.set(group, counts);
    }
    const n = (counts.get(leaf) ?? 0) + by;
    if (n > 0) counts.set(leaf, n);
    else counts.delete(leaf);
    if (counts.size === 0) this.#byGroup.delete(group);
  }

  has(group: string, leaf: string): boolean {
    const counts = this.#byGroup.get(group);
    return counts !== undefined && (counts.has(leaf) || counts.has(ANY_LEAF));
  }
}

/** The LeafCounts group of a reach: its device id, or one group for all applications (ids are never empty). */
const groupOf = (reach: Reach) => (reach.kind === 'app' ? '' : reach.deviceId);

/** Sessions by reach: those of a device, and those of applications. */
class SessionsByReach {
  readonly byDevice = new Map<string, Set<Client>>();
  readonly apps = new Set<Client>();

  join(reach: Reach, client: Client): void {
    if (reach.kind === 'app') this.apps.add(client);
    else addTo(this.byDevice, reach.deviceId, client);
  }

  leave(reach: Reach, client: Client): void {
    if (reach.kind === 'app') this.apps.delete(client);
    else removeFrom(this.byDevice, reach.deviceId, client);
  }
}

function reachOf(principal: Principal): Reach | undefined {
  if (principal.kind === 'app') return { kind: 'app' };
  if (principal.kind === 'device' && principal.deviceId) return { kind: 'device', deviceId: principal.deviceId };
  return undefined;
}

/**
 * The filters each session holds, kept by the door from its own subscribe decisions (aedes' client
 * keeps its own copy, which is private). A filter is added when authorizeSubscribe grants it —
 * aedes adds each granted filter before it asks about the next one of the same SUBSCRIBE, so the
 * per-connection limit counts exactly — and removed on UNSUBSCRIBE and when the session ends.
 *
 * Device and application sessions are also indexed by whose messages they may receive (the ACL,
 * acl.ts): a device token's sessions under its device, application tokens' sessions together. "Could
 * anyone get a message of device D" is then two lookups before any topic is built, and "does anyone
 * hold a filter matching this topic" one lookup among all exact filters (a dashboard subscribed to a
 * thousand feeds does not scan a thousand filters per state) plus a scan of the wildcard filters of
 * D's and applications' sessions only.
 */
export class SubscriptionIndex {
  readonly #held = new WeakMap<Client, Held>();
  /** Sessions holding any filter. */
  readonly #holding = new SessionsByReach();
  /** Sessions holding at least one wildcard filter. */
  readonly #wild = new SessionsByReach();
  /** Exact filters of device and application sessions, with how many sessions hold each. */
  readonly #exact = new Map<string, number>();
  /** Which leaves (`state`, `feed`, `errors` …) the filters of a device's sessions, and of applications', can match. */
  readonly #leaves = new LeafCounts();

  /** The number of filters the session holds. */
  count(client: Client): number {
    return this.#held.get(client)?.filters.size ?? 0;
  }

  holds(client: Client, filter: string): boolean {
    return this.#held.get(client)?.filters.has(filter) ?? false;
  }

  add(client: Client, principal: Principal, filter: string): void {
    let held = this.#held.get(client);
    if (!held) {
      held = { reach: reachOf(principal), filters: new Map(), wildcards: 0 };
      this.#held.set(client, held);
      if (held.reach) this.#holding.join(held.reach, client);
    }
    if (held.filters.has(filter)) return;
    const wildcard = filter.includes('+') || filter.includes('#');
    held.filters.set(filter, wildcard ? filter.split('/') : null);
    if (!held.reach) return;
    this.#leaves.change(groupOf(held.reach), filter, 1);
    if (!wildcard) this.#exact.set(filter, (this.#exact.get(filter) ?? 0) + 1);
    else if (held.wildcards++ === 0) this.#wild.join(held.reach, client);
  }

  remove(client: Client, filter: string): void {
    const held = this.#held.get(client);
    const levels = held?.filters.get(filter);
    if (!held || levels === undefined) return;
    held.filters.delete(filter);
    if (held.reach) {
      this.#leaves.change(groupOf(held.reach), filter, -1);
      if (levels === null) this.#release(filter);
      else if (--held.wildcards === 0) this.#wild.leave(held.reach, client);
    }
    if (held.filters.size === 0) {
      this.#held.delete(client);
      if (held.reach) this.#holding.leave(held.reach, client);
    }
  }

  /** The session ended: all its filters go. */
  drop(client: Client): void {
    const held = this.#held.get(client);
    if (held) for (const filter of [...held.filters.keys()]) this.remove(client, filter);
  }

  #release(filter: string): void {
    const n = this.#exact.get(filter)! - 1;
    if (n > 0) this.#exact.set(filter, n);
    else this.#exact.delete(filter);
  }

  /** Whether this session holds a filter matching the topic. */
  matches(client: Client, topic: string): boolean {
    const held = this.#held.get(client);
    if (!held) return false;
    if (held.filters.has(topic)) return true;
    return held.wildcards > 0 && this.#wildMatch(held, topic);
  }

  #wildMatch(held: Held, topic: string): boolean {
    for (const levels of held.filters.values()) if (levels !== null && levelsMatch(levels, topic)) return true;
    return false;
  }

  /** The device's own sessions that hold filters (for counting command deliveries). */
  deviceSessions(deviceId: string): ReadonlySet<Client> | undefined {
    return this.#holding.byDevice.get(deviceId);
  }

  /**
   * Whether a session that may read device D's topics holds a filter that can match a topic of D
   * ending with this leaf (`state`, `feed`, `errors`, `events`): two lookups, no topic built. A device
   * subscribed to its commands and errors only (what the cloud SDKs do) rules out its echo and feed.
   */
  mayReach(deviceId: string, leaf: string): boolean {
    return this.#leaves.has(deviceId, leaf) || this.#leaves.has('', leaf);
  }

  /** Whether a session that may read device D's topics holds a filter matching this topic of D. */
  reaches(deviceId: string, topic: string): boolean {
    if (this.#exact.has(topic)) return true;
    const own = this.#wild.byDevice.get(deviceId);
    if (own) for (const client of own) if (this.#wildMatch(this.#held.get(client)!, topic)) return true;
    for (const client of this.#wild.apps) if (this.#wildMatch(this.#held.get(client)!, topic)) return true;
    return false;
  }
}
