import { newId } from '../core/ids.js';
import type { DeviceRecord } from '../core/model.js';
import type { Database } from './database.js';
import type { TokenStore } from './tokens.js';

type Row = Record<string, unknown>;

function deviceFrom(row: Row): DeviceRecord {
  return {
    id: row.id as string,
    name: row.name as string,
    title: (row.title as string | null) ?? null,
    description: (row.description as string | null) ?? null,
    payloadFormat: row.payload_format as string,
    codec: (row.codec as string | null) ?? null,
    createdOn: row.created_on as number,
    updatedOn: row.updated_on as number,
    gatewayId: (row.gateway_id as string | null) ?? null,
    removedAtGateway: (row.removed_at_gateway as number | null) ?? null,
  };
}

export interface NewDevice {
  name: string;
  title?: string | null;
  description?: string | null;
  /** An ID chosen by an admin (pre-assignment). */
  id?: string;
  /** At a central: the gateway the device is behind. */
  gatewayId?: string | null;
}

export type DeviceChanges = { name?: string; title?: string | null; description?: string | null; payloadFormat?: string; codec?: string | null };

/**
 * Devices (one aggregate of the store). A device is created with its first device token, and
 * deleting it removes its assets, history, uplinks and tokens (foreign-key cascade).
 */
export class DeviceStore {
  readonly #db: Database;
  readonly #tokens: TokenStore;

  constructor(db: Database, tokens: TokenStore) {
    this.#db = db;
    this.#tokens = tokens;
  }

  create(input: NewDevice, now: number): { device: DeviceRecord; token: string; tokenId: string } {
    const device: DeviceRecord = {
      id: input.id ?? newId(),
      name: input.name,
      title: input.title ?? null,
      description: input.description ?? null,
      payloadFormat: 'auto',
      codec: null,
      createdOn: now,
      updatedOn: now,
      gatewayId: input.gatewayId ?? null,
      removedAtGateway: null,
    };
    return this.#db.transaction(() => {
      this.#db
        .statement(
          `INSERT INTO devices (id, name, title, description, payload_format, codec, created_on, updated_on, gateway_id)
           VALUES (@id, @name, @title, @description, @payloadFormat, @codec, @createdOn, @updatedOn, @gatewayId)`,
        )
        .run(device);
      const { token, secret } = this.#tokens.create({ kind: 'device', name: `device ${device.name}`, deviceId: device.id, scopes: [] }, now);
      return { device, token: secret, tokenId: token.id };
    });
  }

  get(id: string): DeviceRecord | undefined {
    const row = this.#db.statement('SELECT * FROM devices WHERE id = ?').get(id) as Row | undefined;
    return row && deviceFrom(row);
  }

  list(): DeviceRecord[] {
    return (this.#db.statement('SELECT * FROM devices ORDER BY created_on, id').all() as Row[]).map(deviceFrom);
  }

  count(): number {
    return this.#db.statement('SELECT count(*) FROM devices').pluck().get() as number;
  }

  /** The `at` of each device's newest latest state: the device list's "last seen", in one query. */
  lastStateAtByDevice(): Map<string, number> {
    const rows = this.#db
      .statement('SELECT a.device_id AS device_id, MAX(l.at) AS at FROM latest_states l JOIN assets a ON a.id = l.asset_id GROUP BY a.device_id')
      .all() as Row[];
    return new Map(rows.map((r) => [r.device_id as string, r.at as number]));
  }

  update(id: string, fields: DeviceChanges, now: number): void {
    const current = this.get(id);
    if (!current) return;
    const next = { ...current, ...fields, updatedOn: now };
    this.#db
      .statement(
        `UPDATE devices SET name = @name, title = @title, description = @description, payload_format = @payloadFormat,
         codec = @codec, updated_on = @updatedOn WHERE id = @id`,
      )
      .run(next);
  }

  /** Deletes the device with its assets, history and tokens (cascade). */
  delete(id: string): boolean {
    return this.#db.statement('DELETE FROM devices WHERE id = ?').run(id).changes > 0;
  }
}
