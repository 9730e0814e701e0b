import { newId } from '../core/ids.js';
import type { Database } from './database.js';
import type { TokenStore } from './tokens.js';

export interface GatewayRecord {
  id: string;
  name: string;
  createdOn: number;
  lastSeen: number | null;
}

export interface PendingCommand {
  seq: number;
  deviceId: string;
  topic: string;
  payload: string;
}

type Row = Record<string, unknown>;

const gatewayFrom = (r: Row): GatewayRecord => ({
  id: r.id as string,
  name: r.name as string,
  createdOn: r.created_on as number,
  lastSeen: (r.last_seen as number | null) ?? null,
});

/**
 * The central role's gateways (one aggregate of the store): each with its `gateway:` tokens, the
 * devices behind it (`devices.gateway_id`), and commands waiting while it is offline.
 */
export class GatewayStore {
  readonly #db: Database;
  readonly #tokens: TokenStore;

  constructor(db: Database, tokens: TokenStore) {
    this.#db = db;
    this.#tokens = tokens;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  /** A new gateway and its token (the secret is shown once). */
  create(name: string, now: number): { gateway: GatewayRecord; token: string; tokenId: string } {
    const gateway: GatewayRecord = { id: newId(), name, createdOn: now, lastSeen: null };
    return this.#db.transaction(() => {
      this.#stmt('INSERT INTO gateways (id, name, created_on) VALUES (?, ?, ?)').run(gateway.id, name, now);
      const { token, secret } = this.#tokens.create({ kind: 'gateway', name: `gateway ${name}`, deviceId: null, scopes: [], gatewayId: gateway.id }, now);
      return { gateway, token: secret, tokenId: token.id };
    });
  }

  get(id: string): GatewayRecord | undefined {
    const row = this.#stmt('SELECT * FROM gateways WHERE id = ?').get(id) as Row | undefined;
    return row && gatewayFrom(row);
  }

  list(): GatewayRecord[] {
    return (this.#stmt('SELECT * FROM gateways ORDER BY created_on, id').all() as Row[]).map(gatewayFrom);
  }

  /** Its tokens go with it; its devices stay, assigned to no gateway. Returns the token ids that were live. */
  delete(id: string): string[] | undefined {
    return this.#db.transaction(() => {
      const tokens = this.liveTokenIds(id);
      if (this.#stmt('DELETE FROM gateways WHERE id = ?').run(id).changes === 0) return undefined;
      return tokens;
    });
  }

  liveTokenIds(gatewayId: string): string[] {
    return this.#stmt('SELECT id FROM tokens WHERE gateway_id = ? AND revoked_on IS NULL').pluck().all(gatewayId) as string[];
  }

  deviceIds(gatewayId: string): string[] {
    return this.#stmt('SELECT id FROM devices WHERE gateway_id = ? ORDER BY created_on, id').pluck().all(gatewayId) as string[];
  }

  deviceCount(gatewayId: string): number {
    return this.#stmt('SELECT count(*) FROM devices WHERE gateway_id = ?').pluck().get(gatewayId) as number;
  }

  touch(gatewayId: string, now: number): void {
    this.#stmt('UPDATE gateways SET last_seen = ? WHERE id = ?').run(now, gatewayId);
  }

  /** The catalog said the device was deleted at the gateway (null: it is back). */
  setRemovedAtGateway(deviceId: string, at: number | null): void {
    this.#stmt('UPDATE devices SET removed_at_gateway = ? WHERE id = ?').run(at, deviceId);
  }

  // ---- commands waiting for an offline gateway

  queueCommand(input: { gatewayId: string; deviceId: string; topic: string; payload: string; expiresAt: number }): void {
    this.#stmt('INSERT INTO gateway_commands (gateway_id, device_id, topic, payload, expires_at) VALUES (?, ?, ?, ?, ?)').run(
      input.gatewayId,
      input.deviceId,
      input.topic,
      input.payload,
      input.expiresAt,
    );
  }

  /** Removes and returns the gateway's unexpired commands, oldest first (expired ones are dropped). */
  takeCommands(gatewayId: string, now: number): PendingCommand[] {
    return this.#db.transaction(() => {
      this.#stmt('DELETE FROM gateway_commands WHERE gateway_id = ? AND expires_at <= ?').run(gatewayId, now);
      const rows = this.#stmt('SELECT seq, device_id, topic, payload FROM gateway_commands WHERE gateway_id = ? ORDER BY seq').all(gatewayId) as Row[];
      this.#stmt('DELETE FROM gateway_commands WHERE gateway_id = ?').run(gatewayId);
      return rows.map((r) => ({ seq: r.seq as number, deviceId: r.device_id as string, topic: r.topic as string, payload: r.payload as string }));
    });
  }

  countCommands(gatewayId: string): number {
    return this.#stmt('SELECT count(*) FROM gateway_commands WHERE gateway_id = ?').pluck().get(gatewayId) as number;
  }
}
