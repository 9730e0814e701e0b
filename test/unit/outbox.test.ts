import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/store/store.js';
import { OutboxStore } from '../../src/store/outbox.js';

function withStore(work: (store: Store, outbox: OutboxStore) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-outbox-'));
  const store = Store.open(dir);
  try {
    work(store, store.outbox);
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const row = (deviceId: string, n: number, kind: 'state' | 'catalog' = 'state', createdAt = 1000) => ({
  deviceId,
  kind,
  topic: `device/${deviceId}/asset/a/state`,
  payload: Buffer.from(`{"value":${n}}`),
  createdAt,
});

test('outbox rows keep their order per device; a drained outbox never hands out a seq again', () => {
  withStore((_store, outbox) => {
    outbox.insert([row('d1', 0), row('d2', 0), row('d1', 1)]);
    const d1 = outbox.nextForDevice('d1', 0, 10);
    assert.deepEqual(d1.map((r) => r.payload.toString()), ['{"value":0}', '{"value":1}']);
    assert.deepEqual(outbox.devicesWithRows(), ['d1', 'd2']);
    const all = [...d1, ...outbox.nextForDevice('d2', 0, 10)];
    const removed = outbox.deleteRows(all.map((r) => r.seq));
    assert.equal(removed.rows, 3);
    assert.equal(outbox.totals().depth, 0);
    outbox.insert([row('d1', 2)]);
    // The forwarder reads after the last seq it took: a reused seq would be skipped.
    assert.equal(outbox.nextForDevice('d1', Math.max(...all.map((r) => r.seq)), 10).length, 1);
    assert.equal(outbox.deleteRows(all.map((r) => r.seq)).rows, 0, 'deleting twice removes nothing');
  });
});

test('bounds drop the oldest states but keep catalog rows; counters add up across writers', () => {
  withStore((_store, outbox) => {
    outbox.insert([row('d1', 0, 'catalog'), ...Array.from({ length: 10 }, (_, i) => row('d1', i, 'state', 1000 + i))]);
    const size = OutboxStore.rowBytes(row('d1', 0).topic, row('d1', 0).payload);
    const dropped = outbox.dropOldestStates(size * 3);
    assert.equal(dropped.rows, 3);
    const left = outbox.nextForDevice('d1', 0, 100);
    assert.equal(left[0]!.kind, 'catalog');
    assert.equal(left[1]!.payload.toString(), '{"value":3}');
    const aged = outbox.dropStatesBefore(1005);
    assert.equal(aged.rows, 2);
    assert.equal(outbox.totals().depth, 6);
    outbox.addCounts({ sent: 5, dropped: 3 }, 1);
    outbox.addCounts({ dropped: 2, rejected: 1, link: 'up' }, 2);
    const c = outbox.counters();
    assert.deepEqual([c.sent, c.dropped, c.rejected, c.link], [5, 5, 1, 'up']);
  });
});
