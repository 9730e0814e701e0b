import { resolve } from 'node:path';
import { loadConfig } from '../../core/config.js';
import { backupDatabase, BackupError } from '../../ops/backup.js';
import { opsArgs } from '../args.js';
import type { CliCommand } from '../command.js';

/** `outpost backup FILE`: an online, checked copy of the database while the daemon runs (docs/operations.md). */
export const command: CliCommand = {
  usage: '  backup FILE                                       online backup of the database (while the daemon runs)',
  async run(args, _argv, write) {
    const { positionals, sources, json, fail } = opsArgs('backup', args);
    const config = loadConfig(sources);
    const file = positionals[0];
    if (!file) return fail('missing FILE: outpost backup FILE', 2);
    let lastShown = -1;
    try {
      const result = await backupDatabase(config.dataDir, resolve(file), ({ totalPages, remainingPages }) => {
        // One line per tenth on a pipe or in the journal; small databases finish before the first.
        const done = totalPages ? Math.floor(((totalPages - remainingPages) / totalPages) * 10) : 10;
        if (totalPages > 2048 && done !== lastShown) {
          lastShown = done;
          process.stderr.write(`backup: ${done * 10}% of ${totalPages} pages\n`);
        }
      });
      if (json) write(JSON.stringify(result));
      else write(`backup written to ${result.file} (${result.bytes} bytes, ${result.pages} pages, checked)`);
      return 0;
    } catch (err) {
      if (err instanceof BackupError) return fail(`${err.message} (${err.code})`);
      throw err;
    }
  },
};
