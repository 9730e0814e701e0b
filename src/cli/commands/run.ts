import type { ConfigSources, OutpostConfig } from '../../core/config.js';
import { createLogger } from '../../ops/logger.js';
import { composeDaemon } from '../../roles/compose.js';
import { ServiceHooks } from '../../ops/service.js';
import { programVersion } from '../../version.js';
import { managementArgs } from '../args.js';
import type { CliCommand } from '../command.js';

/** `outpost run`: starts the daemon; it runs until SIGTERM or SIGINT (docs/operations.md). */
export const command: CliCommand = {
  usage: '  run [--config FILE] [--data DIR]                  start the daemon',
  run(args, argv, out) {
    const { config, values } = managementArgs(args, argv, out);
    return runDaemon(config, { file: values.config, dataDir: values.data });
  },
};

async function runDaemon(config: OutpostConfig, sources: ConfigSources): Promise<number> {
  const logger = createLogger(config.log.level);
  // The role's composition: the core, then only the doors (and modules) this configuration uses.
  const daemon = await composeDaemon(config, logger);
  // systemd readiness/watchdog and SIGHUP reloads (docs/operations.md).
  const service = new ServiceHooks(daemon, sources, logger);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    service.stopping();
    daemon
      .stop()
      .then(() => {
        logger.info('stopped');
        logger.flush();
        process.exitCode = 0;
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        logger.flush();
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // On failure start() has closed what it opened; the rejection reaches main's exit-code mapping.
  const ports = await daemon.start();
  logger.info({ ports, version: programVersion(), dataDir: config.dataDir, role: config.role }, 'ready');
  service.ready(ports);
  return 0;
}
