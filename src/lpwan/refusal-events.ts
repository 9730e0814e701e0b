import { RateLimiter } from '../core/rate-limit.js';
import type { Clock } from '../core/time.js';
import type { DeviceEvent, DeviceEvents } from '../ingest/device-events.js';
import type { Counter, MetricsRegistry } from '../ops/metrics.js';

/**
 * The network server's events on their way to `device/<id>/events` and the console's live view,
 * with refusals (`uplink_refused`, `join_refused`) limited per device. A device's DevAddr and
 * DevEUI are sent in clear on the air: anyone can forge thousands of frames naming it, each
 * refused (bad MIC, replayed counter) and each, unlimited, one event. The errors topic is limited
 * for the same reason and with the same settings (`mqtt.errorsPerSecond`, `mqtt.errorsBurst`).
 * Events held back are counted, and the next refusal delivered says how many (`suppressed`).
 * Every other event (uplinks, joins, downlinks) passes untouched.
 */
export class RefusalLimitedEvents {
  readonly #events: DeviceEvents;
  readonly #clock: Clock;
  readonly #limiter: RateLimiter;
  /** Refusals held back per device since its last delivered one. */
  readonly #suppressed = new Map<string, number>();
  readonly #suppressedTotal: Counter;

  constructor(options: { events: DeviceEvents; clock: Clock; metrics: MetricsRegistry; perSecond: number; burst: number }) {
    this.#events = options.events;
    this.#clock = options.clock;
    this.#limiter = new RateLimiter(options.perSecond, options.burst);
    this.#suppressedTotal = options.metrics.counter('outpost_lpwan_refusal_events_suppressed_total', 'Refusal events (uplink_refused, join_refused) not published because the device had too many (mqtt.errorsPerSecond)');
  }

  publish(deviceId: string, event: DeviceEvent): void {
    if (!event.type.endsWith('_refused')) return this.#events.publish(deviceId, event);
    if (this.#limiter.take(deviceId, this.#clock.now()) > 0) {
      this.#suppressed.set(deviceId, (this.#suppressed.get(deviceId) ?? 0) + 1);
      this.#suppressedTotal.inc({ type: event.type });
      return;
    }
    const suppressed = this.#suppressed.get(deviceId);
    if (suppressed === undefined) return this.#events.publish(deviceId, event);
    this.#suppressed.delete(deviceId);
    this.#events.publish(deviceId, { ...event, suppressed });
  }

  /** Forgets buckets of devices that have been quiet (memory stays bounded by the devices refused lately). */
  sweep(): void {
    this.#limiter.sweep(this.#clock.now());
  }
}
