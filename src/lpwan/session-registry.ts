import { cmacKey, type CmacKey } from './lorawan/crypto.js';
import { onAirBytes } from './lorawan/phy.js';
import type { LorawanDeviceRecord, LorawanDeviceStore } from '../store/lorawan-devices.js';
import type { MacState } from './mac/state.js';

/** A device's current session as the hot path needs it: keys ready for AES and CMAC. */
export interface LiveSession {
  devAddr: string;
  devAddrLe: Buffer;
  nwkSKey: CmacKey;
  appSKey: Buffer;
  fCntUp: number;
  fCntDown: number;
  /** When an OTAA join made it (null for ABP). */
  joinedAt: number | null;
}

export interface LiveDevice {
  deviceId: string;
  activation: 'abp' | 'otaa';
  devEui: string | null;
  joinEui: string | null;
  appKey: CmacKey | null;
  fPort: number;
  deviceClass: 'A' | 'C';
  /** The device's own ADR switch (`"adr": false` in its settings turns ADR off). */
  adr: boolean;
  settingsVersion: number;
  /** The session downlinks use: the one the device was last heard on. */
  session: LiveSession | undefined;
  /** The session an OTAA join offered, until the device's first uplink under it. */
  nextSession: LiveSession | undefined;
  /** ADR, pending requests and RX parameters of the current session (saved with its counters). */
  mac: MacState;
}

function sessionOf(r: LorawanDeviceRecord): LiveSession | undefined {
  if (!r.devAddr || !r.nwkSKey || !r.appSKey) return undefined;
  return { devAddr: r.devAddr, devAddrLe: onAirBytes(r.devAddr), nwkSKey: cmacKey(r.nwkSKey), appSKey: r.appSKey, fCntUp: r.fCntUp, fCntDown: r.fCntDown, joinedAt: r.joinedAt };
}

function nextSessionOf(r: LorawanDeviceRecord): LiveSession | undefined {
  const n = r.nextSession;
  if (!n) return undefined;
  return { devAddr: n.devAddr, devAddrLe: onAirBytes(n.devAddr), nwkSKey: cmacKey(n.nwkSKey), appSKey: n.appSKey, fCntUp: 0, fCntDown: 0, joinedAt: n.joinedAt };
}

/**
 * Every LoRaWAN device and session in memory, indexed by DevAddr (several devices may share one)
 * and DevEUI, loaded from SQLite at start and refreshed when settings change. Counters move here
 * first (synchronously, so a second copy of a frame is refused at once) and are persisted with the
 * uplink's states.
 */
export class SessionRegistry {
  readonly #store: LorawanDeviceStore;
  readonly #readMac: (json: string | null) => MacState;
  readonly #byDevice = new Map<string, LiveDevice>();
  readonly #byAddr = new Map<string, LiveDevice[]>();
  readonly #byDevEui = new Map<string, LiveDevice>();

  constructor(store: LorawanDeviceStore, readMac: (json: string | null) => MacState) {
    this.#store = store;
    this.#readMac = readMac;
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
    let mac = this.#readMac(record.macState);
    if (previous && previous.settingsVersion === record.settingsVersion && previous.session && session && previous.session.devAddr === session.devAddr && previous.session.nwkSKey.key.equals(session.nwkSKey.key)) {
      // The same session: what memory holds may be ahead of what is committed.
      session.fCntUp = Math.max(session.fCntUp, previous.session.fCntUp);
      session.fCntDown = Math.max(session.fCntDown, previous.session.fCntDown);
      mac = previous.mac;
    }
    const live: LiveDevice = {
      deviceId: record.deviceId,
      activation: record.activation,
      devEui: record.devEui,
      joinEui: record.joinEui,
      appKey: record.appKey ? cmacKey(record.appKey) : null,
      fPort: record.fPort,
      deviceClass: record.deviceClass,
      adr: record.adr,
      settingsVersion: record.settingsVersion,
      session,
      nextSession: nextSessionOf(record),
      mac,
    };
    this.remove(record.deviceId);
    this.#byDevice.set(live.deviceId, live);
    if (live.devEui) this.#byDevEui.set(live.devEui, live);
    if (session) this.#index(live, session.devAddr);
    if (live.nextSession && live.nextSession.devAddr !== session?.devAddr) this.#index(live, live.nextSession.devAddr);
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

  /** The device was heard under its next session: that one becomes current, the old one is gone. */
  switchToNextSession(live: LiveDevice, mac: MacState): LiveSession {
    const next = live.nextSession!;
    if (live.session && live.session.devAddr !== next.devAddr) this.#unindex(live, live.session.devAddr);
    live.session = next;
    live.nextSession = undefined;
    live.mac = mac;
    return next;
  }

  remove(deviceId: string): void {
    const live = this.#byDevice.get(deviceId);
    if (!live) return;
    this.#byDevice.delete(deviceId);
    if (live.devEui && this.#byDevEui.get(live.devEui) === live) this.#byDevEui.delete(live.devEui);
    if (live.session) this.#unindex(live, live.session.devAddr);
    if (live.nextSession && live.nextSession.devAddr !== live.session?.devAddr) this.#unindex(live, live.nextSession.devAddr);
  }
}
