import { join } from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { DATA_FILES } from '../../src/store/data-dir.js';

/**
 * A second, read-only connection to a store's file, for tests that check rows the store's API does
 * not show (provenance columns, hashes, job progress). The application itself never hands out its
 * connection (docs/architecture.md, "Store"); a test reads the file as any other process would.
 */
export function inspect(path: string): Database {
  return new BetterSqlite3(path, { readonly: true, fileMustExist: true });
}

/**
 * The rows a query finds in the store of a data dir, read through a connection opened and closed for
 * this one query, so a daemon running on that dir (another process) is never held up by the test.
 */
export function queryStore<T = Record<string, unknown>>(dataDir: string, sql: string, ...params: unknown[]): T[] {
  const db = inspect(join(dataDir, DATA_FILES.database));
  try {
    return db.prepare(sql).all(...params) as T[];
  } finally {
    db.close();
  }
}
