import type { Client, Subscription } from 'aedes';
import { feedText } from '../../ingest/ingest.js';
import type { Catalog } from '../../store/catalog.js';
import type { StateReads } from '../../store/state-reads.js';
import { filterMatches } from '../../wire/topics.js';

const noop = () => {};

/** Kept as the stored value's JSON and `at`: the message text is only built when someone subscribes. */
export interface RetainedMessage {
  topic: string;
  at: number;
  valueJson: string;
}

/** The feed message (docs/mqtt.md): `{"value", "at"}`, formatted exactly as the live feed's. */
export function feedMessage(m: RetainedMessage): string {
  return feedText(m.valueJson, m.at);
}

/**
 * The latest feed message of every asset (docs/mqtt.md), kept in memory by device and delivered,
 * flagged retained, to new subscribers. Rebuilt from SQLite's latest states at start, so it survives
 * restarts without any broker persistence. "Latest" is the state with the greatest `at` (ties: the
 * last received), the same one `GET .../state` returns.
 */
export class RetainedFeed {
  readonly #byDevice = new Map<string, Map<string, RetainedMessage>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Keeps the message if it is at least as new as the one held; returns whether it did. */
  offer(deviceId: string, assetName: string, at: number, valueJson: string): boolean {
    let assets = this.#byDevice.get(deviceId);
    if (!assets) {
      assets = new Map();
      this.#byDevice.set(deviceId, assets);
    }
    const held = assets.get(assetName);
    if (held) {
      if (held.at > at) return false;
      held.at = at;
      held.valueJson = valueJson;
      return true;
    }
    this.#size++;
    assets.set(assetName, { topic: `device/${deviceId}/asset/${assetName}/feed`, at, valueJson });
    return true;
  }

  removeAsset(deviceId: string, assetName: string): void {
    const assets = this.#byDevice.get(deviceId);
    if (assets?.delete(assetName)) this.#size--;
  }

  removeDevice(deviceId: string): void {
    const assets = this.#byDevice.get(deviceId);
    if (!assets) return;
    this.#size -= assets.size;
    this.#byDevice.delete(deviceId);
  }

  /** The held messages a subscription filter matches (only the filter's device when it names one). */
  *matching(filter: string): Generator<RetainedMessage> {
    const levels = filter.split('/');
    if (levels[0] !== 'device' && levels[0] !== '+' && levels[0] !== '#') return;
    const device = levels[1];
    if (device !== undefined && device !== '+' && device !== '#') {
      const assets = this.#byDevice.get(device);
      if (assets) for (const m of assets.values()) if (filterMatches(filter, m.topic)) yield m;
      return;
    }
    for (const assets of this.#byDevice.values()) for (const m of assets.values()) if (filterMatches(filter, m.topic)) yield m;
  }
}

/** Fills the feed from the store's latest states (at start: nothing of it is persisted by the broker). */
export async function loadRetained(feed: RetainedFeed, catalog: Catalog, states: StateReads): Promise<void> {
  for (const latest of await states.allLatest()) {
    const asset = catalog.assetById(latest.assetId);
    if (asset) feed.offer(asset.deviceId, asset.name, latest.at, latest.valueJson);
  }
}

/** Drops the messages of assets that no longer exist (deleted by another process, the CLI). */
export function pruneRetained(feed: RetainedFeed, catalog: Catalog): void {
  for (const message of [...feed.matching('device/#')]) {
    const [, deviceId, , name] = message.topic.split('/');
    if (!catalog.assetByName(deviceId!, name!)) feed.removeAsset(deviceId!, name!);
  }
}

/**
 * Sends a session the held messages its new subscriptions match (aedes' `subscribe` event: granted
 * filters only, a refused one has QoS 128), flagged retained, each topic once, at the granted QoS.
 */
export function deliverRetained(feed: RetainedFeed, subs: readonly Subscription[], client: Client): void {
  const sent = new Set<string>();
  for (const sub of subs) {
    if ((sub.qos as number) === 128) continue;
    for (const message of feed.matching(sub.topic)) {
      if (sent.has(message.topic)) continue;
      sent.add(message.topic);
      client.publish({ cmd: 'publish', topic: message.topic, payload: Buffer.from(feedMessage(message)), qos: Math.min(sub.qos, 1) as 0 | 1, retain: true, dup: false }, noop);
    }
  }
}
