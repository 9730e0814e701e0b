import { cmacKey, type CmacKey } from './lorawan/crypto.js';
import { onAirBytes } from './lorawan/phy.js';
import type { LorawanDeviceRecord, LorawanDeviceStore } from '../store/lorawan-devices.js';

/** A device's current session as the hot path needs it: keys ready for AES and CMAC. */
export interface LiveSession {
  devAddr: string;
  devAddrLe: Buffer;
  nwkSKey: CmacKey;
  appSKey: Buffer;
  fCntUp: number;
  fCntDown: number;
}

export interface LiveDevice {
  deviceId: string;
  activation: 'abp' | 'otaa';
  devEui: string | null;
  joinEui: string | null;
  appKey: CmacKey | null;
  fPort: number;
  settingsVersion: number;
  session: LiveSession | undefined;
}

function sessionOf(r: LorawanDeviceRecord): LiveSession | undefined {
  if (!r.devAddr || !r.nwkSKey || !r.appSKey) return undefined;
  return { devAddr: r.devAddr, devAddrLe: onAirBytes(r.devAddr), nwkSKey: cmacKey(r.nwkSKey), appSKey: r.appSKey, fCntUp: r.fCntUp, fCntDown: r.fCntDown };
}

/**
 * Every LoRaWAN device and session in memory, indexed by DevAddr (several devices may share one)
 * and DevEUI, loaded from SQLite at start and refreshed when settings change. Counters move here
 * first (synchronously, so a second copy of a frame is refused at once) and are persisted with the
 * uplink's states.
 */
export class SessionRegistry {
  readonly #store: LorawanDeviceStore;
  readonly #byDevice = new Map<string, LiveDevice>();
  readonly #byAddr = new Map<string, LiveDevice[]>();
  readonly #byDevEui = new Map<string, LiveDevice>();

  constructor(store: LorawanDeviceStore) {
    this.#store = store;
  }

  get size(): number {
    return this.#byDevice.size;
  }

  device(deviceId: string): LiveDevice | undefined {
    return this.#byDevice.get(deviceId);
  }

  byDevAddr(devAddr: string): readonly LiveDevice[] {
    return this.#byAddr.get(devAddr) ?? [];
  }

  byDevEui(devEui: string): LiveDevice | undefined {
    return this.#byDevEui.get(devEui);
  }

  devAddrTaken(devAddr: string): boolean {
    return this.#byAddr.has(devAddr);
  }

  /** Loads every device; counters already ahead in memory for the same settings are kept (not yet committed). */
  loadAll(): void {
    const seen = new Set<string>();
    for (const record of this.#store.all()) {
      seen.add(record.deviceId);
      this.#install(record);
    }
    for (const id of [...this.#byDevice.keys()]) if (!seen.has(id)) this.remove(id);
  }

  /** Re-reads one device after its settings changed in this process. */
  reload(deviceId: string): LiveDevice | undefined {
    const record = this.#store.get(deviceId);
    if (!record) {
      this.remove(deviceId);
      return undefined;
    }
    return this.#install(record);
  }

  #install(record: LorawanDeviceRecord): LiveDevice {
    const previous = this.#byDevice.get(record.deviceId);
    const session = sessionOf(record);
    if (previous && previous.settingsVersion === record.settingsVersion && previous.session && session && previous.session.devAddr === session.devAddr && previous.session.nwkSKey.key.equals(session.nwkSKey.key)) {
      session.fCntUp = Math.max(session.fCntUp, previous.session.fCntUp);
      session.fCntDown = Math.max(session.fCntDown, previous.session.fCntDown);
    }
    const live: LiveDevice = {
      deviceId: record.deviceId,
      activation: record.activation,
      devEui: record.devEui,
      joinEui: record.joinEui,
      appKey: record.appKey ? cmacKey(record.appKey) : null,
      fPort: record.fPort,
      settingsVersion: record.settingsVersion,
      session,
    };
    this.remove(record.deviceId);
    this.#byDevice.set(live.deviceId, live);
    if (live.devEui) this.#byDevEui.set(live.devEui, live);
    if (session) this.#index(live, session.devAddr);
    return live;
  }

  #index(live: LiveDevice, devAddr: string): void {
    const list = this.#byAddr.get(devAddr);
    if (list) list.push(live);
    else this.#byAddr.set(devAddr, [live]);
  }

  #unindex(live: LiveDevice, devAddr: string): void {
    const list = this.#byAddr.get(devAddr);
    if (!list) return;
    const rest = list.filter((d) => d !== live);
    if (rest.length > 0) this.#byAddr.set(devAddr, rest);
    else this.#byAddr.delete(devAddr);
  }

  /** Installs a new session after an OTAA join. */
  replaceSession(live: LiveDevice, session: LiveSession): void {
    if (live.session) this.#unindex(live, live.session.devAddr);
    live.session = session;
    this.#index(live, session.devAddr);
  }

  remove(deviceId: string): void {
    const live = this.#byDevice.get(deviceId);
    if (!live) return;
    this.#byDevice.delete(deviceId);
    if (live.devEui && this.#byDevEui.get(live.devEui) === live) this.#byDevEui.delete(live.devEui);
    if (live.session) this.#unindex(live, live.session.devAddr);
  }
}
