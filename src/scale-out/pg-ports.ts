import type { PendingCommand } from '../store/gateways.js';
import type { GatewayPresence, PendingCommands } from '../sync/central/ports.js';
import type { CentralDatabase } from './postgres.js';

/** The channel a node NOTIFYs when it keeps a command for a gateway: the node holding its session takes it. */
export const COMMANDS_CHANNEL = 'outpost_gateway_commands';

/**
 * Commands waiting for a gateway, in PostgreSQL (docs/scale-out.md). `take` deletes what it returns
 * in one statement over rows locked `FOR UPDATE SKIP LOCKED`: two nodes taking for the same
 * gateway at once (a reconnect racing a notification) never both get a command.
 */
export class PostgresPendingCommands implements PendingCommands {
  readonly #db: CentralDatabase;

  constructor(db: CentralDatabase) {
    this.#db = db;
  }

  async queue(command: { gatewayId: string; deviceId: string; topic: string; payload: string; expiresAt: number }): Promise<void> {
    await this.#db.transaction(async (client) => {
      await client.query('INSERT INTO gateway_commands (gateway_id, device_id, topic, payload, expires_at) VALUES ($1, $2, $3, $4, $5)', [
        command.gatewayId,
        command.deviceId,
        command.topic,
        command.payload,
        command.expiresAt,
      ]);
      // Sent at commit: the node that has the gateway connected takes it now.
      await client.query('SELECT pg_notify($1, $2)', [COMMANDS_CHANNEL, command.gatewayId]);
    });
  }

  async take(gatewayId: string, now: number): Promise<PendingCommand[]> {
    const r = await this.#db.query<{ id: string; device_id: string; topic: string; payload: string; expires_at: string }>(
      `DELETE FROM gateway_commands WHERE id IN (
         SELECT id FROM gateway_commands WHERE gateway_id = $1 ORDER BY id FOR UPDATE SKIP LOCKED
       ) RETURNING id, device_id, topic, payload, expires_at`,
      [gatewayId],
    );
    return r.rows
      .filter((row) => Number(row.expires_at) > now)
      .sort((a, b) => Number(a.id) - Number(b.id))
      .map((row) => ({ seq: Number(row.id), deviceId: row.device_id, topic: row.topic, payload: row.payload }));
  }
}

/** PostgreSQL's clock in ms: every node compares heartbeats with the same clock. */
const DB_NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';
/** A node whose heartbeat is older than this no longer counts, nor do its gateways' sessions. */
const NODE_SILENT_MS = 5000;

/**
 * Which node holds each gateway's session, and when it was last seen; every node keeps the set of
 * gateways connected to the others (refreshed each second), so `GET /gateway/<id>` says
 * `connected` alike on every node.
 */
export class PostgresGatewayPresence implements GatewayPresence {
  readonly #db: CentralDatabase;
  readonly #node: string;
  #elsewhere = new Set<string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(db: CentralDatabase, node: string) {
    this.#db = db;
    this.#node = node;
  }

  /** Connected to another live node (as of the last second). */
  connectedElsewhere(gatewayId: string): boolean {
    return this.#elsewhere.has(gatewayId);
  }

  start(): void {
    void this.#beat();
    this.#timer = setInterval(() => void this.#beat(), 1000).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #beat(): Promise<void> {
    try {
      await this.#db.query(`INSERT INTO node_heartbeats (node, at) VALUES ($1, ${DB_NOW}) ON CONFLICT (node) DO UPDATE SET at = excluded.at`, [this.#node]);
      const r = await this.#db.query<{ gateway_id: string }>(
        `SELECT p.gateway_id FROM gateway_presence p JOIN node_heartbeats h ON h.node = p.node
         WHERE p.connected AND p.node <> $1 AND h.at > ${DB_NOW} - $2`,
        [this.#node, NODE_SILENT_MS],
      );
      this.#elsewhere = new Set(r.rows.map((row) => row.gateway_id));
    } catch {
      // PostgreSQL away: /healthz says so; the view is refreshed when it answers again.
    }
  }

  async opened(gatewayId: string, at: number): Promise<void> {
    await this.#db.query(
      `INSERT INTO gateway_presence (gateway_id, node, connected, last_seen) VALUES ($1, $2, true, $3)
       ON CONFLICT (gateway_id) DO UPDATE SET node = excluded.node, connected = true, last_seen = excluded.last_seen`,
      [gatewayId, this.#node, at],
    );
  }

  async closed(gatewayId: string, at: number): Promise<void> {
    // Only this node's own session: the gateway may already be connected to another node.
    await this.#db.query('UPDATE gateway_presence SET connected = false, last_seen = $3 WHERE gateway_id = $1 AND node = $2', [gatewayId, this.#node, at]);
  }
}
