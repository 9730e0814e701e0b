import type { Database, Statement } from 'better-sqlite3';

/**
 * Prepared statements by their SQL text, prepared on first use. Preparing costs more than running
 * a small statement, and every aggregate of the store runs the same few statements on hot paths.
 * One cache serves every aggregate of a connection, and a statement's mode (`pluck()`) stays set on
 * it: the same SQL text must be read the same way wherever it is used.
 */
export class StatementCache {
  readonly #db: Database;
  readonly #prepared = new Map<string, Statement>();

  constructor(db: Database) {
    this.#db = db;
  }

  get(sql: string): Statement {
    let statement = this.#prepared.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#prepared.set(sql, statement);
    }
    return statement;
  }
}
