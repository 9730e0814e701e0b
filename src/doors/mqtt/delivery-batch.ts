import type { Client } from 'aedes';

type Connection = Client['conn'];

/**
 * Sends the messages delivered to one connection in a turn of the event loop in one socket write.
 *
 * aedes hands each message to each subscriber in a setImmediate of its own, and mqtt-packet corks
 * the socket only until the next tick, which Node runs between two immediates: a burst of N feed
 * messages to one subscriber (a group commit's worth of uplinks) went out as N `writev` calls, one
 * per message, each a trip through the kernel's TCP stack (docs/architecture.md, "Group commit").
 *
 * `hold` corks a connection when the first delivery of a turn is authorized: aedes' hook runs just
 * before it schedules the delivery's immediate. The release is two immediates away: the first runs
 * before that turn's deliveries (it was scheduled before them) and only schedules the second, which
 * Node keeps for the next turn's check phase, after every delivery of this one. A message therefore
 * waits at most one more turn of the event loop; deliveries authorized once the release has run go
 * out as before, one write each, until the next hold.
 */
export class DeliveryBatch {
  readonly #held = new Set<Connection>();
  #releasing = false;

  /** Called for each delivery aedes is about to write to `client`. */
  hold(client: Client | null): void {
    const conn = client?.conn;
    if (!conn || this.#held.has(conn) || conn.destroyed || typeof conn.cork !== 'function') return;
    conn.cork();
    this.#held.add(conn);
    if (!this.#releasing) {
      this.#releasing = true;
      setImmediate(this.#releaseNextTurn);
    }
  }

  readonly #releaseNextTurn = (): void => {
    setImmediate(this.#release);
  };

  readonly #release = (): void => {
    this.#releasing = false;
    const held = [...this.#held];
    this.#held.clear();
    // A destroyed socket ignores the uncork; every cork taken is given back either way.
    for (const conn of held) conn.uncork();
  };
}
