import BetterSqlite3, { type Database } from 'better-sqlite3';

/**
 * A second, read-only connection to a store's file, for tests that check rows the store's API does
 * not show (provenance columns, hashes, job progress). The application itself never hands out its
 * connection (docs/architecture.md, "Store"); a test reads the file as any other process would.
 */
export function inspect(path: string): Database {
  return new BetterSqlite3(path, { readonly: true, fileMustExist: true });
}
