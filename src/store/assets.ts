import { newId } from '../core/ids.js';
import type { AssetKind, AssetRecord } from '../core/model.js';
import type { Profile } from '../core/profiles.js';
import type { Database } from './database.js';

type Row = Record<string, unknown>;

function assetFrom(row: Row): AssetRecord {
  return {
    id: row.id as string,
    deviceId: row.device_id as string,
    name: row.name as string,
    title: (row.title as string | null) ?? null,
    description: (row.description as string | null) ?? null,
    is: row.kind as AssetKind,
    profile: JSON.parse(row.profile as string) as Profile,
    createdOn: row.created_on as number,
    updatedOn: row.updated_on as number,
  };
}

/** The assets of devices (one aggregate of the store): each belongs to one device, named uniquely within it. */
export class AssetStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  create(input: Omit<AssetRecord, 'id' | 'createdOn' | 'updatedOn'>, now: number): AssetRecord {
    const asset: AssetRecord = { ...input, id: newId(), createdOn: now, updatedOn: now };
    this.#db
      .statement(
        `INSERT INTO assets (id, device_id, name, title, description, kind, profile, created_on, updated_on)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(asset.id, asset.deviceId, asset.name, asset.title, asset.description, asset.is, JSON.stringify(asset.profile), now, now);
    return asset;
  }

  update(asset: AssetRecord, now: number): AssetRecord {
    const next = { ...asset, updatedOn: now };
    this.#db
      .statement('UPDATE assets SET title = ?, description = ?, kind = ?, profile = ?, updated_on = ? WHERE id = ?')
      .run(next.title, next.description, next.is, JSON.stringify(next.profile), now, next.id);
    return next;
  }

  byId(id: string): AssetRecord | undefined {
    const row = this.#db.statement('SELECT * FROM assets WHERE id = ?').get(id) as Row | undefined;
    return row && assetFrom(row);
  }

  byName(deviceId: string, name: string): AssetRecord | undefined {
    const row = this.#db.statement('SELECT * FROM assets WHERE device_id = ? AND name = ?').get(deviceId, name) as Row | undefined;
    return row && assetFrom(row);
  }

  list(deviceId: string): AssetRecord[] {
    return (this.#db.statement('SELECT * FROM assets WHERE device_id = ? ORDER BY created_on, name').all(deviceId) as Row[]).map(assetFrom);
  }

  count(deviceId: string): number {
    return this.#db.statement('SELECT count(*) FROM assets WHERE device_id = ?').pluck().get(deviceId) as number;
  }

  delete(id: string): boolean {
    return this.#db.statement('DELETE FROM assets WHERE id = ?').run(id).changes > 0;
  }
}
