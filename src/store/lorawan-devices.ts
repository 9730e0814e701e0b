import type { Database } from './database.js';

/** A device's LoRaWAN settings and its current session (one row; the session fields are empty until an OTAA join). */
export interface LorawanDeviceRecord {
  deviceId: string;
  activation: 'abp' | 'otaa';
  devEui: string | null;
  joinEui: string | null;
  appKey: Buffer | null;
  fPort: number;
  deviceClass: 'A';
  devAddr: string | null;
  nwkSKey: Buffer | null;
  appSKey: Buffer | null;
  /** Next expected uplink counter (32-bit). */
  fCntUp: number;
  /** Counter the next downlink uses (32-bit). */
  fCntDown: number;
  joinedAt: number | null;
  lastUplink: LastUplink | null;
  /** Bumped on every PUT: tells a re-provisioned session from the same one with newer counters. */
  settingsVersion: number;
  updatedOn: number;
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
    deviceClass: 'A',
    devAddr: (r.dev_addr as string | null) ?? null,
    nwkSKey: (r.nwk_s_key as Buffer | null) ?? null,
    appSKey: (r.app_s_key as Buffer | null) ?? null,
    fCntUp: r.f_cnt_up as number,
    fCntDown: r.f_cnt_down as number,
    joinedAt: (r.joined_at as number | null) ?? null,
    lastUplink: r.last_uplink ? (JSON.parse(r.last_uplink as string) as LastUplink) : null,
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
  put(record: Omit<LorawanDeviceRecord, 'settingsVersion' | 'joinedAt' | 'lastUplink'>, usedDevNonces: readonly number[]): LorawanDeviceRecord {
    return this.#db.transaction(() => {
      const previous = this.#stmt('SELECT settings_version FROM lorawan_devices WHERE device_id = ?').pluck().get(record.deviceId) as number | undefined;
      this.#stmt('DELETE FROM lorawan_devices WHERE device_id = ?').run(record.deviceId);
      this.#stmt(
        `INSERT INTO lorawan_devices (device_id, activation, dev_eui, join_eui, app_key, f_port, class, dev_addr, nwk_s_key, app_s_key,
           f_cnt_up, f_cnt_down, joined_at, last_uplink, settings_version, updated_on)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)`,
      ).run(
        record.deviceId,
        record.activation,
        record.devEui,
        record.joinEui,
        record.appKey,
        record.fPort,
        record.deviceClass,
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
   * After an accepted uplink: the next expected counter never goes backwards (two copies of a frame
   * committed in either order leave the larger value).
   */
  saveUplinkCounters(deviceId: string, fCntUp: number, lastUplink: LastUplink): void {
    this.#stmt('UPDATE lorawan_devices SET f_cnt_up = max(f_cnt_up, ?), last_uplink = ? WHERE device_id = ?').run(fCntUp, JSON.stringify(lastUplink), deviceId);
  }

  /** Reserves downlink counters up to `fCntDown` (exclusive) before the frame goes to the radio. */
  saveDownlinkCounter(deviceId: string, fCntDown: number): void {
    this.#stmt('UPDATE lorawan_devices SET f_cnt_down = max(f_cnt_down, ?) WHERE device_id = ?').run(fCntDown, deviceId);
  }

  isDevNonceUsed(deviceId: string, devNonce: number): boolean {
    return this.#stmt('SELECT 1 FROM lorawan_dev_nonces WHERE device_id = ? AND dev_nonce = ?').get(deviceId, devNonce) !== undefined;
  }

  devNonceCount(deviceId: string): number {
    return this.#stmt('SELECT count(*) FROM lorawan_dev_nonces WHERE device_id = ?').pluck().get(deviceId) as number;
  }

  /** A join: records the nonce and installs the new session with counters at 0, in one transaction. */
  saveJoin(deviceId: string, devNonce: number, session: { devAddr: string; nwkSKey: Buffer; appSKey: Buffer; joinedAt: number }): void {
    this.#db.transaction(() => {
      this.#stmt('INSERT OR IGNORE INTO lorawan_dev_nonces (device_id, dev_nonce) VALUES (?, ?)').run(deviceId, devNonce);
      this.#stmt('UPDATE lorawan_devices SET dev_addr = ?, nwk_s_key = ?, app_s_key = ?, f_cnt_up = 0, f_cnt_down = 0, joined_at = ? WHERE device_id = ?').run(
        session.devAddr,
        session.nwkSKey,
        session.appSKey,
        session.joinedAt,
        deviceId,
      );
    });
  }

  devAddrInUse(devAddr: string): boolean {
    return this.#stmt('SELECT 1 FROM lorawan_devices WHERE dev_addr = ?').get(devAddr) !== undefined;
  }
}
