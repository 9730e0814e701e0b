import { closeSync, constants, fstatSync, openSync, rmSync, type Stats } from 'node:fs';
import BetterSqlite3, { type Database as SqliteHandle } from 'better-sqlite3';
import { MIGRATIONS } from './migrations.js';

/**
 * Work on database files other than through the open store: backup copies, a file about to be
 * restored, a data dir the daemon holds (doctor). Each function opens its own short-lived
 * connection, never runs migrations, and writes only where its name says so. They live here so
 * that only src/store speaks SQL (docs/architecture.md, "Store").
 */

export interface CopyProgress {
  totalPages: number;
  remainingPages: number;
}

// 1024 pages (4 MiB) per step keeps the event loop turning; see the restart note below.
const PAGES_PER_STEP = 1024;

/**
 * Copies the database at `source` to `target` with SQLite's online backup API: one consistent
 * snapshot, safe while another process writes. SQLite restarts a backup when another connection
 * writes to the source between two steps; a gateway under steady load would restart forever, so
 * after one restart the rest is copied in a single step (a read transaction: in WAL mode the
 * writers carry on).
 */
export async function copyLiveDatabase(source: string, target: string, onProgress: (p: CopyProgress) => void): Promise<{ totalPages: number; restarts: number }> {
  const db = new BetterSqlite3(source, { fileMustExist: true, timeout: 5000 });
  let restarts = 0;
  try {
    let lastRemaining = Infinity;
    let allAtOnce = false;
    const result = await db.backup(target, {
      progress: ({ totalPages, remainingPages }) => {
        if (remainingPages > lastRemaining) {
          restarts++;
          allAtOnce = true;
        }
        lastRemaining = remainingPages;
        onProgress({ totalPages, remainingPages });
        return allAtOnce ? Math.max(totalPages, 1) * 2 : PAGES_PER_STEP;
      },
    });
    return { totalPages: result.totalPages, restarts };
  } finally {
    db.close();
  }
}

/** The files SQLite may keep beside a database: its rollback journal, write-ahead log and shared-memory index. */
export const SIDE_FILE_SUFFIXES = ['-journal', '-wal', '-shm'] as const;

/**
 * Creates `path` empty and owner-only (0600) for a copy to be written into. SQLite gives the
 * journal, -wal and -shm files it makes beside a database the database file's own mode, so they
 * are owner-only too; created by SQLite itself the file would be 0644 (the umask's) while the
 * whole database, keys included, is copied into it. Refuses a path that exists (O_EXCL, which also
 * refuses a symlink planted there).
 */
export function createPrivateFile(path: string): void {
  closeSync(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
}

/** Removes a database file and whatever SQLite left beside it. */
export function removeDatabaseFiles(path: string): void {
  rmSync(path, { force: true });
  for (const suffix of SIDE_FILE_SUFFIXES) rmSync(path + suffix, { force: true });
}

/**
 * Turns a fresh copy into one self-contained file: the copy carries its source's WAL mode, so
 * every later open (our own check, `sqlite3`, a restore) would make `-wal` and `-shm` files beside
 * it, and a read-only open leaves them there. In rollback-journal mode it opens on its own; a
 * restored database is switched back to WAL when the daemon opens it.
 */
export function detachCopy(path: string): void {
  const db = new BetterSqlite3(path, { fileMustExist: true });
  try {
    db.pragma('journal_mode = DELETE');
  } finally {
    db.close();
  }
}

/**
 * Why `path` cannot be a database file, or undefined: it must be a regular file. A FIFO would
 * block the reader until some writer came, a device or a directory is nothing to read. Opened
 * non-blocking and checked on the open descriptor, so even a FIFO answers at once.
 */
export function notRegularFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'does not exist' : code === 'EISDIR' ? 'is a directory, not a database file' : `cannot be opened (${code ?? (err as Error).message})`;
  }
  try {
    const stats = fstatSync(fd);
    return stats.isFile() ? undefined : `is ${kindOf(stats)}, not a regular file: a backup is a file written by \`outpost backup\``;
  } finally {
    closeSync(fd);
  }
}

function kindOf(stats: Stats): string {
  if (stats.isFIFO()) return 'a FIFO (named pipe)';
  if (stats.isDirectory()) return 'a directory';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/** Copies a database file (with its own -wal, if any, read whole) to `target`, read-only on the source. */
export async function copyDatabaseFile(source: string, target: string): Promise<void> {
  const from = new BetterSqlite3(source, { readonly: true, fileMustExist: true });
  try {
    await from.backup(target);
  } finally {
    from.close();
  }
}

/** Folds a database file's write-ahead log into the file, so the file is complete on its own. */
export function checkpointDatabaseFile(path: string): void {
  const db = new BetterSqlite3(path, { fileMustExist: true });
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

/**
 * Why `path` is not a usable Outpost database, or undefined when it is: a regular file that
 * opens, passes `PRAGMA quick_check`, has Outpost's tables and a schema this version knows.
 */
export function checkDatabaseFile(path: string): string | undefined {
  const special = notRegularFile(path);
  if (special) return special;
  let db: SqliteHandle;
  try {
    db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    return `cannot be opened (${(err as Error).message})`;
  }
  try {
    const rows = db.pragma('quick_check') as Array<{ quick_check: string }>;
    if (rows.length !== 1 || rows[0]!.quick_check !== 'ok') return `quick_check reports: ${rows.slice(0, 5).map((r) => r.quick_check).join('; ')}`;
    const version = db.pragma('user_version', { simple: true }) as number;
    const tables = db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('devices', 'assets', 'tokens', 'states')").pluck().get() as number;
    if (tables !== 4 || version < 1) return 'is an SQLite database but not an Outpost one (no devices/assets/tokens/states tables)';
    if (version > MIGRATIONS.length) return `has schema version ${version}, newer than this Outpost knows (${MIGRATIONS.length}): upgrade Outpost first`;
    return undefined;
  } catch (err) {
    return `is not a readable SQLite database (${(err as Error).message})`;
  } finally {
    db.close();
  }
}

export interface ReceiveTimes {
  /** States looked at (the newest `window` by seq). */
  checked: number;
  /** Of those, received before `earliest`. */
  early: number;
  /** Of those, received after `latest`. */
  late: number;
}

/**
 * How many of the newest `window` states of the database at `path` were received outside
 * [earliest, latest]: the doctor's sign of a clock that was wrong. Read-only; bounded work on any
 * database size since it walks the primary key from the end.
 */
export function receiveTimesOutside(path: string, earliest: number, latest: number, window = 100_000): ReceiveTimes {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  try {
    const row = db
      .prepare(
        `SELECT count(*) AS n, sum(received_at < ?) AS early, sum(received_at > ?) AS late
           FROM states WHERE seq > (SELECT coalesce(max(seq), 0) FROM states) - ?`,
      )
      .get(earliest, latest, window) as { n: number; early: number | null; late: number | null };
    return { checked: row.n, early: row.early ?? 0, late: row.late ?? 0 };
  } finally {
    db.close();
  }
}
