import type { OutpostConfig } from './core/config.js';
import type { Clock } from './core/time.js';
import type { HealthStatus } from './store/health.js';
import type { MetricsRegistry } from './ops/metrics.js';
import { registerProcessMetrics } from './ops/process-metrics.js';
import type { ReloadOutcome } from './ops/reload.js';
import { ControlServer } from './ops/control.js';
import { storeFigures, type DaemonStatus } from './ops/status.js';
import type { Logger } from './ops/logger.js';
import type { Door } from './doors/door.js';
import type { Core } from './roles/core.js';

export interface DaemonPorts {
  http?: number;
  mqtt?: number;
  mqttTls?: number;
  gwmp?: number;
}

/** The order of the ready line's ports, whatever order the doors opened in. */
const PORT_ORDER: ReadonlyArray<keyof DaemonPorts> = ['http', 'mqtt', 'mqttTls', 'gwmp'];

export type DaemonHealth = { status: HealthStatus } & Record<string, unknown>;

/**
 * Runs one role's composition (src/roles/): opens its doors in the order the composition lists
 * them and takes everything apart again in reverse on shutdown: stop accepting, finish what is in
 * flight, commit, close the database. Knows no door by name.
 */
export class Daemon {
  readonly core: Core;
  readonly #doors: readonly Door[];
  #started: Door[] = [];
  #control: ControlServer | undefined;
  #ports: DaemonPorts = {};
  readonly #stopProcessMetrics: () => void;

  constructor(core: Core, doors: readonly Door[]) {
    this.core = core;
    this.#doors = doors;
    this.#stopProcessMetrics = registerProcessMetrics(core.metrics, core.version);
  }

  get config(): OutpostConfig {
    return this.core.config;
  }

  get logger(): Logger {
    return this.core.logger;
  }

  get clock(): Clock {
    return this.core.clock;
  }

  get metrics(): MetricsRegistry {
    return this.core.metrics;
  }

  /** Applies a new configuration (SIGHUP); see ConfigReloader. */
  reloadConfig(next: OutpostConfig): Promise<ReloadOutcome> {
    return this.core.reloader.reload(next);
  }

  /**
   * `ok`, `degraded` (serving, but something needs attention: writes refused for lack of space, a
   * door that says so) or `failing` (the store is damaged); /healthz answers 503 only for `failing`.
   * Each door with something to say adds a section under its name.
   */
  health(): DaemonHealth {
    const { core } = this;
    const store = core.store.health.report();
    const doorProblem = store.status === 'ok' ? this.#doors.map((d) => d.degradedBecause?.()).find((r) => r !== undefined) : undefined;
    const sections: Record<string, unknown> = {};
    for (const door of this.#doors) if (door.health) sections[door.name] = door.health();
    return {
      status: doorProblem ? 'degraded' : store.status,
      ...(store.reason ? { reason: `store: ${store.reason}` } : doorProblem ? { reason: doorProblem } : {}),
      store: { ...store, bytes: core.store.sizeBytes(), maxBytes: core.config.store.maxBytes },
      version: core.version,
      role: core.config.role,
      uptimeSeconds: Math.round((core.clock.now() - core.startedAt) / 1000),
      schemaVersion: core.store.schemaVersion(),
      ...sections,
    };
  }

  /** `outpost status`, answered on the control socket. */
  async status(): Promise<DaemonStatus> {
    const { core } = this;
    const figures = await storeFigures(core.store, core.stateReads);
    return {
      version: core.version,
      pid: process.pid,
      uptimeSeconds: Math.round((core.clock.now() - core.startedAt) / 1000),
      dataDir: core.config.dataDir,
      ports: { ...this.#ports } as Record<string, number>,
      devices: figures.devices,
      states: { stored: figures.storedStates, acceptedSinceStart: core.pipeline.statesAccepted, refusedSinceStart: core.pipeline.statesRefused },
      radio: core.statusSections.read('radio'),
      upstream: core.statusSections.read('upstream'),
      lastUplinkAt: figures.lastUplinkAt === null ? null : new Date(figures.lastUplinkAt).toISOString(),
    };
  }

  /** For the systemd watchdog: the event loop runs (or this would not be called) and the database answers. */
  healthy(): boolean {
    try {
      this.core.store.ping();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Opens the doors in order. Any failure closes what was already opened (no half-started daemon
   * keeps serving), closes the store and rejects; a setting that cannot be applied (an address, a
   * port, a TLS file) is a ConfigError naming its key.
   */
  async start(): Promise<DaemonPorts> {
    try {
      const opened: Record<string, number> = {};
      for (const door of this.#doors) {
        // Listed before it starts: a door that fails half-way still closes what it did open.
        this.#started.push(door);
        Object.assign(opened, await door.start());
      }
      const names = [...PORT_ORDER.filter((n) => n in opened), ...Object.keys(opened).filter((n) => !(PORT_ORDER as string[]).includes(n))];
      for (const name of names) (this.#ports as Record<string, number>)[name] = opened[name]!;
      this.core.startJobs();
      this.#control = await ControlServer.start(this.core.config.dataDir, { '/status': () => this.status() }, this.core.logger);
      return { ...this.#ports };
    } catch (err) {
      await this.stop().catch((stopErr: unknown) => this.core.logger.error({ err: stopErr }, 'cleanup after a failed start failed'));
      throw err;
    }
  }

  /** Closes the doors in reverse order of opening, then the core (last commit, store, lock). */
  async stop(): Promise<void> {
    this.core.stopJobs();
    await this.#control?.stop();
    this.#stopProcessMetrics();
    const started = this.#started;
    this.#started = [];
    let failed: unknown;
    for (const door of started.reverse()) {
      try {
        await door.stop();
      } catch (err) {
        // The other doors still close and the store still commits; the first failure is reported.
        this.core.logger.error({ err, door: door.name }, 'door did not stop cleanly');
        failed ??= err;
      }
    }
    await this.core.close();
    if (failed !== undefined) throw failed;
  }
}
