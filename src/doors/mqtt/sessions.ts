import type { AuthenticateError, Client } from 'aedes';
import type { Principal } from '../../core/access.js';
import type { OutpostConfig } from '../../core/config.js';
import type { Catalog } from '../../store/catalog.js';
import type { Logger } from '../../ops/logger.js';
import type { MqttMetrics } from '../../doors/mqtt/door-metrics.js';
import type { GatewaySessions } from '../../doors/mqtt/gateway-sessions.js';
import type { SubscriptionIndex } from '../../doors/mqtt/subscriptions.js';
import { addTo, removeFrom } from '../../doors/mqtt/set-map.js';

export interface SessionDeps {
  config: OutpostConfig['mqtt'];
  catalog: Catalog;
  logger: Logger;
  metrics: MqttMetrics;
  subscriptions: SubscriptionIndex;
  gateways?: GatewaySessions;
}

type AuthenticateDone = (error: AuthenticateError | null, success: boolean | null) => void;

function connectRefusal(code: 2 | 3 | 4 | 5, message: string): AuthenticateError {
  const err = new Error(message) as AuthenticateError;
  err.returnCode = code;
  return err;
}

/** Whether two principals are the same client for MQTT session takeover: the same device, or the same token. */
function samePrincipal(a: Principal, b: Principal): boolean {
  if (a.deviceId || b.deviceId) return a.deviceId === b.deviceId;
  return a.tokenId === b.tokenId;
}

/**
 * The door's sessions (docs/mqtt.md, "Connecting"): CONNECT checks the token and the client id,
 * each live connection is known by its principal and by token, and revoking a token closes its
 * sessions. aedes' `authenticate` hook and its `client`/`clientDisconnect` events drive it.
 */
export class MqttSessions {
  readonly #deps: SessionDeps;
  readonly #principals = new WeakMap<Client, Principal>();
  readonly #byToken = new Map<string, Set<Client>>();
  /** Registered sessions by client id: who holds an id now, for takeover decisions. */
  readonly #byClientId = new Map<string, Client>();
  /**
   * Client ids whose session authenticated but is not registered with the broker yet, so two
   * connections racing for one id are told apart like registered ones.
   */
  readonly #claimedIds = new Map<string, Client>();

  constructor(deps: SessionDeps) {
    this.#deps = deps;
  }

  /** The principal of an authenticated connection; undefined before (or without) a good CONNECT. */
  principal(client: Client): Principal | undefined {
    return this.#principals.get(client);
  }

  /** aedes' `authenticate` hook. It calls hooks without a try/catch: a throw would end the process. */
  authenticate(client: Client, username: string | undefined, done: AuthenticateDone): void {
    try {
      this.#authenticate(client, username, done);
    } catch (err) {
      // e.g. the store cannot be read: CONNACK 3, "server unavailable", and the client retries later.
      this.#deps.logger.error({ err, clientId: client.id }, 'mqtt connection failed inside the gateway');
      done(connectRefusal(3, 'server unavailable'), null);
    }
  }

  #authenticate(client: Client, username: string | undefined, done: AuthenticateDone): void {
    const { catalog, logger, metrics } = this.#deps;
    const principal = username ? catalog.principalForSecret(username) : undefined;
    if (!principal) {
      metrics.connections.inc('refused');
      // The password is never looked at, and neither it nor the user name is logged.
      logger.info({ clientId: client.id, remote: client.conn && (client.conn as { remoteAddress?: string }).remoteAddress }, 'mqtt connection refused: unknown or revoked token');
      done(connectRefusal(4, 'bad user name or password'), null);
      return;
    }
    if (principal.kind === 'gateway' && !this.#deps.gateways) {
      metrics.connections.inc('refused');
      done(connectRefusal(5, 'gateway tokens connect only to a central instance'), null);
      return;
    }
    const idProblem = this.#clientIdProblem(client, principal);
    if (idProblem) {
      metrics.connections.inc('refused');
      logger.info({ clientId: client.id.slice(0, 64), tokenId: principal.tokenId }, `mqtt connection refused: ${idProblem}`);
      done(connectRefusal(2, idProblem), null);
      return;
    }
    this.#claimedIds.set(client.id, client);
    // A session that never registers (closed during the handshake) must not keep its claim.
    client.conn.once('close', () => {
      if (this.#claimedIds.get(client.id) === client) this.#claimedIds.delete(client.id);
    });
    this.#principals.set(client, principal);
    metrics.connections.inc('accepted');
    done(null, true);
  }

  /**
   * Why a client id is refused (CONNACK 2): too long, a NUL in it, or held by a live session of
   * another principal. MQTT lets a new connection take over the session of its client id; across
   * principals that would let any device disconnect any other by using its id, so only the same
   * principal (the same device, or the same application token) may take over.
   */
  #clientIdProblem(client: Client, principal: Principal): string | undefined {
    const id = client.id;
    const limit = this.#deps.config.maxClientIdBytes;
    if (Buffer.byteLength(id) > limit) return `client id longer than ${limit} bytes`;
    if (id.includes('\u0000')) return 'client id contains U+0000';
    for (const holder of [this.#byClientId.get(id), this.#claimedIds.get(id)]) {
      if (!holder || holder === client || holder.closed) continue;
      const other = this.#principals.get(holder);
      if (other && !samePrincipal(other, principal)) return 'client id in use by another token';
    }
    return undefined;
  }

  /** aedes registered the session (its `client` event): CONNACK is on its way. */
  opened(client: Client): void {
    if (this.#claimedIds.get(client.id) === client) this.#claimedIds.delete(client.id);
    const principal = this.#principals.get(client);
    if (!principal) return;
    this.#byClientId.set(client.id, client);
    addTo(this.#byToken, principal.tokenId, client);
    if (principal.kind === 'gateway') this.#deps.gateways?.opened(principal, client);
    this.#deps.logger.debug({ clientId: client.id, tokenId: principal.tokenId, kind: principal.kind }, 'mqtt session opened');
  }

  /** The session ended (aedes' `clientDisconnect` event). */
  closed(client: Client): void {
    const principal = this.#principals.get(client);
    if (!principal) return;
    if (this.#byClientId.get(client.id) === client) this.#byClientId.delete(client.id);
    removeFrom(this.#byToken, principal.tokenId, client);
    this.#deps.subscriptions.drop(client);
    if (principal.kind === 'gateway') this.#deps.gateways?.closed(principal, client);
  }

  /** Closes the live sessions of a token (revoked over HTTP, the CLI or a config change). */
  closeToken(tokenId: string, reason: string): void {
    const clients = this.#byToken.get(tokenId);
    if (!clients) return;
    this.#byToken.delete(tokenId);
    for (const client of clients) {
      this.#deps.logger.info({ clientId: client.id, tokenId }, `mqtt session closed: ${reason}`);
      client.close();
    }
  }

  /** Closes the sessions whose token is no longer live (another process committed a revocation). */
  closeRevoked(): void {
    for (const tokenId of [...this.#byToken.keys()]) {
      if (!this.#deps.catalog.isTokenLive(tokenId)) this.closeToken(tokenId, 'token revoked');
    }
  }
}
