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

/**
 * The filters each session holds, kept by the door from its own subscribe decisions (aedes' client
 * keeps its own copy, which is private). A filter is added when authorizeSubscribe grants it —
 * aedes adds each granted filter before it asks about the next one of the same SUBSCRIBE, so the
 * per-connection limit counts exactly — and removed on UNSUBSCRIBE and when the session ends.
 *
 * Only sessions that hold at least one filter are indexed, by whose messages they may receive (the
 * ACL, acl.ts): a device token's sessions under its device, application tokens' sessions together.
 * So "could anyone get this message of device D" is two lookups before any topic is built, and in
 * the usual cases (nobody subscribed, or only devices to their own command topics) nothing is.
 */
export class SubscriptionIndex {
  readonly #filters = new WeakMap<Client, Map<string, readonly string[]>>();
  /** Device sessions holding filters, by device. */
  readonly #byDevice = new Map<string, Set<Client>>();
  /** Application sessions holding filters. */
  readonly #apps = new Set<Client>();

  /** The number of filters the session holds. */
  count(client: Client): number {
    return this.#filters.get(client)?.size ?? 0;
  }

  holds(client: Client, filter: string): boolean {
    return this.#filters.get(client)?.has(filter) ?? false;
  }

  add(client: Client, principal: Principal, filter: string): void {
    let filters = this.#filters.get(client);
    if (!filters) {
      filters = new Map();
      this.#filters.set(client, filters);
      if (principal.kind === 'app') this.#apps.add(client);
      else if (principal.kind === 'device' && principal.deviceId) addTo(this.#byDevice, principal.deviceId, client);
    }
    if (!filters.has(filter)) filters.set(filter, filter.split('/'));
  }

  remove(client: Client, principal: Principal, filter: string): void {
    const filters = this.#filters.get(client);
    if (!filters?.delete(filter) || filters.size > 0) return;
    this.drop(client, principal);
  }

  /** The session ended (or holds nothing any more). */
  drop(client: Client, principal: Principal): void {
    this.#filters.delete(client);
    if (principal.kind === 'app') this.#apps.delete(client);
    else if (principal.deviceId) removeFrom(this.#byDevice, principal.deviceId, client);
  }

  /** Whether this session holds a filter matching the topic. */
  matches(client: Client, topic: string): boolean {
    const filters = this.#filters.get(client);
    if (filters) for (const levels of filters.values()) if (levelsMatch(levels, topic)) return true;
    return false;
  }

  /** The device's own sessions that hold filters (for counting command deliveries). */
  deviceSessions(deviceId: string): ReadonlySet<Client> | undefined {
    return this.#byDevice.get(deviceId);
  }

  /** Whether any session that may read device D's topics holds a filter at all (no topic needed). */
  mayReach(deviceId: string): boolean {
    return this.#apps.size > 0 || this.#byDevice.has(deviceId);
  }

  /** Whether a session that may read device D's topics holds a filter matching this topic of D. */
  reaches(deviceId: string, topic: string): boolean {
    const own = this.#byDevice.get(deviceId);
    if (own) for (const client of own) if (!client.closed && this.matches(client, topic)) return true;
    for (const client of this.#apps) if (!client.closed && this.matches(client, topic)) return true;
    return false;
  }
}
