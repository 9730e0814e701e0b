import type { Database } from './database.js';

/** A device's LoRaWAN settings and its current session (one row; the session fields are empty until an OTAA join). */
export interface LorawanDeviceRecord {
  deviceId: string;
  activation: 'abp' | 'otaa';
  devEui: string | null;
  joinEui: string | null;
  appKey: Buffer | null;
  fPort: number;
  deviceClass: 'A' | 'C';
  /** Whether ADR may send this device LinkADRReqs (its uplinks must also ask for ADR). */
  adr: boolean;
  devAddr: string | null;
  nwkSKey: Buffer | null;
  appSKey: Buffer | null;
  /** Next expected uplink counter (32-bit). */
  fCntUp: number;
  /** Counter the next downlink uses (32-bit). */
  fCntDown: number;
  joinedAt: number | null;
  lastUplink: LastUplink | null;
  /** The network server's MAC state as JSON (src/lpwan/mac/state.ts), saved with the counters. */
  macState: string | null;
  /** The session an OTAA join offered, until the first uplink that verifies under it makes it current. */
  nextSession: NextSession | null;
  /** Bumped on every PUT: tells a re-provisioned session from the same one with newer counters. */
  settingsVersion: number;
  updatedOn: number;
}

export interface NextSession {
  devAddr: string;
  nwkSKey: Buffer;
  appSKey: Buffer;
  joinedAt: number;
}

export interface LastUplink {
  at: number;
  fCnt: number;
  fPort?: number;
  rssi?: number;
  snr?: number;
  frequency: number;
  dataRate: string;
  source: string;
}

type Row = Record<string, unknown>;

function recordFrom(r: Row): LorawanDeviceRecord {
  return {
    deviceId: r.device_id as string,
    activation: r.activation as 'abp' | 'otaa',
    devEui: (r.dev_eui as string | null) ?? null,
    joinEui: (r.join_eui as string | null) ?? null,
    appKey: (r.app_key as Buffer | null) ?? null,
    fPort: r.f_port as number,
    deviceClass: r.class === 'C' ? 'C' : 'A',
    adr: r.adr !== 0,
    devAddr: (r.dev_addr as string | null) ?? null,
    nwkSKey: (r.nwk_s_key as Buffer | null) ?? null,
    appSKey: (r.app_s_key as Buffer | null) ?? null,
    fCntUp: r.f_cnt_up as number,
    fCntDown: r.f_cnt_down as number,
    joinedAt: (r.joined_at as number | null) ?? null,
    lastUplink: r.last_uplink ? (JSON.parse(r.last_uplink as string) as LastUplink) : null,
    macState: (r.mac_state as string | null) ?? null,
    nextSession: r.next_dev_addr
      ? { devAddr: r.next_dev_addr as string, nwkSKey: r.next_nwk_s_key as Buffer, appSKey: r.next_app_s_key as Buffer, joinedAt: r.next_joined_at as number }
      : null,
    settingsVersion: r.settings_version as number,
    updatedOn: r.updated_on as number,
  };
}

/**
 * LoRaWAN devices and sessions in SQLite. Counters are written with `saveUplinkCounters` inside the
 * transaction that stores the uplink's states, so a crash never leaves one without the other.
 */
