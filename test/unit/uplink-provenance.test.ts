// The raw uplink and the states decoded from it commit in one group-commit transaction, with
// provenance; real SQLite file, real codecs (ABCL and QuickJS), no daemon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openTestCore } from '../helpers/core.js';
import { inspect } from '../helpers/sqlite.js';
import { Store } from '../../src/store/store.js';
import { setDeviceCodec } from '../../src/device-codecs/device-codecs.js';
import type { AlongsideWrite } from '../../src/ingest/state-writer.js';
import { systemClock } from '../../src/core/time.js';
import type { ServiceError } from '../../src/core/errors.js';

const SCALE_DOC = { sense: [{ asset: 'temperature', value: { byte: 0, bytelength: 2, type: 'int', calculation: 'val / 10' } }] };
const PORT_SCRIPT = `function decodeUplink(input) {
  if (input.bytes.length === 0) return { errors: ['empty frame'] };
  return { data: { port: input.fPort, temperature: input.bytes[0] } };
}`;

async function setup() {
  const opened = openTestCore('provenance');
  const { store, catalog, pipeline, codecs } = opened.core;
  const { device } = store.devices.create({ name: 'sensor' }, Date.now());
  for (const name of ['temperature', 'port']) {
    store.assets.create({ deviceId: device.id, name, title: null, description: null, is: 'sensor', profile: { type: 'number' } }, Date.now());
  }
  catalog.invalidate();
  const refusals: string[] = [];
  pipeline.on('refused', (r) => refusals.push(r.code));
  return {
    store,
    catalog,
    pipeline,
    codecs,
    device,
    /** Raw bytes for the device's codec, as a radio door hands them over. */
    uplink: (raw: { payload: Uint8Array; fPort?: number; source: string; receivedAt: number }, alongside?: AlongsideWrite) =>
      pipeline.ingest({ deviceId: device.id, via: raw.source, payload: { bytes: raw.payload, format: 'codec' }, label: 'uplink', topic: `device/${device.id}/state`, fPort: raw.fPort, receivedAt: raw.receivedAt, alongside }),
    refusals,
    setCodec: async (body: unknown) => {
      await setDeviceCodec(store, codecs, systemClock, device, body);
      catalog.invalidate();
    },
    close: () => opened.close(),
  };
}

const uplinkRows = (store: Store) => inspect(store.path).prepare('SELECT seq, port, source, decoded, error, codec FROM raw_uplinks ORDER BY seq').all() as Array<Record<string, unknown>>;
const stateRows = (store: Store) => inspect(store.path).prepare('SELECT value, uplink_seq, codec FROM states ORDER BY seq').all() as Array<Record<string, unknown>>;

test('a decoded uplink and its states commit together; each state names its uplink and codec version', async () => {
  const t = await setup();
  try {
    await t.setCodec({ uplink: { format: 'abcl', document: SCALE_DOC } });
    const version = t.codecs.version(t.device)!;
    assert.match(version, /^abcl:[0-9a-f]{12}$/);
    const outcome = await t.uplink({ payload: Uint8Array.of(0x00, 0xd7), fPort: 5, source: 'gwmp:0102030405060708', receivedAt: 1_700_000_000_000 });
    assert.deepEqual({ ...outcome.states.temperature, assetId: undefined }, { assetId: undefined, value: 21.5, at: 1_700_000_000_000 });
    const [uplink] = uplinkRows(t.store);
    assert.deepEqual({ ...uplink, seq: undefined }, { seq: undefined, port: 5, source: 'gwmp:0102030405060708', decoded: 1, error: null, codec: version });
    assert.deepEqual(stateRows(t.store), [{ value: '21.5', uplink_seq: uplink!.seq, codec: version }]);
    const page = t.store.states.history(t.catalog.assetByName(t.device.id, 'temperature')!.id, { limit: 10 });
    assert.deepEqual(page.data[0], { at: 1_700_000_000_000, valueJson: '21.5', uplinkSeq: uplink!.seq, codec: version });
  } finally {
    await t.close();
  }
});

test('the fPort reaches a JS codec, and the same text is the same codec version', async () => {
  const t = await setup();
  try {
    await t.setCodec({ uplink: { format: 'js', script: PORT_SCRIPT } });
    const first = t.codecs.version(t.device);
    await t.uplink({ payload: Uint8Array.of(7), fPort: 42, source: 'radio', receivedAt: Date.now() });
    assert.equal(t.store.states.latest(t.catalog.assetByName(t.device.id, 'port')!.id)?.valueJson, '42');
    await t.setCodec({ uplink: { format: 'js', script: PORT_SCRIPT } });
    assert.equal(t.codecs.version(t.device), first);
    await t.setCodec({ uplink: { format: 'js', script: PORT_SCRIPT.replace('input.bytes[0]', 'input.bytes[0] * 2') } });
    assert.notEqual(t.codecs.version(t.device), first);
  } finally {
    await t.close();
  }
});

test('an undecodable uplink is kept (no states) and refused after the commit', async () => {
  const t = await setup();
  try {
    await t.setCodec({ uplink: { format: 'js', script: PORT_SCRIPT } });
    await assert.rejects(
      t.uplink({ payload: new Uint8Array(0), fPort: 3, source: 'radio', receivedAt: Date.now() }),
      (err: ServiceError) => err.code === 'DECODE_FAILED' && /empty frame/.test(err.message),
    );
    const [uplink] = uplinkRows(t.store);
    assert.equal(uplink!.decoded, 0);
    assert.match(String(uplink!.error), /empty frame/);
    assert.equal(stateRows(t.store).length, 0);
    assert.deepEqual(t.refusals, ['DECODE_FAILED']);
  } finally {
    await t.close();
  }
});

test('an uplink whose every state is refused by its profile is still kept', async () => {
  const t = await setup();
  try {
    await t.setCodec({ uplink: { format: 'js', script: "function decodeUplink(input) { return { data: { temperature: 'hot' } }; }" } });
    const outcome = await t.uplink({ payload: Uint8Array.of(1), source: 'http', receivedAt: Date.now() });
    assert.deepEqual(outcome.refused.map((r) => r.code), ['PROFILE_MISMATCH']);
    assert.equal(uplinkRows(t.store).length, 1);
    assert.equal(stateRows(t.store).length, 0);
  } finally {
    await t.close();
  }
});

test('when the batch fails, neither the uplink nor its states are written', async () => {
  const t = await setup();
  try {
    await t.setCodec({ uplink: { format: 'abcl', document: SCALE_DOC } });
    const failing = () => {
      throw new Error('radio session write failed');
    };
    await assert.rejects(
      t.uplink({ payload: Uint8Array.of(0, 10), source: 'radio', receivedAt: Date.now() }, failing),
      /radio session write failed/,
    );
    assert.equal(uplinkRows(t.store).length, 0);
    assert.equal(stateRows(t.store).length, 0);
    // The next message is not affected.
    await t.uplink({ payload: Uint8Array.of(0, 10), source: 'radio', receivedAt: Date.now() });
    assert.equal(uplinkRows(t.store).length, 1);
    assert.equal(stateRows(t.store).length, 1);
  } finally {
    await t.close();
  }
});
