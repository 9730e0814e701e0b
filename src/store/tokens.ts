import { newId, newTokenSecret, hashToken, type TokenKind } from '../core/ids.js';
import type { Scope, TokenRecord } from '../core/model.js';
import type { Database } from './database.js';

type Row = Record<string, unknown>;

function tokenFrom(row: Row): TokenRecord {
  const scopes = row.scopes as string;
  return {
    id: row.id as string,
    kind: row.kind as TokenKind,
    name: row.name as string,
    deviceId: (row.device_id as string | null) ?? null,
    scopes: scopes ? (scopes.split(',') as Scope[]) : [],
    createdOn: row.created_on as number,
    revokedOn: (row.revoked_on as number | null) ?? null,
    gatewayId: (row.gateway_id as string | null) ?? null,
  };
}

export interface NewToken {
  kind: TokenKind;
  name: string;
  deviceId: string | null;
  scopes: Scope[];
  gatewayId?: string | null;
}

/** The name ending of a device token a gateway adopted from its central (fleet, docs/sync.md). */
export const ADOPTED_NAME_SUFFIX = ' (from the central)';

/** Access tokens (one aggregate of the store): only a hash of each secret is kept. */
export class TokenStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  /** A new token; its secret is returned once and never stored. */
  create(input: NewToken, now: number): { token: TokenRecord; secret: string } {
    const secret = newTokenSecret(input.kind);
    const token: TokenRecord = {
      id: newId(),
      kind: input.kind,
      name: input.name,
      deviceId: input.deviceId,
      scopes: input.scopes,
      createdOn: now,
      revokedOn: null,
      gatewayId: input.gatewayId ?? null,
    };
    this.#db
      .statement('INSERT INTO tokens (id, hash, kind, name, device_id, scopes, created_on, gateway_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
      .run(token.id, hashToken(secret), token.kind, token.name, token.deviceId, token.scopes.join(','), now, token.gatewayId);
    return { token, secret };
  }

  /** The live (not revoked) token with this hash. */
  findByHash(hash: string): TokenRecord | undefined {
    const row = this.#db.statement('SELECT * FROM tokens WHERE hash = ? AND revoked_on IS NULL').get(hash) as Row | undefined;
    return row && tokenFrom(row);
  }

  get(id: string): TokenRecord | undefined {
    const row = this.#db.statement('SELECT * FROM tokens WHERE id = ?').get(id) as Row | undefined;
    return row && tokenFrom(row);
  }

  list(): TokenRecord[] {
    return (this.#db.statement('SELECT * FROM tokens ORDER BY created_on, id').all() as Row[]).map(tokenFrom);
  }

  revoke(id: string, now: number): boolean {
    return this.#db.statement('UPDATE tokens SET revoked_on = ? WHERE id = ? AND revoked_on IS NULL').run(now, id).changes > 0;
  }

  liveDeviceTokenIds(deviceId: string): string[] {
    return this.#db.statement("SELECT id FROM tokens WHERE device_id = ? AND kind = 'device' AND revoked_on IS NULL").pluck().all(deviceId) as string[];
  }

  /** The hash of the device's newest live device token (a managed device's goes to its gateway). */
  deviceTokenHash(deviceId: string): string | null {
    return (
      (this.#db.statement("SELECT hash FROM tokens WHERE device_id = ? AND kind = 'device' AND revoked_on IS NULL ORDER BY created_on DESC, rowid DESC LIMIT 1").pluck().get(deviceId) as
        | string
        | undefined) ?? null
    );
  }

  /**
   * Makes `hash` the device's token from its central (a gateway adopting it): the token whose
   * secret only the central showed works here, and the one the central issued before (rotated
   * there) stops. Tokens a local admin issued for the device before it was managed keep working.
   * Adopted tokens carry ADOPTED_NAME_SUFFIX in their name, which is how a later adoption finds
   * them. Returns the ids of the tokens revoked.
   */
  adoptDeviceTokenHash(deviceId: string, deviceName: string, hash: string, now: number): string[] {
    return this.#db.transaction(() => {
      const existing = this.#db.statement('SELECT id, device_id FROM tokens WHERE hash = ?').get(hash) as Row | undefined;
      const adopted = this.#db
        .statement("SELECT id FROM tokens WHERE device_id = ? AND kind = 'device' AND revoked_on IS NULL AND name LIKE ?")
        .pluck()
        .all(deviceId, `%${ADOPTED_NAME_SUFFIX}`) as string[];
      const revoked = adopted.filter((id) => id !== existing?.id);
      for (const id of revoked) this.revoke(id, now);
      if (existing) {
        if (existing.device_id === deviceId) this.#db.statement('UPDATE tokens SET revoked_on = NULL WHERE id = ?').run(existing.id);
        return revoked;
      }
      this.#db
        .statement("INSERT INTO tokens (id, hash, kind, name, device_id, scopes, created_on) VALUES (?, ?, 'device', ?, ?, '', ?)")
        .run(newId(), hash, `device ${deviceName}${ADOPTED_NAME_SUFFIX}`, deviceId, now);
      return revoked;
    });
  }

  /** Issues a new device token and revokes the device's previous ones in one step. */
  rotateDeviceToken(deviceId: string, deviceName: string, now: number): { token: TokenRecord; secret: string; revoked: string[] } {
    return this.#db.transaction(() => {
      const revoked = this.liveDeviceTokenIds(deviceId);
      for (const id of revoked) this.revoke(id, now);
      return { ...this.create({ kind: 'device', name: `device ${deviceName}`, deviceId, scopes: [] }, now), revoked };
    });
  }
}
