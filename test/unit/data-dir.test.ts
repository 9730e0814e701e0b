import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirLock, DataDirLockedError, prepareDataDir } from '../../src/store/data-dir.js';

test('one lock per data directory; probing it (also from the holder process) neither takes nor frees it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-lock-'));
  try {
    prepareDataDir(dir);
    assert.deepEqual(DataDirLock.probe(dir), { locked: false });
    const lock = DataDirLock.acquire(dir);
    assert.equal(readFileSync(join(dir, 'outpost.pid'), 'utf8').trim(), String(process.pid));
    assert.deepEqual(DataDirLock.probe(dir), { locked: true, pid: process.pid });
    assert.deepEqual(DataDirLock.probe(dir), { locked: true, pid: process.pid }, 'still held after a probe');
    assert.throws(() => DataDirLock.acquire(dir), (err: unknown) => err instanceof DataDirLockedError && err.message.includes(dir) && err.holderPid === process.pid);
    lock.release();
    assert.deepEqual(DataDirLock.probe(dir), { locked: false });
    DataDirLock.acquire(dir).release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
