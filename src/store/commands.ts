import type { Database } from './database.js';

export interface NewCommand {
  deviceId: string;
  assetId: string | null;
  valueJson: string;
  metaJson: string | null;
  at: number;
  source: string;
}

/** Commands sent to devices (one aggregate of the store), kept as a log; retention prunes them with states. */
export class CommandStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  /** Logs a command; returns its `seq`. */
  record(input: NewCommand): number {
    return Number(
      this.#db
        .statement('INSERT INTO commands (device_id, asset_id, value, meta, at, source) VALUES (?, ?, ?, ?, ?, ?)')
        .run(input.deviceId, input.assetId, input.valueJson, input.metaJson, input.at, input.source).lastInsertRowid,
    );
  }
}
