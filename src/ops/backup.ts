import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { MIGRATIONS } from '../store/migrations.js';
import { DataDirLock, DataDirLockedError, prepareDataDir } from '../store/data-dir.js';
import { daemonHolding } from './daemon-presence.js';

/** A backup or restore that cannot go ahead; `code` is for scripts, the message for people. */
export class BackupError extends Error {
  override name = 'BackupError';
  constructor(
    readonly code: 'NO_DATABASE' | 'TARGET_EXISTS' | 'DAEMON_RUNNING' | 'NOT_A_BACKUP' | 'BACKUP_CORRUPT' | 'BACKUP_TOO_NEW' | 'BACKUP_FAILED',
    message: string,
  ) {
    super(message);
  }
}

export const DATABASE_FILE = 'outpost.db';

export interface BackupProgress {
  totalPages: number;
  remainingPages: number;
}

export interface BackupResult {
  file: string;
  bytes: number;
  pages: number;
  restarts: number;
}

// 1024 pages (4 MiB) per step keeps the event loop turning; see the restart note below.
const PAGES_PER_STEP = 1024;

/**
 * Copies the live database to `file` with SQLite's online backup API (docs/operations.md,
 * "Backup and restore"). Safe while the daemon runs and ingests: the copy is one consistent
 * snapshot. SQLite restarts a backup when another connection writes to the source between two
 * steps; a gateway under steady load would restart forever, so after one restart the rest is
 * copied in a single step (a read transaction: in WAL mode the daemon's writes carry on).
 * The copy is written beside `file` and renamed into place only after it passed `quick_check`.
 */
export async function backupDatabase(dataDir: string, file: string, onProgress: (p: BackupProgress) => void = () => {}): Promise<BackupResult> {
  const source = join(dataDir, DATABASE_FILE);
  if (!existsSync(source)) throw new BackupError('NO_DATABASE', `no database at ${source}`);
  if (existsSync(file)) throw new BackupError('TARGET_EXISTS', `${file} exists; choose a new file name (a backup never overwrites)`);
  const partial = `${file}.partial`;
  rmSync(partial, { force: true });
  const db = new BetterSqlite3(source, { fileMustExist: true, timeout: 5000 });
  let restarts = 0;
  let result: { totalPages: number; remainingPages: number };
  try {
    let lastRemaining = Infinity;
    let allAtOnce = false;
    result = await db.backup(partial, {
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
  } catch (err) {
    rmSync(partial, { force: true });
    throw new BackupError('BACKUP_FAILED', `backup failed: ${(err as Error).message}`);
  } finally {
    db.close();
  }
  try {
    const problem = checkDatabaseFile(partial);
    if (problem) throw new BackupError('BACKUP_FAILED', `the copy does not pass its check: ${problem}`);
    chmodSync(partial, 0o600);
    renameSync(partial, file);
  } catch (err) {
    rmSync(partial, { force: true });
    for (const suffix of ['-wal', '-shm']) rmSync(partial + suffix, { force: true });
    throw err;
  }
  onProgress({ totalPages: result.totalPages, remainingPages: 0 });
  return { file, bytes: statSync(file).size, pages: result.totalPages, restarts };
}

/**
 * Why `path` is not a usable Outpost database, or undefined when it is: opens, passes
 * `PRAGMA quick_check`, has Outpost's tables and a schema this version knows.
 */
export function checkDatabaseFile(path: string): string | undefined {
  let db: Database;
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

export interface RestoreResult {
  restoredFrom: string;
  database: string;
  /** Where the database that was there before now is (null when there was none). */
  previous: string | null;
}

/**
 * Replaces the data dir's database with a backup. Refuses while a daemon runs on the data dir
 * (it would keep writing to the replaced file) and refuses a file that does not pass
 * checkDatabaseFile. The database that was there is kept beside it, never deleted.
 */
export async function restoreDatabase(dataDir: string, file: string, now: Date = new Date()): Promise<RestoreResult> {
  const holder = await daemonHolding(dataDir);
  if (holder) throw new BackupError('DAEMON_RUNNING', `a daemon runs on ${dataDir}${holder.pid ? ` (pid ${holder.pid})` : ''}: stop it first (systemctl stop outpost)`);
  if (!existsSync(file)) throw new BackupError('NOT_A_BACKUP', `${file} does not exist`);
  const problem = checkDatabaseFile(file);
  if (problem) throw new BackupError(problem.includes('quick_check') ? 'BACKUP_CORRUPT' : problem.includes('newer') ? 'BACKUP_TOO_NEW' : 'NOT_A_BACKUP', `${file} ${problem}`);

  // Restoring onto a new machine: the data dir may not exist yet (owner-only, like the daemon makes it).
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Hold the daemon's own lock while files are swapped: a daemon started meanwhile exits (code 3).
  let lock: DataDirLock;
  try {
    lock = DataDirLock.acquire(dataDir);
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new BackupError('DAEMON_RUNNING', `a daemon runs on ${dataDir}${err.holderPid ? ` (pid ${err.holderPid})` : ''}: stop it first (systemctl stop outpost)`);
    throw err;
  }
  try {
    return await swapInBackup(dataDir, file, now);
  } finally {
    lock.release();
  }
}

async function swapInBackup(dataDir: string, file: string, now: Date): Promise<RestoreResult> {
  const database = join(dataDir, DATABASE_FILE);
  const incoming = `${database}.restoring`;
  rmSync(incoming, { force: true });
  // Copied with the backup API, not cp: a backup file with its own -wal next to it is read whole.
  const from = new BetterSqlite3(file, { readonly: true, fileMustExist: true });
  try {
    await from.backup(incoming);
  } finally {
    from.close();
  }
  chmodSync(incoming, 0o600);

  let previous: string | null = null;
  if (existsSync(database)) {
    previous = `${database}.before-restore-${now.toISOString().replace(/[:.]/g, '-')}`;
    // Fold the WAL into the file first so the kept copy is complete on its own.
    try {
      const old = new BetterSqlite3(database, { fileMustExist: true });
      old.pragma('wal_checkpoint(TRUNCATE)');
      old.close();
    } catch {
      // A damaged database may not checkpoint: its -wal and -shm are kept beside it below.
    }
    for (const suffix of ['', '-wal', '-shm']) {
      if (existsSync(database + suffix)) renameSync(database + suffix, previous + suffix);
    }
  }
  renameSync(incoming, database);
  prepareDataDir(dataDir);
  return { restoredFrom: file, database, previous };
}
