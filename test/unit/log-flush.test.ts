// The group commit's log flush off the event loop (src/store/wal-sync.ts, Database.transactionSyncedLater,
// src/ingest/state-writer.ts): a batch commits without waiting for the disk, its writers are settled
// only once the log is flushed, the next batch gathers meanwhile, and a failed flush refuses them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { StateWriter } from '../../src/ingest/state-writer.js';
import { WalSync } from '../../src/store/wal-sync.js';
import { Database } from '../../src/store/database.js';
import { isServiceError } from '../../src/core/errors.js';
import { openCounterStore } from '../helpers/counter-store.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Turns of the event loop until `ready`, failing after a bound (a writer that never flushes). */
async function turnsUntil(ready: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !ready(); i++) await nextTurn();
  assert.ok(ready(), `never happened: ${what}`);
}

function setup(synchronous: 'full' | 'normal' = 'full') {
  const { store, state, close } = openCounterStore('log-flush', { synchronous });
  /** What another connection sees committed (the CLI's view): independent of this connection's flush. */
  const committed = () => {
    const db = new BetterSqlite3(store.path, { readonly: true });
    try {
      return db.prepare('SELECT count(*) FROM states').pluck().get() as number;
    } finally {
      db.close();
    }
  };
  /** Holds every flush of the store's log until released (or failed), then runs the real one. */
  const gate = () => {
    const realSync = store.syncLog.bind(store);
    const held: Array<{ release: () => void; fail: (err: Error) => void }> = [];
    store.syncLog = () =>
      new Promise<void>((resolve, reject) => {
        held.push({ release: () => void realSync().then(resolve, reject), fail: reject });
      });
    return held;
  };
  return {
    store,
    state,
    committed,
    gate,
    close,
  };
}

test('a batch is committed before its log flush, and no writer is settled until the flush is done', async () => {
  const t = setup();
  try {
    const held = t.gate();
    const flushes: number[] = [];
    const writer = new StateWriter(t.store, { onFlush: (micros) => flushes.push(micros) });
    let settled = 0;
    const pending = [writer.write([t.state()]), writer.write([t.state()])].map((p) => p.then(() => void settled++));
    await turnsUntil(() => held.length > 0, 'a log flush');
    assert.equal(t.committed(), 2, 'the commit is done (visible to another connection)');
    for (let i = 0; i < 5; i++) await nextTurn();
    assert.equal(settled, 0, 'nothing acknowledged while the log is not flushed');
    held[0]!.release();
    await Promise.all(pending);
    assert.equal(settled, 2);
    await turnsUntil(() => flushes.length === 1, 'the flush reported (outpost_store_flush_seconds)');
  } finally {
    t.close();
  }
});

test('writes made during a flush gather into one batch that commits once the flush is done', async () => {
  const t = setup();
  try {
    const held = t.gate();
    const commits: number[] = [];
    const writer = new StateWriter(t.store, { onCommit: (count) => commits.push(count) });
    const first = writer.write([t.state()]);
    await turnsUntil(() => held.length > 0, 'a log flush');
    const later: Array<Promise<void>> = [];
    for (let turn = 0; turn < 4; turn++) {
      later.push(writer.write([t.state()]));
      for (let i = 0; i < 3; i++) await nextTurn();
    }
    assert.deepEqual(commits, [1], 'the next batch waits for the flush in flight');
    held[0]!.release();
    await first;
    await turnsUntil(() => held.length > 1, 'a second log flush');
    assert.deepEqual(commits, [1, 4], 'the four writes made meanwhile commit together');
    held[1]!.release();
    await Promise.all(later);
    assert.equal(t.committed(), 5);
  } finally {
    t.close();
  }
});

test('a flush the disk fails refuses the batch (503 STORAGE_UNAVAILABLE) and the writer goes on', async () => {
  const t = setup();
  try {
    const held = t.gate();
    const writer = new StateWriter(t.store);
    const refused = writer.write([t.state()]).then(
      () => assert.fail('acknowledged although the flush failed'),
      (err: unknown) => err,
    );
    await turnsUntil(() => held.length > 0, 'a log flush');
    held[0]!.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    const err = await refused;
    assert.ok(isServiceError(err) && err.code === 'STORAGE_UNAVAILABLE', `refused with ${String(err)}`);
    assert.match((err as Error).message, /EIO/);
    const next = writer.write([t.state()]);
    await turnsUntil(() => held.length > 1, 'a second log flush');
    held[1]!.release();
    await next;
  } finally {
    t.close();
  }
});

test('the connection is back to synchronous FULL after a batch; inside a transaction it is a savepoint; NORMAL has nothing to wait for', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-log-flush-db-'));
  try {
    const db = new Database(join(dir, 'outpost.db'));
    const synchronous = () => db.statement('PRAGMA synchronous').pluck().get();
    assert.equal(synchronous(), 2, 'FULL');
    db.transactionSyncedLater(() => db.statement('CREATE TABLE t (x INTEGER)').run());
    assert.equal(synchronous(), 2, 'FULL again after the commit');
    assert.throws(() => db.transactionSyncedLater(() => {
      throw new Error('rolled back');
    }));
    assert.equal(synchronous(), 2, 'FULL again after a rollback');
    assert.equal(db.transaction(() => db.transactionSyncedLater(() => 'nested')), 'nested');
    await db.syncLog();
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const normal = setup('normal');
  try {
    await new StateWriter(normal.store).write([normal.state()]);
    assert.equal(normal.committed(), 1);
  } finally {
    normal.close();
  }
  // No WAL (here: in memory): the commit keeps waiting for the disk itself, and there is no log to flush.
  const memory = new Database(':memory:');
  try {
    memory.transactionSyncedLater(() => memory.statement('CREATE TABLE t (x INTEGER)').run());
    assert.equal(memory.statement('PRAGMA synchronous').pluck().get(), 2);
    await memory.syncLog();
  } finally {
    memory.close();
  }
});

test('WalSync: requests made while a flush runs are served by one more flush; close settles what waits', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-wal-sync-'));
  try {
    const path = join(dir, 'db.sqlite');
    const db = new BetterSqlite3(path);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (x INTEGER)');
    const sync = new WalSync(path);
    const order: string[] = [];
    const a = sync.request().then(() => order.push('a'));
    const b = sync.request().then(() => order.push('b'));
    const c = sync.request().then(() => order.push('c'));
    await Promise.all([a, b, c]);
    assert.deepEqual(order, ['a', 'b', 'c']);
    const d = sync.request().then(() => order.push('d'));
    sync.close();
    await d;
    assert.equal(order.at(-1), 'd');
    await sync.request();
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
