import type { Database } from './database.js';

type Row = Record<string, unknown>;

/** One managed device's definition for one gateway, at a central. */
export interface ManagedRow {
  gatewayId: string;
  deviceId: string;
  revision: number;
  /** The definition without its revision (JSON); null until the daemon first computed it. */
  content: string | null;
  /** A tombstone: the device left this gateway (unassigned, moved or deleted). */
  deleted: boolean;
  appliedRevision: number;
  appliedAt: number | null;
}

const rowFrom = (r: Row): ManagedRow => ({
  gatewayId: r.gateway_id as string,
  deviceId: r.device_id as string,
  revision: r.revision as number,
  content: (r.content as string | null) ?? null,
  deleted: r.deleted === 1,
  appliedRevision: r.applied_revision as number,
  appliedAt: (r.applied_at as number | null) ?? null,
});

export interface FleetSummary {
  managed: number;
  pending: number;
  lastAppliedAt: number | null;
}

/**
 * The central's managed devices (one aggregate of the store, docs/sync.md "Manage a fleet from the
 * central"): per gateway and device, the definition at its revision and the revision the gateway
 * applied. Revisions come from one counter, so "everything newer than what the gateway applied, in
 * revision order" is one indexed query. The daemon and the CLI both write here.
 */
export class FleetStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  nextRevision(): number {
    return this.#stmt('UPDATE fleet_revision SET last = last + 1 WHERE id = 1 RETURNING last').pluck().get() as number;
  }

  /** The device's live (not deleted) row: the gateway it is managed for. */
  live(deviceId: string): ManagedRow | undefined {
    const row = this.#stmt('SELECT * FROM managed_devices WHERE device_id = ? AND deleted = 0').get(deviceId) as Row | undefined;
    return row && rowFrom(row);
  }

  get(gatewayId: string, deviceId: string): ManagedRow | undefined {
    const row = this.#stmt('SELECT * FROM managed_devices WHERE gateway_id = ? AND device_id = ?').get(gatewayId, deviceId) as Row | undefined;
    return row && rowFrom(row);
  }

  liveDeviceIds(): string[] {
    return this.#stmt('SELECT device_id FROM managed_devices WHERE deleted = 0').pluck().all() as string[];
  }

  /**
   * Makes the device managed for `gatewayId` (null: for none): a tombstone at a new revision for the
   * gateway it leaves, and a row without content for the one it joins (the daemon computes the
   * definition and raises the revision). Also sets the device's gateway. Runs in one transaction.
   */
  assign(deviceId: string, gatewayId: string | null): void {
    this.#db.transaction(() => {
      const current = this.live(deviceId);
      if (current && current.gatewayId === gatewayId) return;
      if (current) this.#tombstone(current.gatewayId, deviceId);
      if (gatewayId !== null) {
        this.#stmt(
          `INSERT INTO managed_devices (gateway_id, device_id, revision, content, deleted) VALUES (?, ?, ?, NULL, 0)
           ON CONFLICT (gateway_id, device_id) DO UPDATE SET revision = excluded.revision, content = NULL, deleted = 0`,
        ).run(gatewayId, deviceId, this.nextRevision());
      }
      this.#stmt('UPDATE devices SET gateway_id = ?, removed_at_gateway = NULL WHERE id = ?').run(gatewayId, deviceId);
    });
  }

  #tombstone(gatewayId: string, deviceId: string): number {
    const revision = this.nextRevision();
    this.#stmt('UPDATE managed_devices SET revision = ?, content = NULL, deleted = 1 WHERE gateway_id = ? AND device_id = ?').run(revision, gatewayId, deviceId);
    return revision;
  }

  /** The device is gone at the central: its gateway removes it too. */
  tombstone(gatewayId: string, deviceId: string): number {
    return this.#db.transaction(() => this.#tombstone(gatewayId, deviceId));
  }

  /** A new definition: a new revision when it differs from the one held; returns it, or undefined when unchanged. */
  setContent(gatewayId: string, deviceId: string, content: string): number | undefined {
    return this.#db.transaction(() => {
      const row = this.get(gatewayId, deviceId);
      if (!row || row.deleted || row.content === content) return undefined;
      const revision = this.nextRevision();
      this.#stmt('UPDATE managed_devices SET revision = ?, content = ? WHERE gateway_id = ? AND device_id = ?').run(revision, content, gatewayId, deviceId);
      return revision;
    });
  }

  /** What the gateway reported applied (never moves back). */
  applied(gatewayId: string, revisions: Record<string, number>, now: number): void {
    const update = this.#stmt('UPDATE managed_devices SET applied_revision = ?, applied_at = ? WHERE gateway_id = ? AND device_id = ? AND applied_revision < ?');
    this.#db.transaction(() => {
      for (const [deviceId, revision] of Object.entries(revisions)) update.run(revision, now, gatewayId, deviceId, revision);
    });
  }

  /** Rows newer than what the gateway applied, oldest revision first (tombstones included). */
  pending(gatewayId: string, limit = 100_000): ManagedRow[] {
    return (
      this.#stmt('SELECT * FROM managed_devices WHERE gateway_id = ? AND revision > applied_revision AND (content IS NOT NULL OR deleted = 1) ORDER BY revision LIMIT ?').all(
        gatewayId,
        limit,
      ) as Row[]
    ).map(rowFrom);
  }

  /**
   * An ABP device's counters as its gateway reported them (never moving back). At a central no radio
   * runs, so its LoRaWAN row holds settings only: these counters are what a re-assigned device's
   * next gateway starts from.
   */
  recordLorawanCounters(deviceId: string, fCntUp: number, fCntDown: number): void {
    this.#stmt("UPDATE lorawan_devices SET f_cnt_up = max(f_cnt_up, ?), f_cnt_down = max(f_cnt_down, ?) WHERE device_id = ? AND activation = 'abp'").run(fCntUp, fCntDown, deviceId);
  }

  summary(gatewayId: string): FleetSummary {
    const r = this.#stmt(
      `SELECT count(*) FILTER (WHERE deleted = 0) AS managed, count(*) FILTER (WHERE revision > applied_revision) AS pending, max(applied_at) AS lastAppliedAt
       FROM managed_devices WHERE gateway_id = ?`,
    ).get(gatewayId) as Row;
    return { managed: r.managed as number, pending: r.pending as number, lastAppliedAt: (r.lastAppliedAt as number | null) ?? null };
  }
}

