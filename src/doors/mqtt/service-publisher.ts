import type { Aedes } from 'aedes';
import type { OutpostConfig } from '../../core/config.js';
import { RateLimiter } from '../../core/rate-limit.js';
import type { Clock } from '../../core/time.js';
import { echoPayload, feedPayload, type AssetRefusal, type RefusalEvent, type StateEvent } from '../../ingest/ingest.js';
import { eventPayload, type DeviceEvent } from '../../ingest/device-events.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { RetainedFeed } from '../../doors/mqtt/retained-feed.js';
import type { SubscriptionIndex } from '../../doors/mqtt/subscriptions.js';
import { assetTopic, errorsTopic, eventsTopic } from '../../wire/topics.js';

const noop = () => {};

/** What `device/<id>/errors` reports: a refusal of the pipeline's, or one the door found itself. */
export interface ErrorReport {
  at: number;
  topic: string;
  code: string;
  error: string;
  assets?: AssetRefusal[];
  more?: number;
}

export interface PublisherDeps {
  config: OutpostConfig['mqtt'];
  clock: Clock;
  metrics: MqttMetrics;
  subscriptions: SubscriptionIndex;
  retained: RetainedFeed;
  /**
   * Several central nodes (docs/scale-out.md): subscribers may be on another node, which this
   * node's subscription index does not know, so every message is published.
   */
  everywhere?: boolean;
}

/**
 * Everything the service itself publishes to MQTT subscribers (docs/mqtt.md, "Topics"), except
 * commands (command-sink.ts): after a commit the state echo and the feed message (which also becomes
 * the retained one), reports on `device/<id>/errors` (rate limited per device) and device events.
 * A message is published only when a session holds a filter matching its topic: publishing through
 * aedes costs a packet, a persistence lookup and a routing match, for nobody otherwise.
 */
export class ServicePublisher {
  readonly #deps: PublisherDeps;
  #broker: Aedes | undefined;
  /** Reports on `device/<id>/errors`, per device: a flood of bad messages must not become a flood of reports. */
  readonly #errorReports: RateLimiter;
  /** Reports held back by #errorReports since the device's last delivered one (told in the next one). */
  readonly #droppedReports = new Map<string, number>();

  constructor(deps: PublisherDeps) {
    this.#deps = deps;
    this.#errorReports = new RateLimiter(deps.config.errorsPerSecond, deps.config.errorsBurst);
  }

  /** Publishes go nowhere until the broker runs (and after it stopped). */
  attach(broker: Aedes | undefined): void {
    this.#broker = broker;
  }

  /** Forgets rate-limit buckets of devices that have been quiet (called once a minute). */
  sweep(): void {
    this.#errorReports.sweep(this.#deps.clock.now());
  }

  #reaches(deviceId: string, kind: Parameters<SubscriptionIndex['mayReach']>[1]): boolean {
    return this.#deps.everywhere === true || this.#deps.subscriptions.mayReach(deviceId, kind);
  }

  #reachesTopic(deviceId: string, topic: string): boolean {
    return this.#deps.everywhere === true || this.#deps.subscriptions.reaches(deviceId, topic);
  }

  publish(topic: string, payload: Buffer | string, qos: 0 | 1, retain = false): void {
    this.#broker?.publish({ cmd: 'publish', topic, payload: typeof payload === 'string' ? Buffer.from(payload) : payload, qos, retain, dup: false }, noop);
  }

  /** After the commit: the echo (exact bytes) and the feed message; the feed also becomes the retained one. */
  readonly onState = (event: StateEvent): void => {
    const deviceId = event.device.id;
    const name = event.asset.name;
    this.#deps.retained.offer(deviceId, name, event.at, event.valueJson);
    // A re-decode's correction is a feed message only: the device sent nothing to echo.
    if (!event.correction && this.#reaches(deviceId, 'state')) {
      const echo = assetTopic(deviceId, name, 'state');
      if (this.#reachesTopic(deviceId, echo)) this.publish(echo, echoPayload(event), 1);
    }
    if (this.#reaches(deviceId, 'feed')) {
      const feed = assetTopic(deviceId, name, 'feed');
      if (this.#reachesTopic(deviceId, feed)) this.publish(feed, feedPayload(event), 1);
    }
  };

  readonly onRefused = (event: RefusalEvent): void => this.publishError(event.deviceId, event);

  /** Radio and delivery events on `device/<id>/events` (QoS 0). */
  readonly onDeviceEvent = (deviceId: string, event: DeviceEvent): void => {
    if (!this.#reaches(deviceId, 'events')) return;
    const topic = eventsTopic(deviceId);
    if (this.#reachesTopic(deviceId, topic)) this.publish(topic, eventPayload(event), 0);
  };

  /**
   * One message on `device/<id>/errors`, if anyone is subscribed and the device is within
   * mqtt.errorsPerSecond; the next delivered report says how many were held back (`dropped`).
   */
  publishError(deviceId: string, error: ErrorReport): void {
    if (!this.#reaches(deviceId, 'errors')) return;
    const topic = errorsTopic(deviceId);
    if (!this.#reachesTopic(deviceId, topic)) return;
    if (this.#errorReports.take(deviceId, this.#deps.clock.now()) > 0) {
      this.#droppedReports.set(deviceId, (this.#droppedReports.get(deviceId) ?? 0) + 1);
      this.#deps.metrics.reportsDropped.inc();
      return;
    }
    const report: Record<string, unknown> = { at: new Date(error.at).toISOString(), topic: error.topic, code: error.code, error: error.error };
    if (error.assets && error.assets.length > 1) report.assets = error.assets;
    if (error.more) report.more = error.more;
    const dropped = this.#droppedReports.get(deviceId);
    if (dropped) {
      report.dropped = dropped;
      this.#droppedReports.delete(deviceId);
    }
    this.publish(topic, JSON.stringify(report), 1);
  }
}
