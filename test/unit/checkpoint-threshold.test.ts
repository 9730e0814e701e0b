// The log's checkpoint threshold (Database.checkpointForBurst, src/ingest/state-writer.ts): a
// checkpoint runs inside the commit that crosses it, on the event loop, so between bursts the log is
// checkpointed at SQLite's 1 000 pages (short stalls), and only under a burst does it grow to 4 000
// (fewer copies of pages the next commits dirty again). Measured on the real log file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database, WAL_CHECKPOINT_PAGES } from '../../src/store/database.js';
import { BURST_WRITES, StateWriter } from '../../src/ingest/state-writer.js';
import { openCounterStore } from '../helpers/counter-store.js';

const PAGES_PER_COMMIT = 100;
const COMMITS = 30;

/**
 * The most frames the log of a fresh database ever held after `COMMITS` commits of about
 * `PAGES_PER_COMMIT` new pages each: the log file is reused from its start after a checkpoint and
 * never shrinks, so its size tells.
 */
async function largestLog(burst: boolean): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-checkpoint-'));
  const path = join(dir, 'outpost.db');
  const db = new Database(path);
  try {
    db.statement('CREATE TABLE pad (id INTEGER PRIMARY KEY, bytes BLOB NOT NULL)').run();
    const pageSize = db.statement('PRAGMA page_size').pluck().get() as number;
    const insert = db.statement('INSERT INTO pad (bytes) VALUES (?)');
    // Nearly a page each, so each row takes a page of its own.
    const row = Buffer.alloc(pageSize - 200, 0xa5);
    for (let c = 0; c < COMMITS; c++) {
      db.checkpointForBurst(burst);
      db.transactionSyncedLater(() => {
        for (let i = 0; i < PAGES_PER_COMMIT; i++) insert.run(row);
      });
      await db.syncLog();
    }
    assert.equal(db.statement('SELECT count(*) FROM pad').pluck().get(), COMMITS * PAGES_PER_COMMIT, 'every row committed');
    // Each frame of the log: a 24-byte header and a page.
    return Math.floor((statSync(`${path}-wal`).size - 32) / (pageSize + 24));
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('between bursts the log is checkpointed at 1 000 pages; under a burst it grows to 4 000 first', async () => {
  const steady = await largestLog(false);
  const burst = await largestLog(true);
  // Crossing the threshold checkpoints at the end of the commit that crossed it.
  assert.deepEqual(WAL_CHECKPOINT_PAGES, { steady: 1000, burst: 4000 });
  assert.ok(steady <= 1000 + PAGES_PER_COMMIT + 10, `steady: the log held ${steady} frames`);
  assert.ok(burst >= COMMITS * PAGES_PER_COMMIT, `burst: the log held ${burst} frames, not checkpointed below 4 000`);
});

test(`the group commit counts a batch of ${BURST_WRITES} writes or more as a burst, and a smaller one as steady`, async () => {
  const { store, state, assetId, close } = openCounterStore('checkpoint-burst');
  try {
    const told: boolean[] = [];
    const real = store.checkpointForBurst.bind(store);
    store.checkpointForBurst = (burst) => {
      told.push(burst);
      real(burst);
    };
    const writer = new StateWriter(store);
    const batch = async (writes: number) => {
      const pending: Array<Promise<void>> = [];
      for (let i = 0; i < writes; i++) pending.push(writer.write([state()]));
      await Promise.all(pending);
    };
    await batch(BURST_WRITES);
    await batch(BURST_WRITES - 1);
    await batch(1);
    await batch(BURST_WRITES + 10);
    assert.deepEqual(told, [true, false, false, true], 'one call before each commit, burst by the batch size');
    assert.equal(store.states.history(assetId, { limit: 1000 }).data.length, 3 * BURST_WRITES + 10, 'every state committed');
  } finally {
    close();
  }
});
