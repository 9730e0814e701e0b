// The group commit's window (src/ingest/state-writer.ts): a burst that arrives over several turns of
// the event loop (a UDP socket hands over at most 32 datagrams per turn) is one transaction, a lone
// write does not wait for the window, and writes that never stop still commit every window.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StateWriter } from '../../src/ingest/state-writer.js';
import { openCounterStore } from '../helpers/counter-store.js';
import type { ServiceError } from '../../src/core/errors.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup() {
  const { store, assetId, state, close } = openCounterStore('commit-window');
  const commits: number[] = [];
  const stored = () => store.states.history(assetId, { limit: 100_000 }).data.length;
  return {
    store,
    commits,
    state,
    stored,
    writer: (windowMs: number) => new StateWriter(store, { windowMs, onCommit: (count) => commits.push(count) }),
    close,
  };
}

test('writes arriving over consecutive turns of the event loop commit as one transaction, none settled before it', async () => {
  const t = setup();
  try {
    const writer = t.writer(1000);
    const pending: Array<Promise<void>> = [];
    let settled = 0;
    for (let turn = 0; turn < 5; turn++) {
      // Two writes per turn, as a socket hands over several messages at once.
      for (let i = 0; i < 2; i++) pending.push(writer.write([t.state()]).then(() => void settled++));
      await nextTurn();
      if (turn < 4) assert.equal(settled, 0, `nothing acknowledged before the commit (turn ${turn})`);
    }
    await Promise.all(pending);
    assert.deepEqual(t.commits, [10], 'one commit for the whole burst (the old writer made one per turn)');
    assert.equal(t.stored(), 10);
  } finally {
    t.close();
  }
});

test('a lone write commits at once, without waiting for the window', async () => {
  const t = setup();
  try {
    const writer = t.writer(5000);
    const started = performance.now();
    await writer.write([t.state()]);
    const took = performance.now() - started;
    assert.ok(took < 1000, `a lone write took ${took.toFixed(1)} ms with a 5 s window`);
    assert.deepEqual(t.commits, [1]);
  } finally {
    t.close();
  }
});

test('writes that never stop still commit once per window: no write waits much longer than the window', async () => {
  const t = setup();
  try {
    const windowMs = 20;
    const writer = t.writer(windowMs);
    const waits: number[] = [];
    const pending: Array<Promise<void>> = [];
    const until = performance.now() + 300;
    while (performance.now() < until) {
      const at = performance.now();
      pending.push(writer.write([t.state()]).then(() => void waits.push(performance.now() - at)));
      await nextTurn();
    }
    await Promise.all(pending);
    assert.ok(t.commits.length >= 3, `${t.commits.length} commits in 300 ms of writes with a ${windowMs} ms window`);
    assert.equal(t.commits.reduce((a, b) => a + b, 0), pending.length, 'every write committed once');
    assert.equal(t.stored(), pending.length);
    // Generous margin: the machine may be busy; without the bound one batch would take all 300 ms.
    const longest = Math.max(...waits);
    assert.ok(longest < 200, `a write waited ${longest.toFixed(1)} ms for its commit with a ${windowMs} ms window`);
  } finally {
    t.close();
  }
});

test('a write whose asset or device was deleted while it waited is refused alone: the rest of its batch commits', async () => {
  const t = setup();
  try {
    const { store } = t;
    const writer = t.writer(1000);
    const now = Date.now();
    // A second device with an asset and a raw uplink of its own, both deleted before the batch commits.
    const { device: gone } = store.devices.create({ name: 'removed' }, now);
    const goneAsset = store.assets.create({ deviceId: gone.id, name: 'level', title: null, description: null, is: 'sensor', profile: { type: 'integer' } }, now);
    const { device: other } = store.devices.create({ name: 'removed too' }, now);
    const before = writer.write([t.state()]);
    const stateOfGone = writer.write([{ assetId: goneAsset.id, at: now, valueJson: '7', receivedAt: now }]);
    const rawOfGone = writer.write([], () => {
      store.uplinks.record({ deviceId: other.id, at: now, payload: Uint8Array.of(1), port: 1, source: 'mqtt', decoded: true, error: null });
    });
    const after = writer.write([t.state()]);
    assert.equal(store.devices.delete(gone.id), true);
    assert.equal(store.devices.delete(other.id), true);
    await before;
    await after;
    await assert.rejects(stateOfGone, (err: ServiceError) => err.code === 'ASSET_NOT_FOUND' && /deleted/.test(err.message));
    await assert.rejects(rawOfGone, (err: ServiceError) => err.code === 'DEVICE_NOT_FOUND' && /deleted/.test(err.message));
    assert.equal(t.stored(), 2, "the other device's two states are stored");
    assert.equal(store.states.count(goneAsset.id), 0);
    assert.equal(store.uplinks.list(other.id, 10).data.length, 0, 'no raw uplink of a deleted device');
  } finally {
    t.close();
  }
});
