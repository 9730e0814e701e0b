import type { Database } from 'better-sqlite3';

/**
 * Forward-only schema migrations. The schema version is SQLite's `user_version`; entry i moves the
 * database from version i to i+1, and the pending ones run in one transaction. Never edit a
 * released entry: add one.
 */
export const MIGRATIONS: ReadonlyArray<(db: Database) => void> = [
  (db) =>
    db.exec(`
      CREATE TABLE devices (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        title TEXT,
        description TEXT,
        payload_format TEXT NOT NULL DEFAULT 'auto',
        codec TEXT,
        created_on INTEGER NOT NULL,
        updated_on INTEGER NOT NULL
      );
      CREATE TABLE assets (
        id TEXT PRIMARY KEY,
        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        title TEXT,
        description TEXT,
        kind TEXT NOT NULL,
        profile TEXT NOT NULL,
        created_on INTEGER NOT NULL,
        updated_on INTEGER NOT NULL,
        UNIQUE (device_id, name)
      );
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        device_id TEXT REFERENCES devices(id) ON DELETE CASCADE,
        scopes TEXT NOT NULL DEFAULT '',
        created_on INTEGER NOT NULL,
        revoked_on INTEGER
      );
      CREATE INDEX tokens_device ON tokens(device_id);
      -- History: seq orders states received at the same 'at' (ties go to the last received).
      CREATE TABLE states (
        seq INTEGER PRIMARY KEY,
        asset_id TEXT NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
        at INTEGER NOT NULL,
        value TEXT NOT NULL,
        received_at INTEGER NOT NULL
      );
      CREATE INDEX states_asset_at ON states(asset_id, at, seq);
      CREATE INDEX states_at ON states(at);
      CREATE TABLE latest_states (
        asset_id TEXT PRIMARY KEY REFERENCES assets(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        value TEXT NOT NULL
      );
      CREATE TABLE commands (
        seq INTEGER PRIMARY KEY,
        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
        asset_id TEXT REFERENCES assets(id) ON DELETE CASCADE,
        value TEXT NOT NULL,
        meta TEXT,
        at INTEGER NOT NULL,
        source TEXT NOT NULL
      );
      CREATE INDEX commands_device ON commands(device_id, seq);
    `),
  // 2: raw uplinks (bytes as received, before any codec), bounded per device by the pruner.
  (db) =>
    db.exec(`
      CREATE TABLE raw_uplinks (
        seq INTEGER PRIMARY KEY,
        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
        at INTEGER NOT NULL,
        payload BLOB NOT NULL,
        port INTEGER,
        source TEXT NOT NULL,
        decoded INTEGER NOT NULL,
        error TEXT
      );
      CREATE INDEX raw_uplinks_device ON raw_uplinks(device_id, seq);
    `),
  // 3: provenance. A state decoded from a raw uplink remembers that uplink and the codec version
  // that decoded it, so a re-decode knows what to replace; a raw uplink remembers the same codec
  // version and whether the door fixed its format (HTTP Content-Type: application/cbor).
  // Re-decode jobs are rows so they survive a restart and resume where the last commit left them.
  (db) =>
    db.exec(`
      ALTER TABLE states ADD COLUMN uplink_seq INTEGER;
      ALTER TABLE states ADD COLUMN codec TEXT;
      CREATE INDEX states_uplink ON states(uplink_seq) WHERE uplink_seq IS NOT NULL;
      ALTER TABLE raw_uplinks ADD COLUMN codec TEXT;
      ALTER TABLE raw_uplinks ADD COLUMN declared_format TEXT;
      CREATE INDEX raw_uplinks_at ON raw_uplinks(at);
      CREATE TABLE redecode_jobs (
        device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
        status TEXT NOT NULL,
        owner TEXT,
        range_from INTEGER,
        range_to INTEGER,
        codec TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        total INTEGER NOT NULL DEFAULT 0,
        done INTEGER NOT NULL DEFAULT 0,
        replaced INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        not_covered TEXT,
        problems TEXT,
        error TEXT,
        started_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        finished_at INTEGER
      );
    `),
  // 4: upstream sync. The gateway side's outbox (rows leave only after the upstream's PUBACK) and its
  // persisted counters; the central side's gateways, the gateway a device belongs to, and commands
  // waiting for an offline gateway. See docs/sync.md.
  (db) =>
    db.exec(`
      -- AUTOINCREMENT: a drained (empty) outbox must not hand out a seq again; the forwarder reads after the last one it took.
      CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        device_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        topic TEXT NOT NULL,
        payload BLOB NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX outbox_device ON outbox(device_id, seq);
      CREATE INDEX outbox_created ON outbox(created_at);
      CREATE TABLE outbox_counters (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        sent INTEGER NOT NULL DEFAULT 0,
        dropped INTEGER NOT NULL DEFAULT 0,
        rejected INTEGER NOT NULL DEFAULT 0,
        last_ack_at INTEGER,
        link TEXT NOT NULL DEFAULT 'off',
        updated_at INTEGER
      );
      INSERT INTO outbox_counters (id) VALUES (1);
      CREATE TABLE gateways (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_on INTEGER NOT NULL,
        last_seen INTEGER
      );
      ALTER TABLE devices ADD COLUMN gateway_id TEXT REFERENCES gateways(id) ON DELETE SET NULL;
      ALTER TABLE devices ADD COLUMN removed_at_gateway INTEGER;
      CREATE INDEX devices_gateway ON devices(gateway_id);
      ALTER TABLE tokens ADD COLUMN gateway_id TEXT REFERENCES gateways(id) ON DELETE CASCADE;
      CREATE TABLE gateway_commands (
        seq INTEGER PRIMARY KEY,
        gateway_id TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
        topic TEXT NOT NULL,
        payload TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX gateway_commands_gateway ON gateway_commands(gateway_id, seq);
    `),
  // 5: LoRaWAN devices with their current session, used OTAA DevNonces, and the downlink queue.
  (db) =>
    db.exec(`
      CREATE TABLE lorawan_devices (
        device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
        activation TEXT NOT NULL,
        dev_eui TEXT UNIQUE,
        join_eui TEXT,
        app_key BLOB,
        f_port INTEGER NOT NULL,
        class TEXT NOT NULL,
        dev_addr TEXT,
        nwk_s_key BLOB,
        app_s_key BLOB,
        f_cnt_up INTEGER NOT NULL,
        f_cnt_down INTEGER NOT NULL,
        joined_at INTEGER,
        last_uplink TEXT,
        settings_version INTEGER NOT NULL,
        updated_on INTEGER NOT NULL
      );
      CREATE INDEX lorawan_devices_addr ON lorawan_devices(dev_addr);
      CREATE TABLE lorawan_dev_nonces (
        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
        dev_nonce INTEGER NOT NULL,
        PRIMARY KEY (device_id, dev_nonce)
      ) WITHOUT ROWID;
      CREATE TABLE downlinks (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
        f_port INTEGER NOT NULL,
        confirmed INTEGER NOT NULL,
        payload BLOB NOT NULL,
        status TEXT NOT NULL,
        reason TEXT,
        f_cnt INTEGER,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        finished_at INTEGER
      );
      CREATE INDEX downlinks_device ON downlinks(device_id, finished_at, seq);
    `),
  // 6: LoRaWAN network server state that must survive a restart (docs/lpwan.md, "ADR" and "Class C"):
  // the MAC state (pending ACK, pending LinkADRReq, ADR history, data rate, TX power, RX parameters)
  // saved with the counters, the per-device ADR switch, the session an OTAA join offered until the
  // device first uses it, and how often a downlink was sent (Class C retries).
  (db) =>
    db.exec(`
      ALTER TABLE lorawan_devices ADD COLUMN mac_state TEXT;
      ALTER TABLE lorawan_devices ADD COLUMN adr INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE lorawan_devices ADD COLUMN next_dev_addr TEXT;
      ALTER TABLE lorawan_devices ADD COLUMN next_nwk_s_key BLOB;
      ALTER TABLE lorawan_devices ADD COLUMN next_app_s_key BLOB;
      ALTER TABLE lorawan_devices ADD COLUMN next_joined_at INTEGER;
      ALTER TABLE downlinks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
    `),
  // Outbox rows set aside (docs/sync.md, "What the upstream cannot take"): larger than the
  // upstream's message limit, or closing the link every time they are sent. Counted, not retried.
  (db) => db.exec('ALTER TABLE outbox_counters ADD COLUMN set_aside INTEGER NOT NULL DEFAULT 0'),
  // The last value commanded to each asset of a device (store/commanded-values.ts): a radio downlink
  // codec fills the assets a command leaves out from them (docs/codecs.md, "Previous values").
  (db) =>
    db.exec(`
      CREATE TABLE commanded_values (
        device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
        values_json TEXT NOT NULL,
        updated_at INTEGER NOT NULL
      ) WITHOUT ROWID;
    `),
  // Fleet (docs/sync.md, "Manage a fleet from the central"). At a central: each managed device's
  // definition per gateway, at a revision from one counter (so a gateway catches up in revision
  // order), and the revision that gateway last reported applied; a row outlives its device as a
  // tombstone (`deleted`) until the gateway applied the removal. At a gateway: the revision applied
  // per managed device (tombstones too), and what the LoRaWAN settings last applied were.
  (db) =>
    db.exec(`
      CREATE TABLE managed_devices (
        gateway_id TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
        device_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        content TEXT,
        deleted INTEGER NOT NULL DEFAULT 0,
        applied_revision INTEGER NOT NULL DEFAULT 0,
        applied_at INTEGER,
        PRIMARY KEY (gateway_id, device_id)
      ) WITHOUT ROWID;
      CREATE INDEX managed_devices_pending ON managed_devices(gateway_id, revision);
      CREATE TABLE fleet_revision (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
      INSERT INTO fleet_revision (id, last) VALUES (1, 0);
      CREATE TABLE managed_here (
        device_id TEXT PRIMARY KEY,
        revision INTEGER NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0,
        lorawan_digest TEXT,
        applied_at INTEGER NOT NULL
      ) WITHOUT ROWID;
    `),
  // LoRa Basics Stations allowed to connect to the radio door (store/stations.ts): the EUI, a name
  // and the SHA-256 of the station's token, like every other token.
  (db) =>
    db.exec(`
      CREATE TABLE stations (
        eui TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_on INTEGER NOT NULL
      ) WITHOUT ROWID;
    `),
  // A central on PostgreSQL no longer logs its catalog changes for a later push (docs/scale-out.md,
  // "How the nodes share"): a write is committed in PostgreSQL first and the node's SQLite is its
  // cache. The triggers and the log an earlier version created on such a node go (a no-op elsewhere).
  (db) =>
    db.exec(`
      DROP TRIGGER IF EXISTS replica_gateways_insert; DROP TRIGGER IF EXISTS replica_gateways_update; DROP TRIGGER IF EXISTS replica_gateways_delete;
      DROP TRIGGER IF EXISTS replica_devices_insert; DROP TRIGGER IF EXISTS replica_devices_update; DROP TRIGGER IF EXISTS replica_devices_delete;
      DROP TRIGGER IF EXISTS replica_assets_insert; DROP TRIGGER IF EXISTS replica_assets_update; DROP TRIGGER IF EXISTS replica_assets_delete;
      DROP TRIGGER IF EXISTS replica_tokens_insert; DROP TRIGGER IF EXISTS replica_tokens_update; DROP TRIGGER IF EXISTS replica_tokens_delete;
      DROP TRIGGER IF EXISTS replica_lorawan_devices_insert; DROP TRIGGER IF EXISTS replica_lorawan_devices_update; DROP TRIGGER IF EXISTS replica_lorawan_devices_delete;
      DROP TRIGGER IF EXISTS replica_commanded_values_insert; DROP TRIGGER IF EXISTS replica_commanded_values_update; DROP TRIGGER IF EXISTS replica_commanded_values_delete;
      DROP TRIGGER IF EXISTS replica_managed_devices_insert; DROP TRIGGER IF EXISTS replica_managed_devices_update; DROP TRIGGER IF EXISTS replica_managed_devices_delete;
      DROP TRIGGER IF EXISTS replica_fleet_revision_insert; DROP TRIGGER IF EXISTS replica_fleet_revision_update; DROP TRIGGER IF EXISTS replica_fleet_revision_delete;
      DROP TABLE IF EXISTS replica_changes;
    `),
  // The history index by asset is kept up to date in rounds (docs/architecture.md, "History
  // index"): a state is written with `unindexed` set (to its asset's slice), outside the partial
  // index states_asset_at, and a later write clears it for a whole slice at once, so a page of that
  // index is written once per round instead of once per commit. Readers take both parts. The table
  // is rebuilt without its foreign key on assets: SQLite looks a deleted asset's states up through
  // an index on asset_id that covers every row, which a partial one does not, so each asset
  // deletion would scan the whole history; the trigger deletes them through the two partial
  // indexes instead.
  (db) =>
    db.exec(`
      CREATE TABLE states_rebuilt (
        seq INTEGER PRIMARY KEY,
        asset_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        value TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        uplink_seq INTEGER,
        codec TEXT,
        unindexed INTEGER
      );
      INSERT INTO states_rebuilt (seq, asset_id, at, value, received_at, uplink_seq, codec)
        SELECT seq, asset_id, at, value, received_at, uplink_seq, codec FROM states ORDER BY seq;
      DROP TABLE states;
      ALTER TABLE states_rebuilt RENAME TO states;
      CREATE INDEX states_asset_at ON states(asset_id, at, seq) WHERE unindexed IS NULL;
      CREATE INDEX states_unindexed ON states(unindexed, seq) WHERE unindexed IS NOT NULL;
      CREATE INDEX states_at ON states(at);
      CREATE INDEX states_uplink ON states(uplink_seq) WHERE uplink_seq IS NOT NULL;
      CREATE TRIGGER assets_delete_states AFTER DELETE ON assets BEGIN
        DELETE FROM states WHERE asset_id = old.id AND unindexed IS NULL;
        DELETE FROM states WHERE seq IN (SELECT seq FROM states INDEXED BY states_unindexed WHERE unindexed IS NOT NULL AND asset_id = old.id);
      END;
      -- What the foreign key also did: a state of an asset that does not exist is refused.
      CREATE TRIGGER states_insert_asset BEFORE INSERT ON states
        WHEN NOT EXISTS (SELECT 1 FROM assets WHERE id = new.asset_id)
        BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: a state names an asset that does not exist'); END;
    `),
  // Raw uplinks' index by device is filled in rounds too, like the history's by asset (above), and
  // for the same reasons the table loses its foreign key on devices for two triggers.
  (db) =>
    db.exec(`
      CREATE TABLE raw_uplinks_rebuilt (
        seq INTEGER PRIMARY KEY,
        device_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        payload BLOB NOT NULL,
        port INTEGER,
        source TEXT NOT NULL,
        decoded INTEGER NOT NULL,
        error TEXT,
        codec TEXT,
        declared_format TEXT,
        unindexed INTEGER
      );
      INSERT INTO raw_uplinks_rebuilt (seq, device_id, at, payload, port, source, decoded, error, codec, declared_format)
        SELECT seq, device_id, at, payload, port, source, decoded, error, codec, declared_format FROM raw_uplinks ORDER BY seq;
      DROP TABLE raw_uplinks;
      ALTER TABLE raw_uplinks_rebuilt RENAME TO raw_uplinks;
      CREATE INDEX raw_uplinks_device ON raw_uplinks(device_id, seq) WHERE unindexed IS NULL;
      CREATE INDEX raw_uplinks_unindexed ON raw_uplinks(unindexed, seq) WHERE unindexed IS NOT NULL;
      CREATE INDEX raw_uplinks_at ON raw_uplinks(at);
      CREATE TRIGGER devices_delete_raw_uplinks AFTER DELETE ON devices BEGIN
        DELETE FROM raw_uplinks WHERE device_id = old.id AND unindexed IS NULL;
        DELETE FROM raw_uplinks WHERE seq IN (SELECT seq FROM raw_uplinks INDEXED BY raw_uplinks_unindexed WHERE unindexed IS NOT NULL AND device_id = old.id);
      END;
      CREATE TRIGGER raw_uplinks_insert_device BEFORE INSERT ON raw_uplinks
        WHEN NOT EXISTS (SELECT 1 FROM devices WHERE id = new.device_id)
        BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: a raw uplink names a device that does not exist'); END;
    `),
  // The rounds no longer touch the rows (docs/architecture.md, "History index"). Clearing a flag in
  // each row of a slice rewrote every table page of the last round once per slice (16 times),
  // since each page holds rows of every slice. Now the index by owner is a table of its own, and
  // the rows waiting for it are listed in a second one (by slice); a round moves a slice from one
  // to the other and leaves the rows as written. The writers insert into them (a trigger that
  // writes another table makes SQLite keep a statement journal for every insert); triggers keep
  // them in step with deletions. The column keeps the slice a row waited in (NULL: it went into
  // the index at once); its values from before stay, unused.
  (db) =>
    db.exec(`
      DROP TRIGGER assets_delete_states;
      DROP INDEX states_asset_at;
      DROP INDEX states_unindexed;
      ALTER TABLE states RENAME COLUMN unindexed TO slice;
      CREATE TABLE states_by_asset (asset_id TEXT NOT NULL, at INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (asset_id, at, seq)) WITHOUT ROWID;
      CREATE TABLE states_waiting (slice INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (slice, seq)) WITHOUT ROWID;
      INSERT INTO states_by_asset (asset_id, at, seq) SELECT asset_id, at, seq FROM states ORDER BY asset_id, at, seq;
      CREATE TRIGGER states_delete_index AFTER DELETE ON states BEGIN
        DELETE FROM states_by_asset WHERE asset_id = old.asset_id AND at = old.at AND seq = old.seq;
        DELETE FROM states_waiting WHERE slice = old.slice AND seq = old.seq;
      END;
      CREATE TRIGGER assets_delete_states AFTER DELETE ON assets BEGIN
        DELETE FROM states WHERE seq IN (SELECT seq FROM states_by_asset WHERE asset_id = old.id);
        DELETE FROM states WHERE seq IN (SELECT w.seq FROM states_waiting w JOIN states s ON s.seq = w.seq WHERE s.asset_id = old.id);
      END;

      DROP TRIGGER devices_delete_raw_uplinks;
      DROP INDEX raw_uplinks_device;
      DROP INDEX raw_uplinks_unindexed;
      ALTER TABLE raw_uplinks RENAME COLUMN unindexed TO slice;
      CREATE TABLE raw_uplinks_by_device (device_id TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (device_id, seq)) WITHOUT ROWID;
      CREATE TABLE raw_uplinks_waiting (slice INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (slice, seq)) WITHOUT ROWID;
      INSERT INTO raw_uplinks_by_device (device_id, seq) SELECT device_id, seq FROM raw_uplinks ORDER BY device_id, seq;
      CREATE TRIGGER raw_uplinks_delete_index AFTER DELETE ON raw_uplinks BEGIN
        DELETE FROM raw_uplinks_by_device WHERE device_id = old.device_id AND seq = old.seq;
        DELETE FROM raw_uplinks_waiting WHERE slice = old.slice AND seq = old.seq;
      END;
      CREATE TRIGGER devices_delete_raw_uplinks AFTER DELETE ON devices BEGIN
        DELETE FROM raw_uplinks WHERE seq IN (SELECT seq FROM raw_uplinks_by_device WHERE device_id = old.id);
        DELETE FROM raw_uplinks WHERE seq IN (SELECT w.seq FROM raw_uplinks_waiting w JOIN raw_uplinks u ON u.seq = w.seq WHERE u.device_id = old.id);
      END;
    `),
  // Less work for every state and raw uplink written (docs/architecture.md, "History index"):
  // - no index by time: retention by age reads each asset's range of states_by_asset, and raw
  //   uplinks (whose `at` is when they came) in the order received;
  // - no trigger checking that a state's asset exists: the group commit's latest-state upsert
  //   refuses it through the foreign key of latest_states, in the same transaction, and the one
  //   other writer (re-decode) checks in its INSERT. The raw uplinks' trigger stays: nothing else
  //   checks their device.
  (db) =>
    db.exec(`
      DROP INDEX states_at;
      DROP INDEX raw_uplinks_at;
      DROP TRIGGER states_insert_asset;
    `),
  // The rows waiting for an index filled in rounds are listed in the writer's memory, not in a
  // table of their own (three fewer rows written per uplink); what other processes and a restart
  // need is each slice's watermark (docs/architecture.md, "History index"). What waited goes into
  // the index first; each watermark starts at the table's largest seq. The raw uplinks' device is
  // checked by their one writer (src/store/uplinks.ts), in the same transaction, not by a trigger.
  (db) =>
    db.exec(`
      DROP TRIGGER raw_uplinks_insert_device;
      INSERT OR IGNORE INTO states_by_asset (asset_id, at, seq) SELECT s.asset_id, s.at, s.seq FROM states_waiting w JOIN states s ON s.seq = w.seq;
      INSERT OR IGNORE INTO raw_uplinks_by_device (device_id, seq) SELECT u.device_id, u.seq FROM raw_uplinks_waiting w JOIN raw_uplinks u ON u.seq = w.seq;
      DROP TRIGGER states_delete_index;
      DROP TRIGGER assets_delete_states;
      DROP TRIGGER raw_uplinks_delete_index;
      DROP TRIGGER devices_delete_raw_uplinks;
      DROP TABLE states_waiting;
      DROP TABLE raw_uplinks_waiting;
      CREATE TABLE rounds_watermarks (tbl TEXT NOT NULL, slice INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tbl, slice)) WITHOUT ROWID;
      WITH RECURSIVE slices(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM slices WHERE n < 16)
        INSERT INTO rounds_watermarks (tbl, slice, seq)
          SELECT 'states', n, (SELECT coalesce(max(seq), 0) FROM states) FROM slices
          UNION ALL SELECT 'raw_uplinks', n, (SELECT coalesce(max(seq), 0) FROM raw_uplinks) FROM slices;
      CREATE TRIGGER states_delete_index AFTER DELETE ON states BEGIN
        DELETE FROM states_by_asset WHERE asset_id = old.asset_id AND at = old.at AND seq = old.seq;
      END;
      -- The waiting rows are the newest: those above the lowest watermark (deleting an indexed one twice does nothing).
      CREATE TRIGGER assets_delete_states AFTER DELETE ON assets BEGIN
        DELETE FROM states WHERE seq IN (SELECT seq FROM states_by_asset WHERE asset_id = old.id);
        DELETE FROM states WHERE seq > (SELECT min(seq) FROM rounds_watermarks WHERE tbl = 'states') AND asset_id = old.id;
      END;
      CREATE TRIGGER raw_uplinks_delete_index AFTER DELETE ON raw_uplinks BEGIN
        DELETE FROM raw_uplinks_by_device WHERE device_id = old.device_id AND seq = old.seq;
      END;
      CREATE TRIGGER devices_delete_raw_uplinks AFTER DELETE ON devices BEGIN
        DELETE FROM raw_uplinks WHERE seq IN (SELECT seq FROM raw_uplinks_by_device WHERE device_id = old.id);
        DELETE FROM raw_uplinks WHERE seq > (SELECT min(seq) FROM rounds_watermarks WHERE tbl = 'raw_uplinks') AND device_id = old.id;
      END;
    `),
];

export function schemaVersion(db: Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * The database was migrated by a newer Outpost (a downgrade after an upgrade): this one refuses it
 * untouched, since it cannot know what the newer schema means (docs/operations.md, "Upgrade").
 */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError';
  readonly code = 'SCHEMA_TOO_NEW';
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(`database schema version ${found} is newer than this Outpost supports (${supported}); upgrade Outpost`);
  }
}

/** Applies every pending migration; refuses a database written by a newer Outpost. */
export function migrate(db: Database): { from: number; to: number } {
  const from = schemaVersion(db);
  if (from > MIGRATIONS.length) throw new SchemaTooNewError(from, MIGRATIONS.length);
  // Every pending migration in one transaction: all or none, and one commit (one fsync) rather
  // than one per migration, which is most of the first start of a new data directory.
  if (from < MIGRATIONS.length) {
    db.transaction(() => {
      for (let version = from; version < MIGRATIONS.length; version++) MIGRATIONS[version]!(db);
      db.pragma(`user_version = ${MIGRATIONS.length}`);
    }).immediate();
  }
  return { from, to: MIGRATIONS.length };
}
