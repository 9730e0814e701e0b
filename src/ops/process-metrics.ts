import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { readdirSync } from 'node:fs';
import type { MetricsRegistry } from './metrics.js';

/**
 * Process health series (docs/operations.md, "Metrics"): event-loop lag, memory, CPU, file
 * descriptors. Event-loop lag is the first sign of a gateway that is too slow for its load.
 * Returns a function that stops the event-loop sampler.
 */
export function registerProcessMetrics(metrics: MetricsRegistry, version: string): () => void {
  const lag: IntervalHistogram = monitorEventLoopDelay({ resolution: 20 });
  lag.enable();
  metrics.gauge('outpost_build_info', 'Always 1; the version label tells which release runs', () => [[{ version }, 1]]);
  metrics.gauge('outpost_event_loop_lag_seconds', 'Event-loop delay since the previous scrape (p50, p99, max)', () => {
    const values: Array<[Record<string, string>, number]> = [
      [{ quantile: '0.5' }, lag.percentile(50) / 1e9],
      [{ quantile: '0.99' }, lag.percentile(99) / 1e9],
      [{ quantile: '1' }, lag.max / 1e9],
    ];
    // Per scrape window: a stall an hour ago should not hide today's numbers.
    lag.reset();
    return values.map(([labels, v]) => [labels, Number.isFinite(v) ? v : 0]);
  });
  metrics.gauge('process_resident_memory_bytes', 'Resident set size', () => process.memoryUsage.rss());
  metrics.gauge('process_heap_used_bytes', 'V8 heap in use', () => process.memoryUsage().heapUsed);
  metrics.counterFrom('process_cpu_seconds_total', 'User and system CPU time used by the process', () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1e6;
  });
  const startedAt = Date.now() / 1000 - process.uptime();
  metrics.gauge('process_start_time_seconds', 'Start time of the process (Unix time)', () => Math.round(startedAt));
  metrics.gauge('process_open_fds', 'Open file descriptors', () => {
    try {
      return readdirSync('/proc/self/fd').length;
    } catch {
      return 0;
    }
  });
  return () => lag.disable();
}
