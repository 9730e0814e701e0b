import { chmodSync, closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { ConfigError } from '../core/config.js';

/** Names of the files Outpost keeps in a data directory. */
export const DATA_FILES = {
  database: 'outpost.db',
  lock: 'outpost.lock',
  pid: 'outpost.pid',
} as const;

/**
 * Creates the data directory owner-only (0700) and takes group/world access away from an existing
 * one and from the database files in it: they hold token hashes and every device's data.
 * An existing directory keeps its group bits, so an admin may still grant a service group read access.
 * A directory that cannot be created or written is a ConfigError naming `dataDir`.
 */
export function prepareDataDir(dataDir: string): void {
  const db = join(dataDir, DATA_FILES.database);
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    withoutWorldAccess(dataDir);
    // SQLite creates -wal and -shm with the database file's mode, so the database is created 0600 first.
    closeSync(openSync(db, 'a', 0o600));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!code || !['EACCES', 'EPERM', 'ENOTDIR', 'EEXIST', 'EROFS', 'EISDIR', 'ENOENT', 'ENOSPC'].includes(code)) throw err;
    throw new ConfigError(`config key dataDir: cannot use ${dataDir} as the data directory (${code} on ${(err as NodeJS.ErrnoException).path ?? dataDir})`);
  }
  for (const suffix of ['', '-wal', '-shm']) withoutWorldAccess(db + suffix);
}

function withoutWorldAccess(path: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    return; // not created yet: SQLite gives it the database file's mode
  }
  if (mode & 0o007) chmodSync(path, mode & ~0o007);
}

/** Another daemon holds the data directory. */
export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError';
  readonly code = 'DATA_DIR_LOCKED';
  constructor(
    readonly dataDir: string,
    readonly holderPid: number | undefined,
  ) {
    super(
      `data directory ${dataDir} is in use by another outpost daemon${holderPid ? ` (pid ${holderPid})` : ''}; ` +
        'stop it first or give this one another --data directory (the CLI works beside a running daemon)',
    );
  }
}

/**
 * One daemon per data directory. Two daemons on one database would each keep their own retained
 * feed and caches and diverge, so the second one must not start.
 *
 * The lock is an OS-level one: Node has no flock/fcntl, but SQLite takes a POSIX advisory lock
 * on a file it opens, and a connection in exclusive locking mode that begins an exclusive
 * transaction keeps it until it closes. The kernel drops the lock when the process dies, also on
 * kill -9 or a power cut, so a stale lock can never keep the next start out (a pid file alone
 * could: after a reboot its pid may belong to another process). `outpost.pid` next to it only
 * names the holder for messages and tools; it is never trusted to decide.
 *
 * The lock file is never written to, so it stays empty and no journal is left behind.
 */
export class DataDirLock {
  readonly #db: Database;
  readonly #pidFile: string;

  private constructor(db: Database, pidFile: string) {
    this.#db = db;
    this.#pidFile = pidFile;
  }

  /** Takes the lock or throws DataDirLockedError. `dataDir` must exist (prepareDataDir). */
  static acquire(dataDir: string): DataDirLock {
    const lockPath = join(dataDir, DATA_FILES.lock);
    const pidFile = join(dataDir, DATA_FILES.pid);
    // Never open the lock file with node:fs: closing any descriptor of a file drops every POSIX
    // lock this process holds on it, so a probe from the daemon's own process would free its lock.
    const db = new BetterSqlite3(lockPath, { timeout: 0 });
    try {
      chmodSync(lockPath, 0o600);
      db.pragma('journal_mode = MEMORY');
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
    } catch (err) {
      db.close();
      if (isBusy(err)) throw new DataDirLockedError(dataDir, readPid(pidFile));
      throw err;
    }
    writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
    return new DataDirLock(db, pidFile);
  }

  /** Whether a daemon holds the directory now, and its pid if it wrote one (for tools such as restore). */
  static probe(dataDir: string): { locked: boolean; pid?: number } {
    try {
      DataDirLock.acquire(dataDir).release();
      return { locked: false };
    } catch (err) {
      if (err instanceof DataDirLockedError) return { locked: true, pid: err.holderPid };
      throw err;
    }
  }

  release(): void {
    if (!this.#db.open) return;
    // Only our own pid file: a holder that died by kill -9 leaves one that the next start overwrites.
    if (readPid(this.#pidFile) === process.pid) rmSync(this.#pidFile, { force: true });
    this.#db.close();
  }
}

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}
