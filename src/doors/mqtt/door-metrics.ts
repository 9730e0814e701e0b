import type { Counter, Histogram, MetricsRegistry } from '../../ops/metrics.js';

/**
 * A counter by one label, counted in plain numbers on the hot path and added to the registry's
 * counter once a second (formatting Prometheus labels for every message costs more than the count).
 */
class LabelledCount {
  readonly #counts = new Map<string, number>();
  constructor(
    readonly counter: Counter,
    readonly label: string,
  ) {}

  inc(value: string): void {
    this.#counts.set(value, (this.#counts.get(value) ?? 0) + 1);
  }

  flush(): void {
    for (const [value, n] of this.#counts) if (n > 0) this.counter.inc({ [this.label]: value }, n);
    this.#counts.clear();
  }
}

/** The MQTT door's series in /metrics (docs/operations.md); the gauges read the door's live state. */
export class MqttMetrics {
  readonly connections: LabelledCount;
  readonly messagesIn: LabelledCount;
  readonly messagesOut: LabelledCount;
  readonly refused: LabelledCount;
  readonly pubackSeconds: Histogram;
  readonly reportsDropped: Counter;

  constructor(m: MetricsRegistry, gauges: { connections: () => number; retained: () => number }) {
    m.gauge('outpost_mqtt_connections', 'MQTT connections open now', gauges.connections);
    this.connections = new LabelledCount(m.counter('outpost_mqtt_connections_total', 'MQTT connection attempts by result (accepted, refused)'), 'result');
    this.messagesIn = new LabelledCount(m.counter('outpost_mqtt_messages_in_total', 'MQTT messages received, by topic kind'), 'kind');
    this.messagesOut = new LabelledCount(m.counter('outpost_mqtt_messages_out_total', 'MQTT messages delivered to subscribers, by topic kind'), 'kind');
    this.refused = new LabelledCount(m.counter('outpost_mqtt_refused_total', 'MQTT messages and subscriptions refused, by code'), 'code');
    this.pubackSeconds = m.histogram('outpost_mqtt_puback_seconds', 'Time from a QoS 1 state publish to its PUBACK (includes the commit)', [
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
    ]);
    this.reportsDropped = m.counter('outpost_mqtt_error_reports_dropped_total', 'Reports not published on device/<id>/errors because the device was over mqtt.errorsPerSecond');
    m.gauge('outpost_mqtt_retained_feed_messages', 'Latest feed messages held for new subscribers', gauges.retained);
  }

  /** Adds the counts kept since the last flush to the registry's counters. */
  flush(): void {
    this.connections.flush();
    this.messagesIn.flush();
    this.messagesOut.flush();
    this.refused.flush();
  }
}
