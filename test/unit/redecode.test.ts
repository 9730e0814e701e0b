// Re-decode jobs in-process on a real SQLite file: what they replace, what they leave alone, and
// what they say they could not reach.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openTestCore } from '../helpers/core.js';
import { systemClock } from '../../src/core/time.js';
import { inspect } from '../helpers/sqlite.js';
import { setDeviceCodec } from '../../src/device-codecs/device-codecs.js';
import { RedecodeRunner, redecodeView } from '../../src/device-codecs/redecode.js';
import { encodeCborCommand } from '../../src/codec/index.js';
import type { ServiceError } from '../../src/core/errors.js';

const scaled = (divisor: number) => ({ uplink: { format: 'abcl', document: { sense: [{ asset: 'level', value: { byte: 0, type: 'uint', calculation: `val / ${divisor}` } }] } } });

async function setup() {
  const opened = openTestCore('redecode');
  const { store, catalog, pipeline, codecs, logger } = opened.core;
  const { device } = store.devices.create({ name: 'tank' }, Date.now());
  store.assets.create({ deviceId: device.id, name: 'level', title: null, description: null, is: 'sensor', profile: { type: 'number', maximum: 100 } }, Date.now());
  catalog.invalidate();
  const announced: Array<{ assetId: string; valueJson: string }> = [];
  const runner = new RedecodeRunner({ store, catalog, codecs, clock: systemClock, logger, batchSize: 3, announce: (_d, changes) => announced.push(...changes) });
  const setCodec = async (body: unknown) => {
    await setDeviceCodec(store, codecs, systemClock, catalog.device(device.id)!, body);
    catalog.invalidate();
  };
  const send = (byte: number, at: number) =>
    pipeline.ingest({ deviceId: device.id, via: 'test', payload: { bytes: Uint8Array.of(byte), format: 'codec' }, label: 'uplink', topic: `device/${device.id}/state`, receivedAt: at });
  const peek = inspect(store.path);
  const values = () => (peek.prepare('SELECT value FROM states ORDER BY at').pluck().all() as string[]).map(Number);
  const run = async (range = { from: null as number | null, to: null as number | null }) => {
    runner.start(catalog.device(device.id)!, range);
    return runner.running(device.id)!;
  };
  return {
    store,
    catalog,
    pipeline,
    device,
    runner,
    announced,
    setCodec,
    send,
    values,
    run,
    close: async () => {
      await runner.stop();
      await opened.close();
    },
  };
}

test('a re-decode replaces states uplink by uplink, keeps the old ones where the new codec fails, and announces the latest once', async () => {
  const t = await setup();
  try {
    await t.setCodec(scaled(10));
    const t0 = Date.now() - 60_000;
    for (let i = 0; i < 10; i++) await t.send(i * 20, t0 + i * 1000); // 0 … 180: level 0 … 18
    assert.deepEqual(t.values(), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    // The "fix" divides by 1: 0 … 180, so the uplinks above 100 now break the profile's maximum.
    await t.setCodec(scaled(1));
    const job = await t.run();
    assert.equal(job.status, 'done');
    assert.deepEqual([job.done, job.total, job.replaced, job.failed], [10, 10, 6, 4]);
    assert.deepEqual(t.values(), [0, 20, 40, 60, 80, 100, 12, 14, 16, 18]);
    const view = redecodeView(job);
    assert.equal(view.problems.length, 4);
    assert.match(view.problems[0]!.error, /asset "level".*maximum|<= 100/);
    // The newest uplink kept its old state, so the latest did not change: nothing announced.
    assert.deepEqual(t.announced, []);
    assert.equal(t.store.states.latest(t.catalog.assetByName(t.device.id, 'level')!.id)?.valueJson, '18');
  } finally {
    await t.close();
  }
});

test('a range limits the re-decode; states of pruned raw uplinks are reported as not covered', async () => {
  const t = await setup();
  try {
    await t.setCodec(scaled(10));
    const t0 = Date.now() - 60_000;
    for (let i = 0; i < 10; i++) await t.send(i, t0 + i * 1000);
    t.store.uplinks.prune(6); // the 4 oldest raw uplinks go; their states stay in history
    await t.setCodec(scaled(1));
    const job = await t.run({ from: t0 + 2000, to: t0 + 7000 });
    assert.deepEqual([job.status, job.done, job.replaced, job.failed], ['done', 4, 4, 0]);
    assert.deepEqual(t.values(), [0, 0.1, 0.2, 0.3, 4, 5, 6, 7, 0.8, 0.9]);
    const view = redecodeView(job);
    assert.deepEqual(view.notCovered && { from: view.notCovered.from, to: view.notCovered.to, states: view.notCovered.states }, {
      from: new Date(t0 + 2000).toISOString(),
      to: new Date(t0 + 3000).toISOString(),
      states: 2,
    });
    assert.match(view.notCovered!.reason, /no longer kept/);
    // The whole range: the newest uplink is corrected, so the latest is announced once.
    const all = await t.run();
    assert.equal(all.done, 6);
    assert.deepEqual(t.announced.map((c) => c.valueJson), ['9']);
  } finally {
    await t.close();
  }
});

test('a second re-decode of the same device is refused while one runs; CBOR declared by the door is left alone', async () => {
  const t = await setup();
  try {
    await t.setCodec(scaled(10));
    await t.send(50, Date.now() - 1000);
    // An HTTP application/cbor state: the door fixed its format, so no codec change can re-read it.
    await t.pipeline.ingest({ deviceId: t.device.id, via: 'http', payload: { bytes: encodeCborCommand({ level: 7 }).bytes, format: 'cbor' }, label: 'body', topic: 'PUT' });
    await t.setCodec(scaled(1));
    t.runner.start(t.catalog.device(t.device.id)!, { from: null, to: null });
    assert.throws(() => t.runner.start(t.catalog.device(t.device.id)!, { from: null, to: null }), (err: ServiceError) => err.code === 'REDECODE_RUNNING' && err.status === 409);
    const job = await t.runner.running(t.device.id)!;
    assert.deepEqual([job.done, job.total, job.replaced], [1, 1, 1]);
    assert.deepEqual(t.values().sort((a, b) => a - b), [7, 50]);
  } finally {
    await t.close();
  }
});

test('raw uplinks are bounded by count and by age', async () => {
  const t = await setup();
  try {
    await t.setCodec(scaled(10));
    const now = Date.now();
    for (let i = 0; i < 6; i++) await t.send(i, now - (6 - i) * 86_400_000);
    assert.equal(t.store.uplinks.prune(5, now - 3.5 * 86_400_000), 3);
    assert.equal(t.store.uplinks.list(t.device.id, 10).data.length, 3);
    assert.equal(t.store.uplinks.prune(2), 1);
  } finally {
    await t.close();
  }
});
