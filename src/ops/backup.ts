import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DATA_FILES, DataDirLock, DataDirLockedError, prepareDataDir } from '../store/data-dir.js';
import {
  SIDE_FILE_SUFFIXES,
  checkDatabaseFile,
  checkpointDatabaseFile,
  copyDatabaseFile,
  copyLiveDatabase,
  createPrivateFile,
  detachCopy,
  removeDatabaseFiles,
} from '../store/database-files.js';
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

export const DATABASE_FILE = DATA_FILES.database;

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

/**
 * Copies the live database to `file` with SQLite's online backup API (docs/operations.md,
 * "Backup and restore"). Safe while the daemon runs and ingests: the copy is one consistent
 * snapshot (copyLiveDatabase says how it copes with a source that keeps changing).
 * The copy is written beside `file`, owner-only from its creation, turned into one self-contained
 * file (no -wal/-shm beside it) and renamed into place only after it passed `quick_check`.
 */
export async function backupDatabase(dataDir: string, file: string, onProgress: (p: BackupProgress) => void = () => {}): Promise<BackupResult> {
  const source = join(dataDir, DATABASE_FILE);
  if (!existsSync(source)) throw new BackupError('NO_DATABASE', `no database at ${source}`);
  if (existsSync(file)) throw new BackupError('TARGET_EXISTS', `${file} exists; choose a new file name (a backup never overwrites)`);
  const partial = `${file}.partial`;
  // Left over from an interrupted backup: never ours to keep.
  removeDatabaseFiles(partial);
  let result: { totalPages: number; restarts: number };
  try {
    // Owner-only before the first page is copied (docs/security.md, "Data at rest").
    createPrivateFile(partial);
    result = await copyLiveDatabase(source, partial, onProgress);
    detachCopy(partial);
  } catch (err) {
    removeDatabaseFiles(partial);
    throw new BackupError('BACKUP_FAILED', `backup failed: ${(err as Error).message}`);
  }
  try {
    const problem = checkDatabaseFile(partial);
    if (problem) throw new BackupError('BACKUP_FAILED', `the copy does not pass its check: ${problem}`);
    renameSync(partial, file);
  } catch (err) {
    removeDatabaseFiles(partial);
    throw err;
  } finally {
    // The copy is one file; nothing of it stays beside the backup (a check may have made -wal/-shm).
    for (const suffix of SIDE_FILE_SUFFIXES) rmSync(partial + suffix, { force: true });
  }
  onProgress({ totalPages: result.totalPages, remainingPages: 0 });
  return { file, bytes: statSync(file).size, pages: result.totalPages, restarts: result.restarts };
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
export async function restoreDatabase(dataDir: string, file: string, options: { now?: Date; onReplacing?: () => void } = {}): Promise<RestoreResult> {
  const now = options.now ?? new Date();
  const holder = await daemonHolding(dataDir);
  if (holder) throw new BackupError('DAEMON_RUNNING', `a daemon runs on ${dataDir}${holder.pid ? ` (pid ${holder.pid})` : ''}: stop it first (systemctl stop outpost)`);
  // A FIFO, a device or a directory is refused before anything opens it for reading (a FIFO would block).
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
    // Only now, with every check passed and the lock held, is the database really about to be replaced.
    options.onReplacing?.();
    return await swapInBackup(dataDir, file, now);
  } finally {
    lock.release();
  }
}

async function swapInBackup(dataDir: string, file: string, now: Date): Promise<RestoreResult> {
  const database = join(dataDir, DATABASE_FILE);
  const incoming = `${database}.restoring`;
  removeDatabaseFiles(incoming);
  createPrivateFile(incoming);
  try {
    // Copied with the backup API, not cp: a backup file with its own -wal next to it is read whole.
    await copyDatabaseFile(file, incoming);
  } catch (err) {
    removeDatabaseFiles(incoming);
    throw err;
  }

  let previous: string | null = null;
  if (existsSync(database)) {
    previous = `${database}.before-restore-${now.toISOString().replace(/[:.]/g, '-')}`;
    // Fold the WAL into the file first so the kept copy is complete on its own.
    try {
      checkpointDatabaseFile(database);
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
