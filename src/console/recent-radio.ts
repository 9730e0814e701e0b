import type { DeviceEvent } from '../ingest/device-events.js';
import type { DeviceEventSource } from './live-events.js';

/** A device's last uplink as `GET /device/<id>/radio` shows it (docs/api.md). */
export interface UplinkSummary {
  at: string;
  rssi?: number;
  snr?: number;
  dataRate?: string;
  frequency?: number;
  /** The radio source that heard it (`gwmp`, `basicStation`, …). */
  source?: string;
  /** At a central: the gateway that forwarded the event. */
  gateway?: string;
  fCnt?: number;
  fPort?: number;
}

/** One outcome of a downlink (queued, sent, expired, failed, …). */
export interface DownlinkSummary {
  at: string;
  status: string;
  id?: string;
  window?: string;
  reason?: string;
  fCnt?: number;
  fPort?: number;
  gateway?: string;
}

export interface RadioSummary {
  uplink: UplinkSummary | null;
  downlinks: DownlinkSummary[];
}

export interface RecentRadioLimits {
  /** Devices remembered; the least recently heard is forgotten first. */
  maxDevices: number;
  /** Downlink outcomes kept per device, newest first. */
  downlinksPerDevice: number;
}

/** About 3 KB a device at most (10 outcomes with their reasons): 20 000 devices stay under 60 MB on a Pi-sized central. */
const DEFAULT_LIMITS: RecentRadioLimits = { maxDevices: 20_000, downlinksPerDevice: 10 };
/** A reason is a sentence; a longer one is cut, so what is kept per outcome stays small. */
const MAX_TEXT = 200;

type Members = ReadonlyArray<readonly [name: string, type: 'string' | 'number']>;

/** Copies only the named members of the given type into `out`: an event's other members never grow what is kept. */
function pick<T>(event: DeviceEvent, members: Members, out: Record<string, unknown>): T {
  for (const [name, type] of members) {
    const value = event[name];
    if (typeof value === type) out[name] = typeof value === 'string' && value.length > MAX_TEXT ? `${value.slice(0, MAX_TEXT)}…` : value;
  }
  return out as T;
}

const UPLINK_MEMBERS: Members = [['rssi', 'number'], ['snr', 'number'], ['dataRate', 'string'], ['frequency', 'number'], ['source', 'string'], ['gateway', 'string'], ['fCnt', 'number'], ['fPort', 'number']];
const DOWNLINK_MEMBERS: Members = [['id', 'string'], ['window', 'string'], ['reason', 'string'], ['fCnt', 'number'], ['fPort', 'number'], ['gateway', 'string']];

/** What is kept: the summaries with `at` as the event's milliseconds, dated (ISO) only when read. */
type Kept<T extends { at: string }> = Omit<T, 'at'> & { at: number };
interface KeptRadio {
  uplink: Kept<UplinkSummary> | null;
  downlinks: Array<Kept<DownlinkSummary>>;
}

const dated = <T extends { at: string }>(kept: Kept<T>): T => ({ ...kept, at: new Date(kept.at).toISOString() }) as unknown as T;

/**
 * The last uplink's radio metadata and the last downlink outcomes of each device, from the same
 * device events the live view shows (docs/console.md). At a central these are the events its
 * gateways forward, so a device page opened after the fact still shows how the device was heard
 * and what became of its commands. Kept in memory only (events are live information, docs/sync.md
 * "Device events"): empty after a restart until the device is heard again; bounded by
 * `maxDevices`, so a flood of device IDs cannot grow it without limit.
 */
export class RecentRadio {
  readonly #byDevice = new Map<string, KeptRadio>();
  readonly #limits: RecentRadioLimits;

  constructor(source: DeviceEventSource, limits: Partial<RecentRadioLimits> = {}) {
    this.#limits = { ...DEFAULT_LIMITS, ...limits };
    source.onDeviceEvent((deviceId, event) => this.record(deviceId, event));
  }

  record(deviceId: string, event: DeviceEvent): void {
    if (event.type !== 'uplink' && event.type !== 'downlink') return;
    const at = event.at;
    const entry = this.#touch(deviceId);
    if (event.type === 'uplink') {
      entry.uplink = pick<Kept<UplinkSummary>>(event, UPLINK_MEMBERS, { at });
    } else if (typeof event.status === 'string') {
      entry.downlinks.unshift(pick<Kept<DownlinkSummary>>(event, DOWNLINK_MEMBERS, { at, status: event.status }));
      entry.downlinks.length = Math.min(entry.downlinks.length, this.#limits.downlinksPerDevice);
    }
  }

  /** The device's entry, moved to the newest end of the map (insertion order is the eviction order). */
  #touch(deviceId: string): KeptRadio {
    const entry = this.#byDevice.get(deviceId) ?? { uplink: null, downlinks: [] };
    this.#byDevice.delete(deviceId);
    this.#byDevice.set(deviceId, entry);
    if (this.#byDevice.size > this.#limits.maxDevices) this.#byDevice.delete(this.#byDevice.keys().next().value!);
    return entry;
  }

  of(deviceId: string): RadioSummary {
    const entry = this.#byDevice.get(deviceId);
    return entry ? { uplink: entry.uplink && dated(entry.uplink), downlinks: entry.downlinks.map(dated) } : { uplink: null, downlinks: [] };
  }

  /** A deleted device's entry goes with it (its ID may not come back, but its memory should not stay). */
  forget(deviceId: string): void {
    this.#byDevice.delete(deviceId);
  }

  get size(): number {
    return this.#byDevice.size;
  }
}
