import { EventEmitter } from 'node:events';
import type { UpstreamConfig } from '../core/config.js';
import { ServiceError } from '../core/errors.js';
import type { Clock } from '../core/time.js';
import type { Catalog } from '../store/catalog.js';
import type { Store } from '../store/store.js';
import type { StoredState } from '../store/states.js';
import { OutboxStore, type OutboxRow, type OutboxRowInput, type OutboxTotals } from '../store/outbox.js';
import type { BatchHook } from '../ingest/state-writer.js';
import type { Logger } from '../ops/logger.js';
import { catalogTopic } from '../wire/topics.js';
import { catalogText, feedText } from '../wire/messages.js';

const DAY_MS = 86_400_000;

export interface OutboxStatus extends OutboxTotals {
  sent: number;
  dropped: number;
  rejected: number;
  /** Rows the upstream can never take, removed unsent (docs/sync.md, "What the upstream cannot take"). */
  setAside: number;
  lastAckAt: number | null;
}

type OutboxEvents = {
  /** Rows committed for these (local) devices: the forwarder's cue to look for work. */
  rows: [deviceIds: ReadonlySet<string>];
};

export interface OutboxDeps {
  /** Devices and assets for catalog messages, the outbox rows, and one transaction around announcing every catalog. */
  store: Pick<Store, 'devices' | 'assets' | 'outbox' | 'managedHere' | 'transaction'>;
  catalog: Catalog;
  clock: Clock;
  config: UpstreamConfig;
  logger: Logger;
}

/**
 * The gateway's outbox (docs/sync.md): every accepted state of a synced device gets a row in the
 * same transaction that stores it (a BatchHook of the StateWriter, so HTTP, MQTT, radio and CLI
 * states all take this road). Rows leave only when the upstream acknowledged them, or when a bound
 * drops them, and then they are counted. In gateway mode (an Outpost central) a device's catalog
 * message is queued before its first state, so the central knows the device before its data.
 */
export class Outbox extends EventEmitter<OutboxEvents> implements BatchHook {
  readonly rows: OutboxStore;
  readonly #store: OutboxDeps['store'];
  readonly #catalog: Catalog;
  readonly #clock: Clock;
  readonly #config: UpstreamConfig;
  readonly #logger: Logger;
  /** Gateway mode: the central's gateway ID (catalog topics); null for a third-party upstream. */
  readonly #gatewayId: string | null;
  #depth = 0;
  #bytes = 0;
  /** Counted since the last flush to the persisted counters. */
  #unflushed = { sent: 0, dropped: 0, rejected: 0, setAside: 0, lastAckAt: null as number | null };
  #link: 'up' | 'down' | 'off' = 'down';
  /** The catalog message last queued per device, so an unchanged device is not queued again. */
  readonly #announced = new Map<string, string>();
  /**
   * What the open batch transaction added (over one or several withinTransaction calls), and the
   * states refused in it; applied on commit, forgotten on rollback.
   */
  #pending: { depth: number; bytes: number; dropped: number; rejected: number; devices: Set<string>; announced: Map<string, string> } | null = null;

  constructor(deps: OutboxDeps) {
    super();
    this.#store = deps.store;
    this.#catalog = deps.catalog;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#logger = deps.logger;
    this.#gatewayId = deps.config.token ? deps.config.gatewayId : null;
    this.rows = deps.store.outbox;
    this.recount();
  }

  /** Whether a local device's states go upstream: every device for a central, listed ones for a third party. */
  syncs(deviceId: string): boolean {
    return this.#gatewayId !== null || !!this.#config.devices?.[deviceId];
  }