export class LorawanDeviceStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  get(deviceId: string): LorawanDeviceRecord | undefined {
    const row = this.#stmt('SELECT * FROM lorawan_devices WHERE device_id = ?').get(deviceId) as Row | undefined;
    return row && recordFrom(row);
  }

  all(): LorawanDeviceRecord[] {
    return (this.#stmt('SELECT * FROM lorawan_devices').all() as Row[]).map(recordFrom);
  }

  deviceIdByDevEui(devEui: string): string | undefined {
    return this.#stmt('SELECT device_id FROM lorawan_devices WHERE dev_eui = ?').pluck().get(devEui) as string | undefined;
  }

  /** Replaces a device's settings and session; the used DevNonces given are added to those kept. */
  put(record: Omit<LorawanDeviceRecord, 'settingsVersion' | 'joinedAt' | 'lastUplink' | 'macState' | 'nextSession'>, usedDevNonces: readonly number[]): LorawanDeviceRecord {
    return this.#db.transaction(() => {
      const previous = this.#stmt('SELECT settings_version FROM lorawan_devices WHERE device_id = ?').pluck().get(record.deviceId) as number | undefined;
      this.#stmt('DELETE FROM lorawan_devices WHERE device_id = ?').run(record.deviceId);
      this.#stmt(
        `INSERT INTO lorawan_devices (device_id, activation, dev_eui, join_eui, app_key, f_port, class, adr, dev_addr, nwk_s_key, app_s_key,
           f_cnt_up, f_cnt_down, joined_at, last_uplink, settings_version, updated_on)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)`,
      ).run(
        record.deviceId,
        record.activation,
        record.devEui,
        record.joinEui,
        record.appKey,
        record.fPort,
        record.deviceClass,
        record.adr ? 1 : 0,
        record.devAddr,
        record.nwkSKey,
        record.appSKey,
        record.fCntUp,
        record.fCntDown,
        (previous ?? 0) + 1,
        record.updatedOn,
      );
      const insertNonce = this.#stmt('INSERT OR IGNORE INTO lorawan_dev_nonces (device_id, dev_nonce) VALUES (?, ?)');
      for (const nonce of usedDevNonces) insertNonce.run(record.deviceId, nonce);
      return this.get(record.deviceId)!;
    });
  }

  /** Removes the settings, session, used nonces and downlink queue of a device. */
  delete(deviceId: string): boolean {
    return this.#db.transaction(() => {
      const n = this.#stmt('DELETE FROM lorawan_devices WHERE device_id = ?').run(deviceId).changes;
      this.#stmt('DELETE FROM lorawan_dev_nonces WHERE device_id = ?').run(deviceId);
      this.#stmt('DELETE FROM downlinks WHERE device_id = ?').run(deviceId);
      return n > 0;
    });
  }

  /**
   * After an accepted uplink, inside the transaction that stores its states: the counter, the MAC
   * state, and (the first uplink under the session an OTAA join offered) that session as the
   * current one. The next expected counter never goes backwards within a session (two copies of a
   * frame committed in either order leave the larger value).
   */
  saveUplinkCounters(deviceId: string, fCntUp: number, lastUplink: LastUplink, macState: string, switched?: NextSession): void {
    if (switched) {
      this.#stmt(
        `UPDATE lorawan_devices SET dev_addr = ?, nwk_s_key = ?, app_s_key = ?, joined_at = ?, f_cnt_up = ?, f_cnt_down = 0, last_uplink = ?, mac_state = ?,
           next_dev_addr = NULL, next_nwk_s_key = NULL, next_app_s_key = NULL, next_joined_at = NULL
         WHERE device_id = ? AND next_dev_addr = ?`,
      ).run(switched.devAddr, switched.nwkSKey, switched.appSKey, switched.joinedAt, fCntUp, JSON.stringify(lastUplink), macState, deviceId, switched.devAddr);
      return;
    }
    this.#stmt('UPDATE lorawan_devices SET f_cnt_up = max(f_cnt_up, ?), last_uplink = ?, mac_state = ? WHERE device_id = ?').run(fCntUp, JSON.stringify(lastUplink), macState, deviceId);
  }

  /** Reserves downlink counters up to `fCntDown` (exclusive) before the frame goes to the radio, with the MAC state it carries. */
  saveDownlinkCounter(deviceId: string, fCntDown: number, macState?: string): void {
    if (macState === undefined) this.#stmt('UPDATE lorawan_devices SET f_cnt_down = max(f_cnt_down, ?) WHERE device_id = ?').run(fCntDown, deviceId);
    else this.#stmt('UPDATE lorawan_devices SET f_cnt_down = max(f_cnt_down, ?), mac_state = ? WHERE device_id = ?').run(fCntDown, macState, deviceId);
  }

  saveMacState(deviceId: string, macState: string): void {
    this.#stmt('UPDATE lorawan_devices SET mac_state = ? WHERE device_id = ?').run(macState, deviceId);
  }

  isDevNonceUsed(deviceId: string, devNonce: number): boolean {
    return this.#stmt('SELECT 1 FROM lorawan_dev_nonces WHERE device_id = ? AND dev_nonce = ?').get(deviceId, devNonce) !== undefined;
  }

  devNonceCount(deviceId: string): number {
    return this.#stmt('SELECT count(*) FROM lorawan_dev_nonces WHERE device_id = ?').pluck().get(deviceId) as number;
  }

  /**
   * A join: records the nonce and the new session, in one transaction. A device that has no session
   * yet gets it at once (counters at 0); one that has a session keeps it and gets this one as its
   * next session, which becomes current on the first uplink that verifies under it (a lost
   * JoinAccept must not cut the device off).
   */
  saveJoin(deviceId: string, devNonce: number, session: NextSession, macState: string): 'current' | 'next' {
    return this.#db.transaction(() => {
      this.#stmt('INSERT OR IGNORE INTO lorawan_dev_nonces (device_id, dev_nonce) VALUES (?, ?)').run(deviceId, devNonce);
      const hasSession = this.#stmt('SELECT dev_addr IS NOT NULL FROM lorawan_devices WHERE device_id = ?').pluck().get(deviceId) === 1;
      if (hasSession) {
        this.#stmt('UPDATE lorawan_devices SET next_dev_addr = ?, next_nwk_s_key = ?, next_app_s_key = ?, next_joined_at = ? WHERE device_id = ?').run(
          session.devAddr,
          session.nwkSKey,
          session.appSKey,
          session.joinedAt,
          deviceId,
        );
        return 'next';
      }
      this.#stmt('UPDATE lorawan_devices SET dev_addr = ?, nwk_s_key = ?, app_s_key = ?, f_cnt_up = 0, f_cnt_down = 0, joined_at = ?, mac_state = ? WHERE device_id = ?').run(
        session.devAddr,
        session.nwkSKey,
        session.appSKey,
        session.joinedAt,
        macState,
        deviceId,
      );
      return 'current';
    });
  }

  devAddrInUse(devAddr: string): boolean {
    return this.#stmt('SELECT 1 FROM lorawan_devices WHERE dev_addr = ? OR next_dev_addr = ?').get(devAddr, devAddr) !== undefined;
  }
}
