import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Flushes a database's write-ahead log to the disk on libuv's thread pool, one flush at a time,
 * for commits made without waiting for the disk (docs/architecture.md, "Group commit"). A flush
 * covers every commit written before it started; a request made while one runs waits for the next,
 * which then serves every request made meanwhile. On a medium whose flush takes milliseconds (an SD
 * card) the event loop keeps working during it instead of sitting in the commit.
 */
export class WalSync {
  readonly #walPath: string;
  #fd: number | undefined;
  #running = false;
  #closed = false;
  #waiting: Waiter[] = [];

  /** `databasePath`: the database file; its log is `<path>-wal`. */
  constructor(databasePath: string) {
    this.#walPath = `${databasePath}-wal`;
  }

  /** Settles once everything written to the log before this call is on the disk. */
  request(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      if (!this.#running) this.#start();
    });
  }

  #start(): void {
    const batch = this.#waiting;
    this.#waiting = [];
    let fd: number;
    try {
      // Opened once: the log exists after the first commit in WAL mode and keeps its inode while
      // this connection is open (a TRUNCATE checkpoint empties it in place).
      fd = this.#fd ??= openSync(this.#walPath, 'r');
    } catch (err) {
      for (const w of batch) w.reject(err as Error);
      return;
    }
    this.#running = true;
    fdatasync(fd, (err) => {
      this.#running = false;
      for (const w of batch) {
        if (err) w.reject(err);
        else w.resolve();
      }
      if (this.#closed) this.#closeFile();
      else if (this.#waiting.length > 0) this.#start();
    });
  }

  /**
   * Before the connection closes: flushes at once what is still waiting (the close itself does
   * not flush a log other connections keep open) and settles every request.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const waiting = this.#waiting;
    this.#waiting = [];
    if (waiting.length > 0) {
      let failure: Error | undefined;
      try {
        if (this.#fd === undefined) this.#fd = openSync(this.#walPath, 'r');
        fdatasyncSync(this.#fd);
      } catch (err) {
        failure = err as Error;
      }
      for (const w of waiting) {
        if (failure) w.reject(failure);
        else w.resolve();
      }
    }
    // A flush in flight closes the file when it is done.
    if (!this.#running) this.#closeFile();
  }

  #closeFile(): void {
    if (this.#fd === undefined) return;
    try {
      closeSync(this.#fd);
    } catch {
      // already gone: nothing left to flush through it
    }
    this.#fd = undefined;
  }
}
