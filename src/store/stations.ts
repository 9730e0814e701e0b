import { timingSafeEqual } from 'node:crypto';
import { hashToken, randomBase62 } from '../core/ids.js';
import type { Database } from './database.js';

/** A LoRa Basics Station allowed to connect (docs/lpwan.md, "Connecting a Basics Station gateway"). */
export interface StationRecord {
  /** 16 upper-case hex digits. */
  eui: string;
  name: string;
  createdOn: number;
}

type Row = Record<string, unknown>;

const stationFrom = (r: Row): StationRecord => ({ eui: r.eui as string, name: r.name as string, createdOn: r.created_on as number });

/**
 * Registered Basics Stations (one aggregate of the store), each with the hash of its token. The
 * token (`station:<40 base62>`) is shown once; like every other token only its SHA-256 is kept.
 * It is not an API token: the HTTP and MQTT doors do not know the `station:` kind.
 */
export class StationStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  /** A new station and its token; undefined when the EUI is already registered. */
  create(eui: string, name: string, now: number): { station: StationRecord; token: string } | undefined {
    const token = `station:${randomBase62(40)}`;
    const done = this.#db.statement('INSERT INTO stations (eui, name, token_hash, created_on) VALUES (?, ?, ?, ?) ON CONFLICT (eui) DO NOTHING').run(eui, name, hashToken(token), now);
    if (done.changes === 0) return undefined;
    return { station: { eui, name, createdOn: now }, token };
  }

  get(eui: string): StationRecord | undefined {
    const row = this.#db.statement('SELECT eui, name, created_on FROM stations WHERE eui = ?').get(eui) as Row | undefined;
    return row ? stationFrom(row) : undefined;
  }

  list(): StationRecord[] {
    return (this.#db.statement('SELECT eui, name, created_on FROM stations ORDER BY eui').all() as Row[]).map(stationFrom);
  }

  delete(eui: string): boolean {
    return this.#db.statement('DELETE FROM stations WHERE eui = ?').run(eui).changes > 0;
  }

  /** Whether `token` is this station's (compared in constant time). */
  tokenMatches(eui: string, token: string): boolean {
    const stored = this.#db.statement('SELECT token_hash FROM stations WHERE eui = ?').pluck().get(eui) as string | undefined;
    if (stored === undefined) return false;
    const a = Buffer.from(stored);
    const b = Buffer.from(hashToken(token));
    return a.length === b.length && timingSafeEqual(a, b);
  }
}
