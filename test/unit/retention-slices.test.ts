// The history pruner's periodic run in slices (src/ops/retention.ts): trimming an asset at its limit
// steps through its newest index entries, so a run over many busy assets is spread over short slices
// with pauses between them instead of holding the event loop once for all of them. Real SQLite file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/store/store.js';
import { HistoryPruner } from '../../src/ops/retention.js';
import { createLogger } from '../../src/ops/logger.js';
import { systemClock } from '../../src/core/time.js';
import type { StatePipeline } from '../../src/ingest/ingest.js';

const ASSETS = 12;
const STATES = 20;
const KEEP = 5;

function setup(slices: { sliceMs?: number; pauseMs?: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-prune-slices-'));
  const store = Store.open(dir);
  const now = Date.now();
  const { device } = store.devices.create({ name: 'meter' }, now);
  const ids: string[] = [];
  for (let a = 0; a < ASSETS; a++) ids.push(store.assets.create({ deviceId: device.id, name: `a${a}`, title: null, description: null, is: 'sensor', profile: { type: 'integer' } }, now).id);
  store.transaction(() => {
    for (let i = 0; i < STATES; i++) store.states.write(ids.map((assetId) => ({ assetId, at: now - (STATES - i) * 1000, valueJson: String(i), receivedAt: now })));
  });
  // The pruner learns which assets to trim from the pipeline's state events.
  const pipeline = new EventEmitter();
  const limits = { historyPerAsset: KEEP, historyDays: 36_500, rawUplinksPerDevice: 1000, rawUplinkDays: 36_500 };
  const pruner = new HistoryPruner(store, pipeline as unknown as StatePipeline, systemClock, limits, createLogger('silent'), slices);
  for (const id of ids) pipeline.emit('state', { asset: { id } });
  const held = () => ids.map((id) => store.states.history(id, { limit: 1000 }).data.length);
  const close = () => {
    pruner.stop();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { pruner, held, close };
}

test('a periodic run trims what fits in a slice, and the other assets in the slices after a pause', async () => {
  // No time at all for a slice: each one trims a single asset.
  const t = setup({ sliceMs: 0, pauseMs: 5 });
  try {
    assert.equal(t.pruner.start(), STATES - KEEP, 'the first slice trimmed one asset');
    assert.deepEqual(t.held().sort((a, b) => a - b), [KEEP, ...Array<number>(ASSETS - 1).fill(STATES)]);
    assert.equal(t.pruner.running, true, 'the rest waits for the next slices');
    assert.equal(t.pruner.start(), 0, 'a run still going is not started again');
    const deadline = Date.now() + 5000;
    while (t.pruner.running && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.equal(t.pruner.running, false);
    assert.deepEqual(t.held(), Array<number>(ASSETS).fill(KEEP), 'every asset trimmed to its newest 5');
  } finally {
    t.close();
  }
});

test('with the default slice a run over a few small assets is done in one slice', () => {
  const t = setup({});
  try {
    assert.equal(t.pruner.start(), ASSETS * (STATES - KEEP));
    assert.equal(t.pruner.running, false);
    assert.deepEqual(t.held(), Array<number>(ASSETS).fill(KEEP));
  } finally {
    t.close();
  }
});
