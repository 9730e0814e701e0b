import { resolve } from 'node:path';
import { loadConfig } from '../../core/config.js';
import { BackupError, restoreDatabase } from '../../ops/backup.js';
import { opsArgs } from '../args.js';
import type { CliCommand } from '../command.js';

/** `outpost restore FILE`: replaces the database with a backup while the daemon is stopped (docs/operations.md). */
export const command: CliCommand = {
  usage: '  restore FILE [--yes]                              replace the database with a backup (daemon stopped)',
  async run(args, _argv, write) {
    const { values, positionals, sources, json, fail } = opsArgs('restore', args);
    const config = loadConfig(sources);
    const file = positionals[0];
    if (!file) return fail('missing FILE: outpost restore FILE', 2);
    const path = resolve(file);
    try {
      const result = await restoreDatabase(config.dataDir, path, {
        // Said once no daemon runs and the file passed its checks, right before it happens; --yes for scripts.
        onReplacing: () => {
          if (!values.yes && !json) process.stderr.write(`outpost restore: replacing the database of ${config.dataDir} with ${path} (the current one is kept beside it)\n`);
        },
      });
      if (json) write(JSON.stringify(result));
      else write(`restored ${result.restoredFrom} into ${result.database}${result.previous ? `; the previous database is kept as ${result.previous}` : ''}`);
      return 0;
    } catch (err) {
      if (err instanceof BackupError) return fail(`${err.message} (${err.code})`);
      throw err;
    }
  },
};