  /** The topic a state of this device takes upstream (a third-party upstream knows it by its own ID). */
  #stateTopic(deviceId: string, assetName: string): string {
    const upstreamId = this.#gatewayId === null ? this.#config.devices![deviceId]!.id : deviceId;
    return `device/${upstreamId}/asset/${assetName}/state`;
  }

  /** Totals from the table itself: at start, and after another process (the CLI) purged rows. */
  recount(): void {
    const totals = this.rows.totals();
    this.#depth = totals.depth;
    this.#bytes = totals.bytes;
  }

  // ---- the batch hook: rows commit with their states

  /**
   * Queues a row per synced state. Called once per batch, or once per write when the StateWriter
   * retries a refused batch write by write: under `reject-new` it then refuses only the writes
   * that do not fit, and the other devices' states of the batch are stored (docs/sync.md).
   */
  withinTransaction(states: readonly StoredState[]): void {
    const now = this.#clock.now();
    const pending = (this.#pending ??= { depth: 0, bytes: 0, dropped: 0, rejected: 0, devices: new Set<string>(), announced: new Map<string, string>() });
    const rows: OutboxRowInput[] = [];
    // Catalogs and devices of these states only: merged into `pending` once they are queued.
    const announced = new Map<string, string>();
    const devices = new Set<string>();
    let stateRows = 0;
    for (const s of states) {
      if (s.duplicate) continue;
      const asset = this.#catalog.assetById(s.assetId);
      if (!asset || !this.syncs(asset.deviceId)) continue;
      if (this.#gatewayId !== null && !this.#announced.has(asset.deviceId) && !pending.announced.has(asset.deviceId) && !announced.has(asset.deviceId)) {
        const catalog = this.#catalogRow(asset.deviceId, now);
        if (catalog) {
          rows.push(catalog.row);
          announced.set(asset.deviceId, catalog.text);
        }
      }
      const topic = this.#stateTopic(asset.deviceId, asset.name);
      rows.push({ deviceId: asset.deviceId, kind: 'state', topic, payload: Buffer.from(feedText(s.valueJson, s.at)), createdAt: now });
      devices.add(asset.deviceId);
      stateRows++;
    }
    if (rows.length === 0) return;
    let bytes = 0;
    for (const r of rows) bytes += OutboxStore.rowBytes(r.topic, r.payload);
    // Rows queued earlier in this transaction count too (the batch's other writes).
    const queued = this.#bytes + pending.bytes;
    const over = queued + bytes - this.#config.maxBytes;
    if (over > 0 && this.#config.whenFull === 'reject-new') {
      pending.rejected += stateRows;
      throw new ServiceError('OUTBOX_FULL', `the upstream outbox is full (${queued} of ${this.#config.maxBytes} bytes); the state was not stored, retry later`, {
        retryAfter: 30,
        details: { rejectedStates: stateRows },
      });
    }
    for (const [id, text] of announced) pending.announced.set(id, text);
    for (const id of devices) pending.devices.add(id);
    this.rows.insert(rows);
    pending.depth += rows.length;
    pending.bytes += bytes;
    if (over > 0) {
      const removed = this.rows.dropOldestStates(over);
      pending.depth -= removed.rows;
      pending.bytes -= removed.bytes;
      pending.dropped += removed.rows;
    }
  }

  afterCommit(): void {
    const pending = this.#pending;
    this.#pending = null;
    if (!pending || (pending.depth === 0 && pending.dropped === 0 && pending.rejected === 0)) return;
    this.#depth += pending.depth;
    this.#bytes += pending.bytes;
    this.#unflushed.dropped += pending.dropped;
    // Writes refused one by one while the rest of their batch committed.
    this.#unflushed.rejected += pending.rejected;
    for (const [id, text] of pending.announced) this.#announced.set(id, text);
    if (pending.devices.size > 0) this.emit('rows', pending.devices);
  }

  afterFailure(_err: unknown, retried: boolean): void {
    const pending = this.#pending;
    this.#pending = null;
    // A batch retried write by write counts its refusals when that run commits.
    if (!retried && pending) this.#unflushed.rejected += pending.rejected;
  }

  // ---- the gateway catalog

  #catalogRow(deviceId: string, now: number): { row: OutboxRowInput; text: string } | undefined {
    // A device the central manages (or once managed) came from the central: it is not described back up.
    if (this.#store.managedHere.get(deviceId)) return undefined;
    const device = this.#store.devices.get(deviceId);
    const text = device ? catalogText(device, this.#store.assets.list(deviceId), this.#config.maxMessageBytes) : '';
    if (!device && !this.#announced.has(deviceId)) return undefined;
    return { row: { deviceId, kind: 'catalog', topic: catalogTopic(this.#gatewayId!, deviceId), payload: Buffer.from(text), createdAt: now }, text };
  }

  /**
   * Queues the device's catalog message if it changed since it was last queued (an empty payload
   * once it is deleted). Gateway mode only; a third-party upstream has no catalog topic.
   */
  announceDevice(deviceId: string): void {
    if (this.#gatewayId === null) return;
    const now = this.#clock.now();
    const catalog = this.#catalogRow(deviceId, now);
    if (!catalog || this.#announced.get(deviceId) === catalog.text) return;
    const bytes = this.rows.insert([catalog.row]);
    this.#depth++;
    this.#bytes += bytes;
    if (catalog.text === '') this.#announced.delete(deviceId);
    else this.#announced.set(deviceId, catalog.text);
    this.emit('rows', new Set([deviceId]));
  }

  /** Every device's catalog, at start (devices registered while sync was off, or changed by the CLI). */
  announceAll(): void {
    if (this.#gatewayId === null) return;
    const ids = new Set([...this.#store.devices.list().map((d) => d.id), ...this.#announced.keys()]);
    this.#store.transaction(() => {
      for (const id of ids) this.announceDevice(id);
    });
  }

  // ---- what the forwarder and the bounds report

  acknowledged(seqs: readonly number[]): void {
    if (seqs.length === 0) return;
    const removed = this.rows.deleteRows(seqs);
    this.#depth -= removed.rows;
    this.#bytes -= removed.bytes;
    this.#unflushed.sent += seqs.length;
    this.#unflushed.lastAckAt = this.#clock.now();
  }

  /**
   * A row the upstream can never take (larger than `upstream.maxMessageBytes`, or the link closed
   * every time it was sent alone) leaves the outbox unsent, counted and logged, so the rows behind
   * it move on. Retrying it forever would stop every device's sync.
   */
  setAside(row: Pick<OutboxRow, 'seq' | 'deviceId' | 'kind' | 'topic' | 'bytes'>, reason: string): void {
    const removed = this.rows.deleteRows([row.seq]);
    if (removed.rows === 0) return;
    this.#depth -= removed.rows;
    this.#bytes -= removed.bytes;
    this.#unflushed.setAside += removed.rows;
    this.#logger.warn({ deviceId: row.deviceId, kind: row.kind, topic: row.topic.slice(0, 256), bytes: row.bytes, reason }, 'outbox: row set aside, the upstream cannot take it');
  }

  /** The age bound (`maxAgeDays`), run periodically: older state rows are dropped and counted. */
  enforceAge(): number {
    const removed = this.rows.dropStatesBefore(this.#clock.now() - this.#config.maxAgeDays * DAY_MS);
    if (removed.rows > 0) {
      this.#depth -= removed.rows;
      this.#bytes -= removed.bytes;
      this.#unflushed.dropped += removed.rows;
      this.#logger.warn({ dropped: removed.rows, maxAgeDays: this.#config.maxAgeDays }, 'outbox: states older than maxAgeDays dropped');
    }
    return removed.rows;
  }

  setLink(link: 'up' | 'down' | 'off'): void {
    this.#link = link;
  }

  get link(): 'up' | 'down' | 'off' {
    return this.#link;
  }

  get depth(): number {
    return this.#depth;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Adds what was counted since the last flush to the persisted counters (read by `outpost outbox status`). */
  flushCounters(): void {
    const u = this.#unflushed;
    this.#unflushed = { sent: 0, dropped: 0, rejected: 0, setAside: 0, lastAckAt: null };
    try {
      this.rows.addCounts({ ...u, link: this.#link }, this.#clock.now());
    } catch (err) {
      // A busy database (the CLI writing) must not lose counts: keep them for the next flush.
      this.#unflushed.sent += u.sent;
      this.#unflushed.dropped += u.dropped;
      this.#unflushed.rejected += u.rejected;
      this.#unflushed.setAside += u.setAside;
      this.#unflushed.lastAckAt ??= u.lastAckAt;
      this.#logger.debug({ err }, 'outbox counters not flushed yet');
    }
  }

  status(): OutboxStatus {
    const persisted = this.rows.counters();
    const u = this.#unflushed;
    return {
      depth: this.#depth,
      bytes: this.#bytes,
      oldestAt: this.#depth > 0 ? this.rows.oldestCreatedAt() : null,
      sent: persisted.sent + u.sent,
      dropped: persisted.dropped + u.dropped,
      rejected: persisted.rejected + u.rejected,
      setAside: persisted.setAside + u.setAside,
      lastAckAt: u.lastAckAt ?? persisted.lastAckAt,
    };
  }
}
