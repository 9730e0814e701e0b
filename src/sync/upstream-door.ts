import type { Door } from '../doors/door.js';
import type { StateWriter } from '../ingest/state-writer.js';
import type { UpstreamHealth, UpstreamSync } from './upstream-sync.js';

/**
 * The upstream link as a door (docs/sync.md). Compositions list it first, so it is the last door
 * to stop: what the other doors committed is in the outbox by then, and PUBACKs in flight still count.
 */
export class UpstreamDoor implements Door {
  readonly name = 'upstream';
  readonly #sync: UpstreamSync;
  readonly #writer: StateWriter;

  constructor(sync: UpstreamSync, writer: StateWriter) {
    this.#sync = sync;
    this.#writer = writer;
  }

  /** Connects in the background: a central that is down never holds up the start. */
  async start(): Promise<Record<string, number>> {
    this.#sync.start();
    return {};
  }

  async stop(): Promise<void> {
    // States the other doors had in flight reach the outbox before the links let go.
    this.#writer.flush();
    await this.#sync.stop();
  }

  health(): Record<string, unknown> {
    return upstreamHealthView(this.#sync.health());
  }

  /** A link that is down degrades, never fails: states wait in the outbox. */
  degradedBecause(): string | undefined {
    return this.#sync.link === 'down' ? 'upstream: link down, states wait in the outbox' : undefined;
  }
}

/** The upstream section of /healthz and `outpost status`: times as ISO 8601. */
export function upstreamHealthView(h: UpstreamHealth): Record<string, unknown> {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return { ...h, oldestAt: iso(h.oldestAt), lastAckAt: iso(h.lastAckAt) };
}
