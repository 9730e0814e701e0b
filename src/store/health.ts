import { statSync } from 'node:fs';
import { isCorruption, isStorageFull, storageError, type ServiceError } from '../core/errors.js';
import { systemClock, type Clock } from '../core/time.js';

export type HealthStatus = 'ok' | 'degraded' | 'failing';

export interface StoreHealthReport {
  status: HealthStatus;
  /** Set when not ok: what is wrong and what to do. */
  reason?: string;
}

/** A problem the store just ran into, once per kind (the daemon logs it). */
export interface StoreProblem {
  kind: 'corrupt' | 'full';
  code: string;
  message: string;
}

/** How long after the last write refused for space the store still reports degraded. */
const FULL_HOLD_MS = 60_000;

/** What an operator does about a damaged database file (docs/security.md, docs/configuration.md). */
export function restoreAdvice(path: string): string {
  return `restore the newest backup of ${path} with the daemon stopped, or move the file aside to start with an empty store`;
}

/**
 * What the store's own failures say about it, seen where they happen (group commit, requests,
 * retention) and reported by /healthz:
 * - damaged file (SQLITE_CORRUPT, SQLITE_NOTADB): `failing` until a restart, since a damaged
 *   file does not heal and every read may hit it;
 * - no space (SQLITE_FULL: the store.maxBytes cap or a full disk): `degraded` until a write
 *   succeeds again and at least a minute after the last refusal, so it does not flicker;
 * - a database file already larger than store.maxBytes (the cap was lowered below its size:
 *   SQLite then lets it reuse free pages but never grow): `degraded` while that lasts.
 */
export class StoreHealth {
  readonly #path: string;
  readonly #clock: Clock;
  #maxBytes = 0;
  #corrupt: { code: string } | undefined;
  #fullSince: number | undefined;
  #lastFullAt = 0;
  #fullCode = '';
  /** Called once when the store turns damaged and once each time it turns full. */
  onProblem: ((problem: StoreProblem) => void) | undefined;

  constructor(path: string, clock: Clock = systemClock) {
    this.#path = path;
    this.#clock = clock;
  }

  /** The store.maxBytes cap in force (0: none), set when the store applies it (start, reload). */
  setMaxBytes(maxBytes: number): void {
    this.#maxBytes = maxBytes;
  }

  get corrupt(): boolean {
    return this.#corrupt !== undefined;
  }

  /** Records what a failure says about the store and maps it to its refusal (undefined: not a storage failure). */
  observe(err: unknown): ServiceError | undefined {
    const code = String((err as { code?: unknown })?.code ?? '');
    if (isCorruption(err)) {
      if (!this.#corrupt) {
        this.#corrupt = { code };
        this.onProblem?.({ kind: 'corrupt', code, message: `the database file is damaged (${code}): ${restoreAdvice(this.#path)}` });
      }
    } else if (isStorageFull(err)) {
      this.#lastFullAt = this.#clock.now();
      this.#fullCode = code;
      if (this.#fullSince === undefined) {
        this.#fullSince = this.#lastFullAt;
        this.onProblem?.({ kind: 'full', code, message: `a write was refused for lack of space (${code}): raise store.maxBytes, free disk space or shorten retention` });
      }
    }
    return storageError(err);
  }

  /** A write committed: space is available again. */
  writeSucceeded(): void {
    if (this.#fullSince !== undefined && this.#clock.now() - this.#lastFullAt >= FULL_HOLD_MS) this.#fullSince = undefined;
  }

  report(): StoreHealthReport {
    if (this.#corrupt) return { status: 'failing', reason: `database file damaged (${this.#corrupt.code}): ${restoreAdvice(this.#path)}` };
    if (this.#fullSince !== undefined) {
      return { status: 'degraded', reason: `writes refused for lack of space since ${new Date(this.#fullSince).toISOString()} (${this.#fullCode})` };
    }
    const size = this.#maxBytes > 0 ? fileSize(this.#path) : 0;
    if (size > this.#maxBytes) {
      return { status: 'degraded', reason: `the database file is ${size} bytes, over store.maxBytes (${this.#maxBytes}): it cannot grow until retention frees pages; raise store.maxBytes or shorten retention` };
    }
    return { status: 'ok' };
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
