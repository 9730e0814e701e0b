import { ServiceError } from '../core/errors.js';
import { newId } from '../core/ids.js';
import type { Clock } from '../core/time.js';
import type { DownlinkQueueStore, DownlinkRecord, DownlinkStatus } from '../store/downlink-queue.js';
import type { DeviceEvents } from '../ingest/device-events.js';
import type { JsonValue } from '../core/json.js';
import type { WindowName } from './radio.js';

export interface DownlinkQueueLimits {
  /** Open items per device. */
  perDevice: number;
  /** Lifetime of an item without `meta.ttl` (ms). */
  ttlMs: number;
}

export const DEFAULT_DOWNLINK_LIMITS: DownlinkQueueLimits = { perDevice: 16, ttlMs: 24 * 3600 * 1000 };

/** What a command's `meta` may say about its downlink (docs/lpwan.md, "Sending commands"). */
export interface DownlinkMeta {
  port: number | undefined;
  confirmed: boolean;
  ttlSeconds: number | undefined;
}

export function parseDownlinkMeta(meta: Record<string, JsonValue> | null): DownlinkMeta {
  const lower = new Map(Object.entries(meta ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  const port = lower.get('port');
  if (port !== undefined && port !== null && (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 223)) {
    throw new ServiceError('FPORT_INVALID', `meta.port must be an integer FPort from 1 to 223 (0 and 224–255 are reserved for the network), got ${JSON.stringify(port)}`);
  }
  const confirmed = lower.get('confirmed');
  if (confirmed !== undefined && confirmed !== null && typeof confirmed !== 'boolean') throw new ServiceError('INVALID_MESSAGE', 'meta.confirmed must be true or false');
  const ttl = lower.get('ttl');
  if (ttl !== undefined && ttl !== null && (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0)) {
    throw new ServiceError('INVALID_MESSAGE', `meta.ttl must be a positive number of seconds, got ${JSON.stringify(ttl)}`);
  }
  return { port: typeof port === 'number' ? port : undefined, confirmed: confirmed === true, ttlSeconds: typeof ttl === 'number' ? ttl : undefined };
}

/**
 * The per-device downlink queue (docs/lpwan.md: 16 items, 24 h or `meta.ttl`), persisted in SQLite. Items
 * are encoded before they are queued, so a command the codec cannot encode is refused at once.
 * Every outcome is a `downlink` event on the device's events topic.
 */
export class DownlinkQueue {
  readonly #store: DownlinkQueueStore;
  readonly #events: DeviceEvents;
  readonly #clock: Clock;
  readonly #limits: DownlinkQueueLimits;
  /** Open items per device, so the uplink hot path asks SQLite only when something waits. */
  #openCounts = new Map<string, number>();
  /** Told of every new item (Class C devices get theirs at once instead of at the next uplink). */
  onEnqueued: ((deviceId: string) => void) | undefined;

  constructor(store: DownlinkQueueStore, events: DeviceEvents, clock: Clock, limits: DownlinkQueueLimits = DEFAULT_DOWNLINK_LIMITS) {
    this.#store = store;
    this.#events = events;
    this.#clock = clock;
    this.#limits = limits;
    this.reloadCounts();
  }

  reloadCounts(): void {
    this.#openCounts = this.#store.openCounts();
  }

  openCount(deviceId: string): number {
    return this.#openCounts.get(deviceId) ?? 0;
  }

  /** `warnings`: what the codec warned of while encoding the item, told in its `queued` event. */
  enqueue(deviceId: string, item: { fPort: number; confirmed: boolean; payload: Buffer; ttlSeconds: number | undefined; warnings?: string[] }): DownlinkRecord {
    if (this.openCount(deviceId) >= this.#limits.perDevice) {
      throw new ServiceError('DOWNLINK_QUEUE_FULL', `device ${deviceId} already has ${this.#limits.perDevice} downlinks waiting for an uplink; try again after it has been heard`, { retryAfter: 60 });
    }
    const now = this.#clock.now();
    const record = this.#store.enqueue({
      id: newId(),
      deviceId,
      fPort: item.fPort,
      confirmed: item.confirmed,
      payload: item.payload,
      createdAt: now,
      expiresAt: now + (item.ttlSeconds !== undefined ? Math.round(item.ttlSeconds * 1000) : this.#limits.ttlMs),
    });
    this.#openCounts.set(deviceId, this.openCount(deviceId) + 1);
    this.onEnqueued?.(deviceId);
    const warnings = item.warnings?.length ? { warnings: item.warnings } : {};
    this.#events.publish(deviceId, { type: 'downlink', at: now, id: record.id, status: 'queued', fPort: record.fPort, confirmed: record.confirmed, payloadSize: record.payload.length, ...warnings });
    return record;
  }

  /** Open items, oldest first, after dropping those that expired (which never block the queue). */
  open(deviceId: string): DownlinkRecord[] {
    if (this.openCount(deviceId) === 0) return [];
    const now = this.#clock.now();
    const items: DownlinkRecord[] = [];
    for (const item of this.#store.open(deviceId)) {
      if (item.expiresAt < now) this.finish(item, 'expired', `not sent before it expired at ${new Date(item.expiresAt).toISOString()}`);
      else items.push(item);
    }
    return items;
  }

  /** An item leaves the queue with this outcome. */
  finish(item: DownlinkRecord, status: DownlinkStatus, reason: string | null, extra: Record<string, unknown> = {}): void {
    const now = this.#clock.now();
    this.#store.finish(item.id, status, reason, now);
    this.#openCounts.set(item.deviceId, Math.max(0, this.openCount(item.deviceId) - 1));
    this.#events.publish(item.deviceId, { type: 'downlink', at: now, id: item.id, status, fPort: item.fPort, ...extra, ...(reason ? { reason } : {}) });
  }

  /** A transmission: an unconfirmed item leaves the queue, a confirmed one waits for its acknowledgement. */
  sent(item: DownlinkRecord, fCnt: number, window: WindowName, extra: Record<string, unknown> = {}): void {
    const now = this.#clock.now();
    this.#store.markSent(item.id, fCnt, item.confirmed ? null : now);
    item.attempts++;
    item.status = 'sent';
    item.fCnt = fCnt;
    if (!item.confirmed) this.#openCounts.set(item.deviceId, Math.max(0, this.openCount(item.deviceId) - 1));
    this.#events.publish(item.deviceId, { type: 'downlink', at: now, id: item.id, status: 'sent', fCnt, fPort: item.fPort, window, confirmed: item.confirmed, ...extra });
  }

  /** Reports without changing the queue (a downlink that waits for duty cycle, a gateway refusal). */
  report(item: DownlinkRecord, status: 'queued' | 'tx_error', reason: string, extra: Record<string, unknown> = {}): void {
    this.#events.publish(item.deviceId, { type: 'downlink', at: this.#clock.now(), id: item.id, status, fPort: item.fPort, reason, ...extra });
  }

  list(deviceId: string): DownlinkRecord[] {
    return this.#store.list(deviceId);
  }

  forget(deviceId: string): void {
    this.#openCounts.delete(deviceId);
  }
}
