import { statSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3, { type Database, type Statement } from 'better-sqlite3';
import { migrate } from './migrations.js';
import { DATA_FILES, prepareDataDir } from './data-dir.js';
import { StoreHealth, restoreAdvice } from './health.js';
import { isCorruption } from '../core/errors.js';
import { newId, newTokenSecret, hashToken, type TokenKind } from '../core/ids.js';
import type { Profile } from '../core/profiles.js';
import { StatementCache } from './statements.js';

export type AssetKind = 'sensor' | 'actuator' | 'virtual' | 'config';
export const ASSET_KINDS: readonly AssetKind[] = ['sensor', 'actuator', 'virtual', 'config'];
export type Scope = 'read' | 'command' | 'admin';
export const SCOPES: readonly Scope[] = ['read', 'command', 'admin'];

export interface DeviceRecord {
  id: string;
  name: string;
  title: string | null;
  description: string | null;
  payloadFormat: string;
  codec: string | null;
  createdOn: number;
  updatedOn: number;
  /** At a central: the gateway this device is behind (its catalog and commands go through that gateway). */
  gatewayId?: string | null;
  /** At a central: when the gateway reported the device deleted (its data is kept). */
  removedAtGateway?: number | null;
}

export interface AssetRecord {
  id: string;
  deviceId: string;
  name: string;
  title: string | null;
  description: string | null;
  is: AssetKind;
  profile: Profile;
  createdOn: number;
  updatedOn: number;
}

export interface TokenRecord {
  id: string;
  kind: TokenKind;
  name: string;
  deviceId: string | null;
  scopes: Scope[];
  createdOn: number;
  revokedOn: number | null;
  /** A `gateway:` token's gateway (central role). */
  gatewayId?: string | null;
}

/** A state as stored: `value` is kept as its JSON text so it is serialised once on the way in. */
export interface StoredState {
  assetId: string;
  at: number;
  valueJson: string;
  receivedAt: number;
  /** Provenance: the raw uplink (`raw_uplinks.seq`) this state was decoded from, if any. */
  uplinkSeq?: number;
  /** Provenance: the codec version that decoded it (see DeviceCodecs.version). */
  codec?: string;
  /**
   * Skip the state if this asset already holds one with the same `at` and value (states a gateway
   * re-sends after a lost PUBACK); `writeStates` then sets `duplicate`.
   */
  dedupe?: boolean;
  duplicate?: boolean;
}

/** A raw uplink as it is kept: the bytes before any codec, and what decoding them gave. */
export interface NewUplink {
  deviceId: string;
  at: number;
  payload: Uint8Array;
  port: number | null;
  source: string;
  decoded: boolean;
  error: string | null;
  /** The codec version that decoded it (null when the device had none). */
  codec?: string | null;
  /** Set when the door fixed the format (HTTP `application/cbor`): a re-decode leaves it alone. */
  declaredFormat?: string | null;
}

export interface UplinkRecord {
  seq: number;
  at: number;
  payload: Buffer;
  port: number | null;
  source: string;
  decoded: boolean;
  error: string | null;
  codec: string | null;
}

export interface HistoryPage {
  data: Array<{ at: number; valueJson: string; uplinkSeq: number | null; codec: string | null }>;
  next: string | null;
}

type Row = Record<string, unknown>;

function deviceFrom(row: Row): DeviceRecord {
  return {
    id: row.id as string,
    name: row.name as string,
    title: (row.title as string | null) ?? null,
    description: (row.description as string | null) ?? null,
    payloadFormat: row.payload_format as string,
    codec: (row.codec as string | null) ?? null,
    createdOn: row.created_on as number,
    updatedOn: row.updated_on as number,
    gatewayId: (row.gateway_id as string | null) ?? null,
    removedAtGateway: (row.removed_at_gateway as number | null) ?? null,
  };
}

function assetFrom(row: Row): AssetRecord {
  return {
    id: row.id as string,
    deviceId: row.device_id as string,
    name: row.name as string,
    title: (row.title as string | null) ?? null,
    description: (row.description as string | null) ?? null,
    is: row.kind as AssetKind,
    profile: JSON.parse(row.profile as string) as Profile,
    createdOn: row.created_on as number,
    updatedOn: row.updated_on as number,
  };
}

function tokenFrom(row: Row): TokenRecord {
  const scopes = row.scopes as string;
  return {
    id: row.id as string,
    kind: row.kind as TokenKind,
    name: row.name as string,
    deviceId: (row.device_id as string | null) ?? null,
    scopes: scopes ? (scopes.split(',') as Scope[]) : [],
    createdOn: row.created_on as number,
    revokedOn: (row.revoked_on as number | null) ?? null,
    gatewayId: (row.gateway_id as string | null) ?? null,
  };
}

export interface StoreOptions {
  synchronous?: 'normal' | 'full';
  /** Largest database file in bytes (0: no limit). Over it writes fail with SQLITE_FULL (HTTP 503). */
  maxBytes?: number;
  readonly?: boolean;
  /**
   * Run `PRAGMA quick_check` before using the file (the daemon does at start; the CLI does not,
   * it opens the file for every command). A damaged file throws StoreCorruptError.
   */
  checkIntegrity?: boolean;
}

/** The database file is damaged; the message says what to do. */
export class StoreCorruptError extends Error {
  override name = 'StoreCorruptError';
  readonly code = 'STORE_CORRUPT';
  constructor(
    readonly path: string,
    readonly problems: string[],
  ) {
    super(`the database file ${path} is damaged (${problems.slice(0, 3).join('; ')}${problems.length > 3 ? `; ${problems.length - 3} more` : ''}): ${restoreAdvice(path)}`);
  }
}

/**
 * The one SQLite database of an Outpost data dir. Plain synchronous methods: better-sqlite3 is
 * synchronous, and every caller (daemon, CLI, tests) owns the connection it opened.
 */
export class Store {
  readonly db: Database;
  readonly path: string;
  /** What the store's failures say about it (damaged, full), for /healthz. */
  readonly health: StoreHealth;
  #statements: StatementCache | undefined;

  /** Opens (creating it owner-only if needed) the database of a data directory. */
  static open(dataDir: string, options: StoreOptions = {}): Store {
    prepareDataDir(dataDir);
    return new Store(join(dataDir, DATA_FILES.database), options);
  }

  constructor(path: string, options: StoreOptions = {}) {
    this.path = path;
    this.health = new StoreHealth(path);
    this.db = new BetterSqlite3(path);
    try {
      this.#configure(options);
    } catch (err) {
      this.db.close();
      // A header or schema page too damaged to even open the file.
      if (isCorruption(err)) throw new StoreCorruptError(path, [(err as Error).message]);
      throw err;
    }
  }

  #configure(options: StoreOptions): void {
    if (options.checkIntegrity) {
      // Before migrations, so a damaged file is never written to. quick_check reads every page
      // (O(N), measured in docs/configuration.md) but skips the index-content cross-check.
      const problems = this.db.pragma('quick_check(20)', { simple: false }) as Array<{ quick_check: string }>;
      const found = problems.map((r) => r.quick_check).filter((m) => m !== 'ok');
      if (found.length > 0) throw new StoreCorruptError(this.path, found);
    }
    this.db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode survives a killed process; FULL (the default) also survives power loss, at
    // one fsync per group commit: measured to keep well over half the ingest rate (README, Benchmarks).
    this.db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    this.db.pragma('foreign_keys = ON');
    // A cap on the database file keeps a small SD card from filling up: writes over it are refused
    // (503, Retry-After) instead of taking the whole system down with a full disk.
    if (options.maxBytes) this.setMaxBytes(options.maxBytes);
    // The CLI writes to the same file while the daemon runs; wait for each other's short transactions.
    this.db.pragma('busy_timeout = 5000');
    migrate(this.db);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /** Caps the database file (0: no cap); also used by a config reload. */
  setMaxBytes(maxBytes: number): void {
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    // 4294967294 is SQLite's own largest page count, i.e. no cap.
    const pages = maxBytes > 0 ? Math.max(1, Math.floor(maxBytes / pageSize)) : 4294967294;
    this.db.pragma(`max_page_count = ${pages}`);
    this.health.setMaxBytes(maxBytes);
  }

  #stmt(sql: string): Statement {
    return (this.#statements ??= new StatementCache(this.db)).get(sql);
  }

  /** Changes whenever another connection (the CLI) commits: the daemon's cue to drop its caches. */
  dataVersion(): number {
    return this.#stmt('PRAGMA data_version').pluck().get() as number;
  }

  /** Bytes on disk: the database file plus its write-ahead log. */
  sizeBytes(): number {
    let size = 0;
    for (const suffix of ['', '-wal']) {
      try {
        size += statSync(this.path + suffix).size;
      } catch {
        // a missing WAL file is simply empty
      }
    }
    return size;
  }

  // ---- devices

  /** `id`: an ID chosen by an admin (pre-assignment); `gatewayId`: a central's device behind that gateway. */
  createDevice(
    input: { name: string; title?: string | null; description?: string | null; id?: string; gatewayId?: string | null },
    now: number,
  ): { device: DeviceRecord; token: string; tokenId: string } {
    const device: DeviceRecord = {
      id: input.id ?? newId(),
      name: input.name,
      title: input.title ?? null,
      description: input.description ?? null,
      payloadFormat: 'auto',
      codec: null,
      createdOn: now,
      updatedOn: now,
      gatewayId: input.gatewayId ?? null,
      removedAtGateway: null,
    };
    return this.db.transaction(() => {
      this.#stmt(
        `INSERT INTO devices (id, name, title, description, payload_format, codec, created_on, updated_on, gateway_id)
         VALUES (@id, @name, @title, @description, @payloadFormat, @codec, @createdOn, @updatedOn, @gatewayId)`,
      ).run(device);
      const { token, secret } = this.createToken({ kind: 'device', name: `device ${device.name}`, deviceId: device.id, scopes: [] }, now);
      return { device, token: secret, tokenId: token.id };
    })();
  }

  getDevice(id: string): DeviceRecord | undefined {
    const row = this.#stmt('SELECT * FROM devices WHERE id = ?').get(id) as Row | undefined;
    return row && deviceFrom(row);
  }

  /** The `at` of each device's newest latest state: the device list's "last seen", in one query. */
  lastStateAtByDevice(): Map<string, number> {
    const rows = this.#stmt('SELECT a.device_id AS device_id, MAX(l.at) AS at FROM latest_states l JOIN assets a ON a.id = l.asset_id GROUP BY a.device_id').all() as Row[];
    return new Map(rows.map((r) => [r.device_id as string, r.at as number]));
  }

  listDevices(): DeviceRecord[] {
    return (this.#stmt('SELECT * FROM devices ORDER BY created_on, id').all() as Row[]).map(deviceFrom);
  }

  updateDevice(id: string, fields: { name?: string; title?: string | null; description?: string | null; payloadFormat?: string; codec?: string | null }, now: number): void {
    const current = this.getDevice(id);
    if (!current) return;
    const next = { ...current, ...fields, updatedOn: now };
    this.#stmt(
      `UPDATE devices SET name = @name, title = @title, description = @description, payload_format = @payloadFormat,
       codec = @codec, updated_on = @updatedOn WHERE id = @id`,
    ).run(next);
  }

  /** Deletes the device with its assets, history and tokens (cascade). */
  deleteDevice(id: string): boolean {
    return this.#stmt('DELETE FROM devices WHERE id = ?').run(id).changes > 0;
  }

  // ---- assets

  createAsset(input: Omit<AssetRecord, 'id' | 'createdOn' | 'updatedOn'>, now: number): AssetRecord {
    const asset: AssetRecord = { ...input, id: newId(), createdOn: now, updatedOn: now };
    this.#stmt(
      `INSERT INTO assets (id, device_id, name, title, description, kind, profile, created_on, updated_on)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(asset.id, asset.deviceId, asset.name, asset.title, asset.description, asset.is, JSON.stringify(asset.profile), now, now);
    return asset;
  }

  updateAsset(asset: AssetRecord, now: number): AssetRecord {
    const next = { ...asset, updatedOn: now };
    this.#stmt('UPDATE assets SET title = ?, description = ?, kind = ?, profile = ?, updated_on = ? WHERE id = ?').run(
      next.title,
      next.description,
      next.is,
      JSON.stringify(next.profile),
      now,
      next.id,
    );
    return next;
  }

  getAssetById(id: string): AssetRecord | undefined {
    const row = this.#stmt('SELECT * FROM assets WHERE id = ?').get(id) as Row | undefined;
    return row && assetFrom(row);
  }

  getAssetByName(deviceId: string, name: string): AssetRecord | undefined {
    const row = this.#stmt('SELECT * FROM assets WHERE device_id = ? AND name = ?').get(deviceId, name) as Row | undefined;
    return row && assetFrom(row);
  }

  listAssets(deviceId: string): AssetRecord[] {
    return (this.#stmt('SELECT * FROM assets WHERE device_id = ? ORDER BY created_on, name').all(deviceId) as Row[]).map(assetFrom);
  }

  countAssets(deviceId: string): number {
    return this.#stmt('SELECT count(*) FROM assets WHERE device_id = ?').pluck().get(deviceId) as number;
  }

  deleteAsset(id: string): boolean {
    return this.#stmt('DELETE FROM assets WHERE id = ?').run(id).changes > 0;
  }

  // ---- tokens

  createToken(input: { kind: TokenKind; name: string; deviceId: string | null; scopes: Scope[]; gatewayId?: string | null }, now: number): { token: TokenRecord; secret: string } {
    const secret = newTokenSecret(input.kind);
    const token: TokenRecord = {
      id: newId(),
      kind: input.kind,
      name: input.name,
      deviceId: input.deviceId,
      scopes: input.scopes,
      createdOn: now,
      revokedOn: null,
      gatewayId: input.gatewayId ?? null,
    };
    this.#stmt('INSERT INTO tokens (id, hash, kind, name, device_id, scopes, created_on, gateway_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
      token.id,
      hashToken(secret),
      token.kind,
      token.name,
      token.deviceId,
      token.scopes.join(','),
      now,
      token.gatewayId,
    );
    return { token, secret };
  }

  /** The live (not revoked) token with this hash. */
  findTokenByHash(hash: string): TokenRecord | undefined {
    const row = this.#stmt('SELECT * FROM tokens WHERE hash = ? AND revoked_on IS NULL').get(hash) as Row | undefined;
    return row && tokenFrom(row);
  }

  getToken(id: string): TokenRecord | undefined {
    const row = this.#stmt('SELECT * FROM tokens WHERE id = ?').get(id) as Row | undefined;
    return row && tokenFrom(row);
  }

  listTokens(): TokenRecord[] {
    return (this.#stmt('SELECT * FROM tokens ORDER BY created_on, id').all() as Row[]).map(tokenFrom);
  }

  revokeToken(id: string, now: number): boolean {
    return this.#stmt('UPDATE tokens SET revoked_on = ? WHERE id = ? AND revoked_on IS NULL').run(now, id).changes > 0;
  }

  liveDeviceTokenIds(deviceId: string): string[] {
    return this.#stmt("SELECT id FROM tokens WHERE device_id = ? AND kind = 'device' AND revoked_on IS NULL").pluck().all(deviceId) as string[];
  }

  /** Issues a new device token and revokes the device's previous ones in one step. */
  rotateDeviceToken(deviceId: string, deviceName: string, now: number): { token: TokenRecord; secret: string; revoked: string[] } {
    return this.db.transaction(() => {
      const revoked = this.liveDeviceTokenIds(deviceId);
      for (const id of revoked) this.revokeToken(id, now);
      return { ...this.createToken({ kind: 'device', name: `device ${deviceName}`, deviceId, scopes: [] }, now), revoked };
    })();
  }

  // ---- states

  /**
   * Runs `work` in one transaction (a savepoint when already inside one), so writes that belong
   * together (an uplink's states, its raw bytes, a radio session's counters, an outbox row) commit
   * or fail together.
   */
  transaction<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  /** Writes a batch of states in one transaction: history rows plus the latest state per asset. */
  writeStates(states: readonly StoredState[]): void {
    const insert = this.#stmt('INSERT INTO states (asset_id, at, value, received_at, uplink_seq, codec) VALUES (?, ?, ?, ?, ?, ?)');
    // Ties on `at` go to the last received, hence >=.
    const latest = this.#stmt(
      `INSERT INTO latest_states (asset_id, seq, at, value) VALUES (?, ?, ?, ?)
       ON CONFLICT(asset_id) DO UPDATE SET seq = excluded.seq, at = excluded.at, value = excluded.value
       WHERE excluded.at >= latest_states.at`,
    );
    const held = this.#stmt('SELECT 1 FROM states WHERE asset_id = ? AND at = ? AND value = ? LIMIT 1').pluck();
    this.db.transaction(() => {
      // One latest-state upsert per asset and batch, not per row: a burst on one asset is one upsert.
      const newest = new Map<string, { seq: number | bigint; at: number; valueJson: string }>();
      for (const s of states) {
        if (s.dedupe && held.get(s.assetId, s.at, s.valueJson) !== undefined) {
          s.duplicate = true;
          continue;
        }
        const seq = insert.run(s.assetId, s.at, s.valueJson, s.receivedAt, s.uplinkSeq ?? null, s.codec ?? null).lastInsertRowid;
        const best = newest.get(s.assetId);
        if (!best || s.at >= best.at) newest.set(s.assetId, { seq, at: s.at, valueJson: s.valueJson });
      }
      for (const [assetId, n] of newest) latest.run(assetId, n.seq, n.at, n.valueJson);
    })();
  }

  latestState(assetId: string): { at: number; valueJson: string } | undefined {
    const row = this.#stmt('SELECT at, value FROM latest_states WHERE asset_id = ?').get(assetId) as Row | undefined;
    return row && { at: row.at as number, valueJson: row.value as string };
  }

  /** Every asset's latest state: the MQTT door rebuilds its retained feed messages from this at start. */
  allLatestStates(): Array<{ assetId: string; at: number; valueJson: string }> {
    return (this.#stmt('SELECT asset_id, at, value FROM latest_states').all() as Row[]).map((r) => ({
      assetId: r.asset_id as string,
      at: r.at as number,
      valueJson: r.value as string,
    }));
  }

  /** Newest first. `cursor` is the opaque `next` of the previous page. */
  history(assetId: string, query: { from?: number; to?: number; limit: number; cursor?: { at: number; seq: number } }): HistoryPage {
    const from = query.from ?? -8.64e15;
    const to = query.to ?? 8.64e15;
    const c = query.cursor ?? { at: 8.64e15 + 1, seq: 0 };
    const rows = this.#stmt(
      `SELECT seq, at, value, uplink_seq, codec FROM states
       WHERE asset_id = ? AND at >= ? AND at <= ? AND (at < ? OR (at = ? AND seq < ?))
       ORDER BY at DESC, seq DESC LIMIT ?`,
    ).all(assetId, from, to, c.at, c.at, c.seq, query.limit + 1) as Row[];
    const page = rows.slice(0, query.limit);
    const last = page[page.length - 1];
    return {
      data: page.map((r) => ({
        at: r.at as number,
        valueJson: r.value as string,
        uplinkSeq: (r.uplink_seq as number | null) ?? null,
        codec: (r.codec as string | null) ?? null,
      })),
      next: rows.length > query.limit && last ? Buffer.from(`${last.at as number}:${last.seq as number}`).toString('base64url') : null,
    };
  }

  countStates(assetId?: string): number {
    return assetId
      ? (this.#stmt('SELECT count(*) FROM states WHERE asset_id = ?').pluck().get(assetId) as number)
      : (this.#stmt('SELECT count(*) FROM states').pluck().get() as number);
  }

  /**
   * Retention (docs/configuration.md): drops states older than `olderThan` and, for the given assets, all but
   * the newest `keepPerAsset`. Runs in the background in small transactions so writers are never held long.
   */
  pruneHistory(olderThan: number, assetIds: Iterable<string>, keepPerAsset: number): number {
    let removed = 0;
    const byAge = this.#stmt('DELETE FROM states WHERE seq IN (SELECT seq FROM states WHERE at < ? LIMIT 5000)');
    for (;;) {
      const n = byAge.run(olderThan).changes;
      removed += n;
      if (n < 5000) break;
    }
    removed += this.#stmt('DELETE FROM commands WHERE at < ?').run(olderThan).changes;
    const cutoff = this.#stmt('SELECT at, seq FROM states WHERE asset_id = ? ORDER BY at DESC, seq DESC LIMIT 1 OFFSET ?');
    const byCount = this.#stmt('DELETE FROM states WHERE asset_id = ? AND (at < ? OR (at = ? AND seq <= ?))');
    for (const assetId of assetIds) {
      const edge = cutoff.get(assetId, keepPerAsset) as Row | undefined;
      if (edge) removed += byCount.run(assetId, edge.at, edge.at, edge.seq).changes;
    }
    return removed;
  }

  // ---- raw uplinks

  /** Keeps a raw uplink; returns its `seq`, the id its states' provenance points at. */
  recordUplink(input: NewUplink): number {
    return Number(
      this.#stmt('INSERT INTO raw_uplinks (device_id, at, payload, port, source, decoded, error, codec, declared_format) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)').run(
        input.deviceId,
        input.at,
        Buffer.from(input.payload.buffer, input.payload.byteOffset, input.payload.byteLength),
        input.port,
        input.source,
        input.decoded ? 1 : 0,
        input.error,
        input.codec ?? null,
        input.declaredFormat ?? null,
      ).lastInsertRowid,
    );
  }

  /** Newest first; `before` is the `seq` cursor of the previous page. */
  listUplinks(deviceId: string, limit: number, before?: number): { data: UplinkRecord[]; next: string | null } {
    const rows = this.#stmt('SELECT * FROM raw_uplinks WHERE device_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?').all(deviceId, before ?? Number.MAX_SAFE_INTEGER, limit + 1) as Row[];
    const page = rows.slice(0, limit).map((r) => ({
      seq: r.seq as number,
      at: r.at as number,
      payload: r.payload as Buffer,
      port: (r.port as number | null) ?? null,
      source: r.source as string,
      decoded: r.decoded === 1,
      error: (r.error as string | null) ?? null,
      codec: (r.codec as string | null) ?? null,
    }));
    return { data: page, next: rows.length > limit ? String(page[page.length - 1]!.seq) : null };
  }

  /** Keeps the newest `keep` raw uplinks of each device that has more, and none received before `olderThan`. */
  pruneUplinks(keep: number, olderThan = -8.64e15): number {
    let removed = 0;
    const byAge = this.#stmt('DELETE FROM raw_uplinks WHERE seq IN (SELECT seq FROM raw_uplinks WHERE at < ? LIMIT 5000)');
    for (;;) {
      const n = byAge.run(olderThan).changes;
      removed += n;
      if (n < 5000) break;
    }
    const devices = this.#stmt('SELECT device_id FROM raw_uplinks GROUP BY device_id HAVING count(*) > ?').pluck().all(keep) as string[];
    const edge = this.#stmt('SELECT seq FROM raw_uplinks WHERE device_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?').pluck();
    const drop = this.#stmt('DELETE FROM raw_uplinks WHERE device_id = ? AND seq <= ?');
    for (const id of devices) {
      const seq = edge.get(id, keep) as number | undefined;
      if (seq !== undefined) removed += drop.run(id, seq).changes;
    }
    return removed;
  }

  // ---- commands

  recordCommand(input: { deviceId: string; assetId: string | null; valueJson: string; metaJson: string | null; at: number; source: string }): number {
    return Number(
      this.#stmt('INSERT INTO commands (device_id, asset_id, value, meta, at, source) VALUES (?, ?, ?, ?, ?, ?)').run(
        input.deviceId,
        input.assetId,
        input.valueJson,
        input.metaJson,
        input.at,
        input.source,
      ).lastInsertRowid,
    );
  }
}

export function decodeHistoryCursor(text: string): { at: number; seq: number } | undefined {
  const m = /^(-?\d+):(\d+)$/.exec(Buffer.from(text, 'base64url').toString());
  return m ? { at: Number(m[1]), seq: Number(m[2]) } : undefined;
}
