import type { Store } from '../store/store.js';
import type { StateReads } from '../store/state-reads.js';

/** What `outpost status --json` prints (docs/operations.md, "status"). */
export interface DaemonStatus {
  version: string;
  pid: number;
  uptimeSeconds: number;
  dataDir: string;
  ports: Record<string, number>;
  devices: number;
  states: { stored: number; acceptedSinceStart: number; refusedSinceStart: number };
  /** Filled in by the radio sources when configured, else null. */
  radio: unknown;
  /** Filled in by upstream sync when configured, else null. */
  upstream: unknown;
  /** When the newest state or raw uplink was received (ISO 8601), or null. */
  lastUplinkAt: string | null;
}

/**
 * Sections of the status that other parts of the daemon report on. Radio and sync add theirs with
 * `daemon.statusSections.set('radio', () => …)`; a section nobody set is null.
 */
export class StatusSections {
  readonly #sections = new Map<string, () => unknown>();

  set(name: 'radio' | 'upstream', read: () => unknown): void {
    this.#sections.set(name, read);
  }

  read(name: 'radio' | 'upstream'): unknown {
    const read = this.#sections.get(name);
    return read ? read() : null;
  }
}

/**
 * Database figures of the status; cheap enough to run on demand (SQLite: count(*) uses the smallest
 * index; PostgreSQL: the planner's estimate, see StateReads.figures).
 */
export async function storeFigures(store: Store, states: StateReads): Promise<{ devices: number; storedStates: number; lastUplinkAt: number | null }> {
  const devices = store.devices.count();
  const { stored: storedStates, lastReceivedAt: lastState } = await states.figures();
  const lastRaw = store.uplinks.lastReceivedAt();
  const candidates = [lastState, lastRaw].filter((v): v is number => typeof v === 'number');
  return { devices, storedStates, lastUplinkAt: candidates.length ? Math.max(...candidates) : null };
}
