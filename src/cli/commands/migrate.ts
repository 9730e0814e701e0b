import { parseArgs } from 'node:util';
import { loadConfig } from '../../core/config.js';
import { createLogger } from '../../ops/logger.js';
import { UsageError } from '../args.js';
import type { CliCommand } from '../command.js';
import { openStore } from '../open.js';

/**
 * `outpost migrate [--copy]` (docs/scale-out.md): brings the central's PostgreSQL schema
 * (`central.postgres` / OUTPOST_POSTGRES_URL) to this program's version; the first node that
 * starts does the same. `--copy` also copies this data dir's SQLite central into it (catalog and
 * history), the step from one machine to several; run it with the daemon stopped.
 */
export const command: CliCommand = {
  usage: '  migrate [--copy] [--json]                         (central) migrate the PostgreSQL schema; --copy: copy this SQLite central into it',
  async run(args, _argv, write) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: { config: { type: 'string' }, data: { type: 'string' }, json: { type: 'boolean', default: false }, copy: { type: 'boolean', default: false } },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument: ${positionals[0]}`);
    const config = loadConfig({ file: values.config, dataDir: values.data });
    if (!config.central.postgres) throw new UsageError('outpost migrate needs central.postgres in the config (or OUTPOST_POSTGRES_URL)');
    const [{ CentralDatabase }, { migratePostgres }] = await Promise.all([import('../../scale-out/postgres.js'), import('../../scale-out/schema.js')]);
    const db = new CentralDatabase(config.central.postgres, { max: 2 });
    try {
      const result: Record<string, number> = await migratePostgres(db);
      if (values.copy) Object.assign(result, await copySqliteCentral(config, db));
      if (values.json) write(JSON.stringify(result));
      else
        write(
          `PostgreSQL schema at version ${result.to} (was ${result.from})` +
            (values.copy ? `; copied ${result.catalogRows} catalog rows and ${result.states} states (${result.duplicates} already there)` : ''),
        );
      return 0;
    } finally {
      await db.close();
    }
  },
};

/**
 * Every catalog row of the SQLite file into PostgreSQL's catalog (under the catalog lock, as any
 * write of a running node), then the history in chunks; states PostgreSQL already holds are skipped by its unique
 * index, so a copy that was interrupted can simply run again.
 */
async function copySqliteCentral(config: ReturnType<typeof loadConfig>, db: import('../../scale-out/postgres.js').CentralDatabase) {
  const [{ CatalogReplica }, { PostgresStates }] = await Promise.all([import('../../scale-out/catalog-replica.js'), import('../../scale-out/pg-states.js')]);
  const store = openStore(config);
  const replica = new CatalogReplica({ store, pg: db, logger: createLogger('silent') });
  try {
    const catalogRows = await replica.copyAll();
    const states = new PostgresStates(db, replica.node, { deviceOf: (assetId) => store.assets.byId(assetId)?.deviceId });
    let copied = 0;
    for (const chunk of store.states.allStatesInChunks(5000)) {
      await states.write(chunk);
      copied += chunk.length;
    }
    return { catalogRows, states: copied - states.duplicates, duplicates: states.duplicates };
  } finally {
    await replica.stop();
    store.close();
  }
}
