import { join } from 'node:path';
import { DATA_FILES, prepareDataDir } from './data-dir.js';
import { Database, type DatabaseOptions } from './database.js';
import type { StoreHealth } from './health.js';
import { TokenStore } from './tokens.js';
import { DeviceStore } from './devices.js';
import { AssetStore } from './assets.js';
import { StateStore } from './states.js';
import { UplinkStore } from './uplinks.js';
import { CommandStore } from './commands.js';
import { GatewayStore } from './gateways.js';
import { StationStore } from './stations.js';
import { LorawanDeviceStore } from './lorawan-devices.js';
import { DownlinkQueueStore } from './downlink-queue.js';
import { OutboxStore } from './outbox.js';
import { RedecodeJobs } from './redecode-jobs.js';
import { FleetStore, ManagedHereStore } from './fleet.js';
import { CommandedValueStore } from './commanded-values.js';
import { CatalogCapture, type ReplicaChange } from './replica-log.js';

export type StoreOptions = DatabaseOptions;
export { StoreCorruptError } from './database.js';

/**
 * The store of an Outpost data dir: one SQLite connection (Database) and the aggregates over it,
 * one per group of tables that change together (docs/architecture.md, "Store"). The daemon, the
 * CLI and the tests open it once and hand each part of the code the aggregate it needs; writes
 * that span aggregates (an uplink's raw bytes and its states) go in one `transaction`.
 */
export class Store {
  readonly path: string;
  /** What the store's failures say about it (damaged, full), for /healthz. */
  readonly health: StoreHealth;
  readonly tokens: TokenStore;
  readonly devices: DeviceStore;
  readonly assets: AssetStore;
  readonly states: StateStore;
  readonly uplinks: UplinkStore;
  readonly commands: CommandStore;
  /** Central role: gateways, their devices and the commands waiting for them. */
  readonly gateways: GatewayStore;
  readonly lorawanDevices: LorawanDeviceStore;
  readonly downlinks: DownlinkQueueStore;
  readonly outbox: OutboxStore;
  readonly redecodeJobs: RedecodeJobs;
  /** Central role: managed devices, their revisions and what each gateway applied. */
  readonly fleet: FleetStore;
  /** Gateway role: the devices its central manages (read-only here). */
  readonly managedHere: ManagedHereStore;
  /** The last value commanded to each asset of a device (radio downlink codecs read them). */
  readonly commandedValues: CommandedValueStore;
  /** LoRa Basics Stations allowed to connect, with their token hashes. */
  readonly stations: StationStore;
  readonly #db: Database;
  readonly #capture: CatalogCapture;

  /** Opens (creating it owner-only if needed) the database of a data directory. */
  static open(dataDir: string, options: StoreOptions = {}): Store {
    prepareDataDir(dataDir);
    return new Store(new Database(join(dataDir, DATA_FILES.database), options));
  }

  constructor(db: Database) {
    this.#db = db;
    this.path = db.path;
    this.health = db.health;
    this.tokens = new TokenStore(db);
    this.devices = new DeviceStore(db, this.tokens);
    this.assets = new AssetStore(db);
    this.states = new StateStore(db);
    this.uplinks = new UplinkStore(db);
    this.commands = new CommandStore(db);
    this.gateways = new GatewayStore(db, this.tokens);
    this.lorawanDevices = new LorawanDeviceStore(db);
    this.downlinks = new DownlinkQueueStore(db);
    this.outbox = new OutboxStore(db);
    this.redecodeJobs = new RedecodeJobs(db);
    this.fleet = new FleetStore(db);
    this.managedHere = new ManagedHereStore(db);
    this.commandedValues = new CommandedValueStore(db);
    this.stations = new StationStore(db);
    this.#capture = new CatalogCapture(db);
  }

  /**
   * A central on PostgreSQL (docs/scale-out.md): runs a catalog write, returns what it would change
   * and rolls it back; the cache is changed once PostgreSQL committed those rows.
   */
  dryRunCatalogWrite<T>(work: () => T): { result: T; changes: ReplicaChange[] } {
    return this.#capture.dryRun(work);
  }

  /**
   * Runs `work` in one transaction (a savepoint when already inside one), so writes to several
   * aggregates commit or fail together.
   */
  transaction<T>(work: () => T): T {
    return this.#db.transaction(work);
  }

  /** A transaction whose commit does not wait for the disk: await `syncLog()` before acknowledging it (Database.transactionSyncedLater). */
  transactionSyncedLater<T>(work: () => T): T {
    return this.#db.transactionSyncedLater(work);
  }

  /** Whether the commits now come in a burst: the log then grows larger before a checkpoint (Database.checkpointForBurst). */
  checkpointForBurst(burst: boolean): void {
    this.#db.checkpointForBurst(burst);
  }

  /** Settles once every commit so far is on the disk. */
  syncLog(): Promise<void> {
    return this.#db.syncLog();
  }

  /** Changes whenever another connection (the CLI) commits: the daemon's cue to drop its caches. */
  dataVersion(): number {
    return this.#db.dataVersion();
  }

  /** Bytes on disk: the database file plus its write-ahead log. */
  sizeBytes(): number {
    return this.#db.sizeBytes();
  }

  /** Caps the database file (0: no cap); also used by a config reload. */
  setMaxBytes(maxBytes: number): void {
    this.#db.setMaxBytes(maxBytes);
  }

  /** The schema version of the file (its migrations). */
  schemaVersion(): number {
    return this.#db.schemaVersion();
  }

  /** Throws if the database cannot be read: the watchdog's liveness probe. */
  ping(): void {
    this.#db.ping();
  }

  /** Moves the write-ahead log into the database file. */
  checkpoint(): void {
    this.#db.checkpoint();
  }

  close(): void {
    this.#db.close();
  }
}
