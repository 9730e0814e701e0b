// Under `upstream.whenFull: "reject-new"` a full outbox refuses only the states that do not fit, not
// the whole group-commit batch they came in (docs/sync.md): run on the daemon's own core (real
// SQLite file, real pipeline and group commit) with the outbox hooked in as `outpost run` hooks it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isServiceError } from '../../src/core/errors.js';
import { Outbox } from '../../src/sync/outbox.js';
import type { Uplink } from '../../src/ingest/uplinks.js';
import { openTestCore } from '../helpers/core.js';

test('a full outbox under reject-new refuses the write that does not fit; the other devices of the same batch are stored and acknowledged', async () => {
  const opened = openTestCore('outbox-reject-new');
  try {
    const { core } = opened;
    const { registry, pipeline, store } = core;
    const big = registry.createDevice({ name: 'chatty' }).device;
    const small = registry.createDevice({ name: 'quiet' }).device;
    const third = registry.createDevice({ name: 'another' }).device;
    for (const d of [big, small, third]) registry.createAsset(d.id, { name: 'note', is: 'sensor', profile: { type: 'string' } });
    const remote = (n: number) => `remoteDevice${String(n).padStart(12, '0')}`;
    const outbox = new Outbox({
      store,
      catalog: core.catalog,
      clock: core.clock,
      logger: core.logger,
      config: {
        ...core.config.upstream,
        url: 'mqtt://127.0.0.1:1',
        maxBytes: 3000,
        whenFull: 'reject-new',
        devices: { [big.id]: { id: remote(1), token: 't1' }, [small.id]: { id: remote(2), token: 't2' }, [third.id]: { id: remote(3), token: 't3' } },
      },
    });
    core.writer.addBatchHook(outbox);
    const state = (deviceId: string, value: string): Uplink => ({
      deviceId,
      via: 'test',
      label: 'body',
      topic: `PUT /device/${deviceId}/state`,
      payload: { states: { note: { value } } },
    });

    // 1 500 of the 3 000 bytes in use.
    await pipeline.ingest(state(big.id, 'a'.repeat(1400)));
    const before = outbox.status();
    assert.equal(before.depth, 1);

    // One batch (all started in the same turn): the chatty device's 2 000 bytes do not fit, the others' do.
    const outcomes = await Promise.allSettled([
      pipeline.ingest(state(small.id, 'hello')),
      pipeline.ingest(state(big.id, 'b'.repeat(2000))),
      pipeline.ingest(state(third.id, 'world')),
    ]);
    assert.equal(outcomes[0]!.status, 'fulfilled', 'the quiet device is acknowledged');
    assert.equal(outcomes[2]!.status, 'fulfilled', 'so is the third device, after the refused write');
    assert.equal(outcomes[1]!.status, 'rejected');
    const refusal = (outcomes[1] as PromiseRejectedResult).reason;
    assert.ok(isServiceError(refusal) && refusal.code === 'OUTBOX_FULL', String(refusal));
    assert.equal(refusal.retryAfter, 30);

    // Stored: the two that fit, in the history, the latest state and the outbox; the refused one nowhere.
    const latest = (id: string) => store.states.latest(core.catalog.assetByName(id, 'note')!.id);
    assert.equal(JSON.parse(latest(small.id)!.valueJson), 'hello');
    assert.equal(JSON.parse(latest(third.id)!.valueJson), 'world');
    assert.equal(JSON.parse(latest(big.id)!.valueJson), 'a'.repeat(1400), 'the refused state is not stored');
    assert.equal(store.states.count(core.catalog.assetByName(big.id, 'note')!.id), 1);
    const after = outbox.status();
    assert.equal(after.depth, 3);
    assert.equal(after.depth, outbox.rows.totals().depth, 'the in-memory totals match the table');
    assert.equal(after.bytes, outbox.rows.totals().bytes);
    assert.equal(after.rejected, 1, 'one state refused, counted once');
    assert.deepEqual(
      outbox.rows.nextForDevice(small.id, 0, 10).map((r) => r.payload.toString()),
      [`{"value":"hello","at":"${new Date(latest(small.id)!.at).toISOString()}"}`],
    );

    // A batch in which nothing fits is refused whole, each write with its refusal, counted per state.
    const full = await Promise.allSettled([pipeline.ingest(state(big.id, 'c'.repeat(2000))), pipeline.ingest(state(small.id, 'd'.repeat(2000)))]);
    assert.deepEqual(full.map((o) => o.status), ['rejected', 'rejected']);
    assert.equal(outbox.status().rejected, 3);
    assert.equal(outbox.status().depth, 3);
  } finally {
    await opened.close();
  }
});
