import type { OutpostConfig } from '../core/config.js';
import { systemClock, type Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import { Daemon } from '../daemon.js';
import { Core } from './core.js';

/**
 * Builds the daemon of the configured role: the core first (data-dir lock, store, rules), then the
 * role's doors. Only the chosen role's modules are loaded. What fails here (a locked data dir, a
 * damaged store, a setting that cannot be used) closes what was opened and rejects, for the exit
 * code mapping of `outpost run`.
 */
export async function composeDaemon(config: OutpostConfig, logger: Logger, clock: Clock = systemClock): Promise<Daemon> {
  const core = Core.open(config, logger, clock);
  try {
    await core.prepare();
    let daemon: Daemon | undefined;
    // The HTTP door answers /healthz from the daemon, which exists before any door opens.
    const view = { health: () => daemon!.health() };
    const doors = config.role === 'central' ? await (await import('./central.js')).composeCentral(core, view) : await (await import('./gateway.js')).composeGateway(core, view);
    daemon = new Daemon(core, doors);
    return daemon;
  } catch (err) {
    await core.close().catch((closeErr: unknown) => logger.error({ err: closeErr }, 'cleanup after a failed start failed'));
    throw err;
  }
}
