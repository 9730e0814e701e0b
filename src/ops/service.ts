import { ConfigError, loadConfig, type ConfigSources } from '../core/config.js';
import type { Daemon, DaemonPorts } from '../daemon.js';
import type { Logger } from './logger.js';
import { SystemdNotifier } from './notify.js';

/**
 * The daemon as a service: systemd readiness and watchdog, and SIGHUP reloads of the config file
 * (docs/operations.md). `outpost run` creates one next to the Daemon.
 */
export class ServiceHooks {
  readonly #daemon: Daemon;
  readonly #sources: ConfigSources;
  readonly #logger: Logger;
  readonly notifier: SystemdNotifier;
  #reloading: Promise<void> = Promise.resolve();
  readonly #onHangup = () => void this.reload();

  constructor(daemon: Daemon, sources: ConfigSources, logger: Logger, env: NodeJS.ProcessEnv = process.env) {
    this.#daemon = daemon;
    this.#sources = sources;
    this.#logger = logger;
    this.notifier = new SystemdNotifier(env, logger);
    daemon.metrics.counterFrom('outpost_watchdog_notifications_total', 'Notifications delivered to systemd (READY, WATCHDOG, …)', () => this.notifier.sent);
    // Without a handler SIGHUP would kill the process: install it before anything else can fail.
    process.on('SIGHUP', this.#onHangup);
  }

  ready(ports: DaemonPorts): void {
    const list = Object.entries(ports).map(([k, v]) => `${k} ${v}`).join(', ');
    this.notifier.ready(`serving ${list}`, () => this.#daemon.healthy());
  }

  stopping(): void {
    process.off('SIGHUP', this.#onHangup);
    this.notifier.stopping();
  }

  /** Re-reads the configuration from the same sources as at start; one reload at a time. */
  reload(): Promise<void> {
    this.#reloading = this.#reloading.then(() => this.#reloadOnce());
    return this.#reloading;
  }

  async #reloadOnce(): Promise<void> {
    this.notifier.reloading();
    try {
      let next;
      try {
        next = loadConfig(this.#sources);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // A bad edit must not take a running gateway down: keep everything as it is and say why.
        this.#logger.error({ error: err.message }, 'config reload refused: the running configuration stays as it was');
        return;
      }
      const outcome = await this.#daemon.reloadConfig(next);
      this.#logger.info(
        { changed: outcome.applied, needsRestart: outcome.needsRestart, failed: outcome.failed.length ? outcome.failed : undefined },
        outcome.changed.length === 0 ? 'config reloaded: nothing changed' : 'config reloaded',
      );
    } catch (err) {
      this.#logger.error({ err }, 'config reload failed');
    } finally {
      this.notifier.reloaded('serving');
    }
  }
}
