#!/usr/bin/env node
// The `outpost` program: a table from command word to its module under commands/ (README,
// "Command line"), and the one place failures become exit codes.
import { ConfigError } from '../core/config.js';
import { isCorruption, isServiceError } from '../core/errors.js';
import { StoreCorruptError } from '../store/store.js';
import { DataDirLockedError } from '../store/data-dir.js';
import { SchemaTooNewError } from '../store/migrations.js';
import { programVersion } from '../version.js';
import { isUsageError, managementArgs, UsageError } from './args.js';
import type { CliCommand } from './command.js';
import { stdout } from './output.js';

type CommandModule = { command: CliCommand };

/**
 * Loaded on use, so `outpost run` does not load what only the management commands need. The
 * order is that of `outpost help`.
 */
const COMMANDS: Record<string, () => Promise<CommandModule>> = {
  run: () => import('./commands/run.js'),
  device: () => import('./commands/device.js'),
  asset: () => import('./commands/asset.js'),
  token: () => import('./commands/token.js'),
  state: () => import('./commands/state.js'),
  codec: () => import('./commands/codec.js'),
  gateway: () => import('./commands/gateway.js'),
  station: () => import('./commands/station.js'),
  outbox: () => import('./commands/outbox.js'),
  status: () => import('./commands/status.js'),
  doctor: () => import('./commands/doctor.js'),
  backup: () => import('./commands/backup.js'),
  restore: () => import('./commands/restore.js'),
  migrate: () => import('./commands/migrate.js'),
};

async function usage(): Promise<string> {
  const modules = await Promise.all(Object.values(COMMANDS).map((load) => load()));
  return [
    'usage: outpost <command> [options]',
    '',
    ...modules.map((m) => m.command.usage),
    '',
    'Every command takes --data DIR and --config FILE (or OUTPOST_CONFIG / OUTPOST_DATA_DIR).',
  ].join('\n');
}

/** Exit codes (docs/configuration.md): systemd's RestartPreventExitStatus can list those a restart cannot fix. */
const EXIT_CODES = { config: 2, dataDirLocked: 3, storeCorrupt: 4, schemaTooNew: 5 } as const;

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--version' || argv[0] === '-v') {
    stdout(programVersion());
    return 0;
  }
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    stdout(await usage());
    return command ? 0 : 2;
  }
  if (!Object.hasOwn(COMMANDS, command)) {
    // The options and the configuration are checked first, as for any management command.
    managementArgs(rest, argv, stdout);
    throw new UsageError(`unknown command: ${argv.slice(0, 2).join(' ')}`);
  }
  const { command: handler } = await COMMANDS[command]!();
  return handler.run(rest, argv, stdout);
}

/** The message on stderr and the exit code for a failure. */
async function reportFailure(err: unknown): Promise<number> {
  if (err instanceof ConfigError) {
    process.stderr.write(`outpost: invalid configuration: ${err.message}\n`);
    return EXIT_CODES.config;
  }
  if (err instanceof DataDirLockedError) {
    process.stderr.write(`outpost: ${err.message}\n`);
    return EXIT_CODES.dataDirLocked;
  }
  if (err instanceof StoreCorruptError || isCorruption(err)) {
    const message = err instanceof StoreCorruptError ? err.message : `the database file is damaged (${(err as Error).message}); restore a backup`;
    process.stderr.write(`outpost: ${message}\n`);
    return EXIT_CODES.storeCorrupt;
  }
  // Expected after a downgrade: the operator needs what to do, not where in the code it was found.
  if (err instanceof SchemaTooNewError) {
    process.stderr.write(`outpost: ${err.message}, or restore the backup taken before the newer version migrated it (docs/operations.md, "Upgrade")\n`);
    return EXIT_CODES.schemaTooNew;
  }
  if (isUsageError(err)) {
    process.stderr.write(`outpost: ${err.message}\n\n${await usage()}\n`);
    return 2;
  }
  if (isServiceError(err)) {
    process.stderr.write(`outpost: ${err.message} (${err.code})\n`);
    const problems = err.details?.errors;
    if (Array.isArray(problems)) for (const p of problems) process.stderr.write(`  - ${String(p)}\n`);
    return 1;
  }
  process.stderr.write(`outpost: ${(err as Error).stack ?? String(err)}\n`);
  return 1;
}

main(process.argv.slice(2))
  .then((code) => {
    if (code !== 0) process.exitCode = code;
  })
  .catch(async (err: unknown) => {
    process.exitCode = await reportFailure(err);
    // A daemon that failed to start has closed its doors; should anything still hold the event
    // loop, the process must not linger half-started.
    setTimeout(() => process.exit(), 5000).unref();
  });