/** One managed device as the gateway applied it. */
export interface AppliedRow {
  deviceId: string;
  revision: number;
  deleted: boolean;
  lorawanDigest: string | null;
}

/**
 * The gateway's side (one aggregate of the store): which devices its central manages, at which
 * revision, and what their LoRaWAN settings were when last applied (so the session counters are
 * not reset by an unrelated change). A managed device is read-only to local writers (409).
 */
export class ManagedHereStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  #stmt(sql: string) {
    return this.#db.statement(sql);
  }

  isManaged(deviceId: string): boolean {
    return this.#stmt('SELECT 1 FROM managed_here WHERE device_id = ? AND deleted = 0').get(deviceId) !== undefined;
  }

  get(deviceId: string): AppliedRow | undefined {
    const r = this.#stmt('SELECT * FROM managed_here WHERE device_id = ?').get(deviceId) as Row | undefined;
    return r && { deviceId: r.device_id as string, revision: r.revision as number, deleted: r.deleted === 1, lorawanDigest: (r.lorawan_digest as string | null) ?? null };
  }

  record(deviceId: string, revision: number, deleted: boolean, lorawanDigest: string | null, now: number): void {
    this.#stmt(
      `INSERT INTO managed_here (device_id, revision, deleted, lorawan_digest, applied_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (device_id) DO UPDATE SET revision = excluded.revision, deleted = excluded.deleted, lorawan_digest = excluded.lorawan_digest, applied_at = excluded.applied_at`,
    ).run(deviceId, revision, deleted ? 1 : 0, lorawanDigest, now);
  }

  /** Every applied revision, tombstones included: what the gateway reports on connect. */
  revisions(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.#stmt('SELECT device_id, revision FROM managed_here').all() as Row[]) out[r.device_id as string] = r.revision as number;
    return out;
  }

  liveDeviceIds(): string[] {
    return this.#stmt('SELECT device_id FROM managed_here WHERE deleted = 0').pluck().all() as string[];
  }
}
