import { randomBytes } from 'node:crypto';
import type { MQEmitter } from 'mqemitter';
import type { Door } from '../doors/door.js';
import type { BrokerCluster } from '../doors/mqtt/broker.js';

interface RedisConnection {
  status: string;
}

/**
 * What the MQTT doors of several central nodes share through Redis (docs/scale-out.md): the aedes
 * ecosystem's own modules, mqemitter-redis for every message (a subscriber on node A receives what
 * node B publishes) and aedes-persistence-redis for retained messages, wills and subscriptions.
 * Each node's broker gets its own id: aedes tells the nodes apart by it (heartbeats, the wills of
 * a node that died).
 */
export async function redisCluster(url: string): Promise<BrokerCluster & { health(): { status: 'ok' | 'failing'; error?: string }; close(): Promise<void> }> {
  const [{ default: mqemitterRedis }, { default: redisPersistence }] = await Promise.all([
    import('mqemitter-redis') as unknown as Promise<{ default: (opts: Record<string, unknown>) => MQEmitter & { pubConn: RedisConnection; subConn: RedisConnection; state: NodeJS.EventEmitter } }>,
    // No type declarations ship with it.
    import('aedes-persistence-redis' as string) as unknown as Promise<{ default: (opts: Record<string, unknown>) => { destroy(): Promise<void> } }>,
  ]);
  const parsed = new URL(url);
  const connection = {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    password: parsed.password ? decodeURIComponent(parsed.password) : undefined,
    username: parsed.username ? decodeURIComponent(parsed.username) : undefined,
    db: Number(parsed.pathname.slice(1) || 0),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  };
  // The same delivery settings as the single node's emitter (see doors/mqtt/fanout.ts): never queue.
  const mq = mqemitterRedis({ ...connection, concurrency: 0, matchEmptyLevels: true });
  let lastError: string | undefined;
  // A Redis that is away must not crash the node: ioredis reconnects by itself.
  mq.state.on('error', (err: Error) => (lastError = err.message));
  const persistence = redisPersistence(connection);
  return {
    id: `outpost-${randomBytes(6).toString('hex')}`,
    mq,
    persistence,
    /** aedes closes the emitter when it closes, not the persistence: its connection would keep the process alive. */
    async close() {
      // aedes does not wait for the persistence work its closing sessions start (subscriptions and
      // wills removed); cutting the connection under it rejects those commands unhandled and ends
      // the process with exit 1. They take a few Redis round trips: give them a moment first.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await persistence.destroy().catch(() => {});
    },
    health() {
      const up = mq.pubConn.status === 'ready' && mq.subConn.status === 'ready';
      return up ? { status: 'ok' } : { status: 'failing', ...(lastError ? { error: lastError } : {}) };
    },
  };
}

/** The `redis` section of /healthz; the broker (the MQTT door) closes the emitter, this door the persistence. */
export function redisHealthDoor(health: () => { status: 'ok' | 'failing'; error?: string }, close: () => Promise<void>): Door {
  return {
    name: 'redis',
    start: async () => ({}),
    // Listed before the MQTT door, so stopped after it: the broker is closed by then.
    stop: close,
    health,
    degradedBecause: () => {
      const h = health();
      return h.status === 'failing' ? `redis: ${h.error ?? 'not connected'} (messages between nodes are not delivered)` : undefined;
    },
  };
}
