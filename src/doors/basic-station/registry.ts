import { isJsonObject } from '../../core/json.js';
import { ServiceError } from '../../core/errors.js';
import type { Clock } from '../../core/time.js';
import type { StationRecord, StationStore } from '../../store/stations.js';
import { parseEui } from './eui.js';

export interface StationView {
  eui: string;
  name: string;
  createdOn: string;
}

export const stationView = (s: StationRecord): StationView => ({ eui: s.eui, name: s.name, createdOn: new Date(s.createdOn).toISOString() });

/**
 * Registering Basics Stations: the rules the CLI (`outpost station`) and the HTTP routes
 * (`/stations`) share. `onDeleted` closes a deleted station's socket when the door runs here.
 */
export class StationRegistry {
  readonly #store: StationStore;
  readonly #clock: Clock;
  onDeleted: (eui: string) => void = () => {};

  constructor(store: StationStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  /** `{eui, name?}` → the station and its token (shown once). */
  create(body: unknown): { station: StationView; token: string } {
    if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', 'expected a JSON object {"eui", "name"?}');
    const eui = parseEui(body.eui);
    if (!eui) throw new ServiceError('INVALID_BODY', 'eui: expected the station EUI as 16 hex digits (or b827:ebff:fe61:51b0)');
    const name = body.name === undefined || body.name === null ? `station ${eui}` : body.name;
    if (typeof name !== 'string' || name.length === 0 || name.length > 64 || /[\u0000-\u001f]/.test(name)) throw new ServiceError('INVALID_BODY', 'name: expected 1–64 characters, no control characters');
    const created = this.#store.create(eui, name, this.#clock.now());
    if (!created) throw new ServiceError('STATION_EXISTS', `station ${eui} is already registered (delete it first to give it a new token)`);
    return { station: stationView(created.station), token: created.token };
  }

  list(): StationView[] {
    return this.#store.list().map(stationView);
  }

  delete(euiText: string): string {
    const eui = parseEui(euiText);
    if (!eui || !this.#store.delete(eui)) throw new ServiceError('NOT_FOUND', `no station ${euiText}`);
    this.onDeleted(eui);
    return eui;
  }
}
