import type { Database } from './database.js';
import type { JsonValue } from '../core/json.js';

/**
 * The last value commanded to each asset of a device, as one JSON object per device. A radio
 * downlink codec fills the assets a command leaves out from these (docs/codecs.md, "Previous
 * values"): a frame that carries level, fade, on and scene together must not switch a lamp off
 * because the command only named its level. Only commands that were encoded and queued update it.
 */
export class CommandedValueStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  /** Asset name → last commanded value; empty when the device was never commanded over the radio. */
  get(deviceId: string): Record<string, JsonValue> {
    const json = this.#db.statement('SELECT values_json FROM commanded_values WHERE device_id = ?').pluck().get(deviceId) as string | undefined;
    return json === undefined ? {} : (JSON.parse(json) as Record<string, JsonValue>);
  }

  /** Merges a command's values over the stored ones and returns the result. */
  remember(deviceId: string, values: Record<string, JsonValue>, at: number): Record<string, JsonValue> {
    return this.#db.transaction(() => {
      const merged = { ...this.get(deviceId), ...values };
      this.#db
        .statement(
          'INSERT INTO commanded_values (device_id, values_json, updated_at) VALUES (?, ?, ?) ON CONFLICT (device_id) DO UPDATE SET values_json = excluded.values_json, updated_at = excluded.updated_at',
        )
        .run(deviceId, JSON.stringify(merged), at);
      return merged;
    });
  }
}
