// The one ingest, in-process and without sockets: a real SQLite file in a temp dir, the real Store,
// Catalog, StateWriter, device codecs (ABCL, QuickJS) and decoder. Each door's kind of uplink goes
// through `StatePipeline.ingest` here exactly as the doors hand it over.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openTestCore } from '../helpers/core.js';
import Database from 'better-sqlite3';
import { isServiceError, type ServiceError } from '../../src/core/errors.js';
import type { Principal } from '../../src/core/access.js';
import { Store } from '../../src/store/store.js';
import { Catalog } from '../../src/store/catalog.js';
import { StateWriter } from '../../src/ingest/state-writer.js';
import { StatePipeline, echoPayload, type RefusalEvent, type StateEvent } from '../../src/ingest/ingest.js';
import { authorizeAssetState, authorizeDeviceState, type Uplink } from '../../src/ingest/uplinks.js';
import { encodeCborCommand } from '../../src/codec/index.js';

const PORT_SCRIPT = `function decodeUplink(input) {
  return { data: { port: input.fPort, temperature: input.bytes[0] / 2 } };
}`;
const WARNING_SCRIPT = `function decodeUplink(input) {
  return { data: { temperature: input.bytes[0] }, warnings: ['byte 1 ignored'] };
}`;

async function setup() {
  const opened = openTestCore('ingest');
  const { store, catalog, pipeline, registry, codecs } = opened.core;
  const { device, token } = registry.createDevice({ name: 'sensor' });
  registry.createAsset(device.id, { name: 'temperature', is: 'sensor', profile: { type: 'number', maximum: 100 } });
  registry.createAsset(device.id, { name: 'port', is: 'sensor', profile: { type: 'integer' } });
  registry.createAsset(device.id, { name: 'label', is: 'sensor', profile: { type: 'string' } });
  // A second connection, as another process would see the file: only committed rows are there.
  const reader = new Database(store.path, { readonly: true });
  const events: StateEvent[] = [];
  const refusals: RefusalEvent[] = [];
  pipeline.on('state', (e) => events.push(e));
  pipeline.on('refused', (e) => refusals.push(e));
  const uplink = (fields: Partial<Uplink> & Pick<Uplink, 'payload'>): Uplink => ({
    deviceId: device.id,
    via: 'test',
    label: 'body',
    topic: `PUT /device/${device.id}/state`,
    ...fields,
  });
  return {
    store,
    catalog,
    pipeline,
    registry,
    codecs,
    device,
    principal: catalog.principalForSecret(token)!,
    reader,
    events,
    refusals,
    uplink,
    stored: () => reader.prepare('SELECT a.name, s.value, s.at, s.uplink_seq AS uplink, s.codec FROM states s JOIN assets a ON a.id = s.asset_id ORDER BY s.seq').all() as Array<Record<string, unknown>>,
    uplinks: () => reader.prepare('SELECT seq, port, source, decoded, error, codec FROM raw_uplinks ORDER BY seq').all() as Array<Record<string, unknown>>,
    close: async () => {
      reader.close();
      await opened.close();
    },
  };
}

const bytes = (text: string) => Buffer.from(text, 'utf8');

test('a JSON device state stores each asset; JSON keeps no raw uplink', async () => {
  const t = await setup();
  try {
    const outcome = await t.pipeline.ingest(t.uplink({ payload: { bytes: bytes('{"temperature": {"value": 21.5, "at": "2024-01-02T03:04:05Z"}, "label": {"value": "ok"}}'), format: 'json' }, receivedAt: 1_700_000_000_000 }));
    assert.deepEqual(outcome.refused, []);
    assert.deepEqual(Object.keys(outcome.states).sort(), ['label', 'temperature']);
    assert.equal(outcome.states.temperature!.at, Date.parse('2024-01-02T03:04:05Z'));
    assert.equal(outcome.states.label!.at, 1_700_000_000_000, 'a state without `at` gets the receive time');
    assert.deepEqual(t.stored().map((r) => [r.name, r.value, r.uplink]), [['temperature', '21.5', null], ['label', '"ok"', null]]);
    assert.equal(t.uplinks().length, 0);
    assert.equal(t.pipeline.statesAccepted, 2);
  } finally {
    await t.close();
  }
});

test('a CBOR device state is decoded by the built-in reader and its bytes kept with the states', async () => {
  const t = await setup();
  try {
    const outcome = await t.pipeline.ingest(t.uplink({ payload: { bytes: encodeCborCommand({ temperature: 19, label: 'cbor' }).bytes, format: 'cbor' } }));
    assert.deepEqual(Object.fromEntries(Object.entries(outcome.states).map(([k, v]) => [k, v.value])), { temperature: 19, label: 'cbor' });
    const [kept] = t.uplinks();
    assert.deepEqual({ ...kept, seq: undefined }, { seq: undefined, port: null, source: 'test', decoded: 1, error: null, codec: 'cbor' });
    assert.deepEqual(t.stored().map((r) => r.uplink), [kept!.seq, kept!.seq], 'each state points at the uplink it came from');
  } finally {
    await t.close();
  }
});

test('an asset state is a device state with one asset: stored, echoed from the reply slot, refusals thrown whole', async () => {
  const t = await setup();
  try {
    const payload = bytes('1700000000|21.5');
    const text: Uplink = t.uplink({ via: 'mqtt', payload: { asset: 'temperature', bytes: payload, form: 'text' }, label: 'asset "temperature"', topic: `device/${t.device.id}/asset/temperature/state`, reply: payload });
    const outcome = await t.pipeline.ingest(text);
    // The legacy form converts by the asset's profile type (a number here) and carries its own time.
    assert.deepEqual(outcome.states.temperature, { assetId: t.catalog.assetByName(t.device.id, 'temperature')!.id, value: 21.5, at: 1_700_000_000_000 });
    assert.equal(t.events.length, 1);
    assert.equal(echoPayload(t.events[0]!), payload, 'the echo is the exact bytes the door put in the reply slot');

    const json = await t.pipeline.ingest(t.uplink({ payload: { asset: 'label', bytes: bytes('{"value": "hi", "at": "2024-05-06T07:08:09+02:00"}'), form: 'json' } }));
    assert.equal(json.states.label!.value, 'hi');
    assert.equal(echoPayload(t.events[1]!), '{"value":"hi","at":"2024-05-06T07:08:09+02:00"}', 'without reply bytes the echo repeats `at` as given');

    await assert.rejects(t.pipeline.ingest(t.uplink({ payload: { asset: 'temperature', bytes: bytes('{"value": 500}'), form: 'json' } })), (err: ServiceError) => err.code === 'PROFILE_MISMATCH' && /^asset "temperature": /.test(err.message));
    // The asset is looked up before the body is read: an unknown one is that, whatever the body.
    await assert.rejects(t.pipeline.ingest(t.uplink({ payload: { asset: 'nope', bytes: bytes('{not json'), form: 'json' } })), (err: ServiceError) => err.code === 'ASSET_NOT_FOUND');
    await assert.rejects(t.pipeline.ingest(t.uplink({ payload: { asset: 'label', bytes: bytes('{"at": null}'), form: 'json' } })), (err: ServiceError) => err.code === 'INVALID_MESSAGE' && err.message === 'body: member "value" is required');
    assert.deepEqual(t.refusals.map((r) => r.code), ['PROFILE_MISMATCH', 'ASSET_NOT_FOUND', 'INVALID_MESSAGE'], 'each refusal reported once');
    assert.equal(t.pipeline.statesRefused, 3);
    assert.equal(t.stored().length, 2);
  } finally {
    await t.close();
  }
});

test('a binary uplink goes through the device codec with its fPort, and the port is kept with the bytes', async () => {
  const t = await setup();
  try {
    await t.registry.setDeviceCodec(t.codecs, t.device, { uplink: { format: 'js', script: PORT_SCRIPT } });
    const version = t.codecs.version(t.catalog.device(t.device.id)!);
    // The radio's hint: the device decides, and with a port its codec reads the frame.
    const outcome = await t.pipeline.ingest(t.uplink({ via: 'gwmp:0102030405060708', payload: { bytes: Uint8Array.of(43), format: 'device' }, fPort: 17, label: 'uplink' }));
    assert.deepEqual(Object.fromEntries(Object.entries(outcome.states).map(([k, v]) => [k, v.value])), { port: 17, temperature: 21.5 });
    const [kept] = t.uplinks();
    assert.deepEqual({ ...kept, seq: undefined }, { seq: undefined, port: 17, source: 'gwmp:0102030405060708', decoded: 1, error: null, codec: version });
    assert.deepEqual(t.stored().map((r) => [r.name, r.uplink, r.codec]), [['port', kept!.seq, version], ['temperature', kept!.seq, version]]);
  } finally {
    await t.close();
  }
});

test('codec warnings are reported like refusals but refuse nothing', async () => {
  const t = await setup();
  try {
    await t.registry.setDeviceCodec(t.codecs, t.device, { uplink: { format: 'js', script: WARNING_SCRIPT } });
    const outcome = await t.pipeline.ingest(t.uplink({ payload: { bytes: Uint8Array.of(20, 1), format: 'codec' } }));
    assert.equal(outcome.states.temperature!.value, 20);
    assert.deepEqual(t.refusals.map((r) => [r.code, r.error]), [['DECODE_WARNING', 'byte 1 ignored']]);
    assert.equal(t.pipeline.statesRefused, 0);
  } finally {
    await t.close();
  }
});

test('a device state is refused asset by asset: the others are stored, the refused ones named in one report', async () => {
  const t = await setup();
  try {
    const message = '{"temperature": {"value": 20}, "ghost": {"value": 1}, "port": {"value": "three"}, "label": {"value": "fine"}}';
    const outcome = await t.pipeline.ingest(t.uplink({ payload: { bytes: bytes(message), format: 'json' } }));
    assert.deepEqual(Object.keys(outcome.states).sort(), ['label', 'temperature']);
    assert.deepEqual(outcome.refused.map((r) => [r.asset, r.code]), [['ghost', 'ASSET_NOT_FOUND'], ['port', 'PROFILE_MISMATCH']]);
    assert.equal(t.refusals.length, 1, 'one report for the message');
    const [report] = t.refusals;
    assert.equal(report!.code, 'STATES_REFUSED');
    assert.equal(report!.topic, `PUT /device/${t.device.id}/state`);
    assert.equal(report!.error, '2 assets refused: "ghost", "port"');
    assert.deepEqual(t.stored().map((r) => r.name), ['temperature', 'label']);
    assert.deepEqual([t.pipeline.statesAccepted, t.pipeline.statesRefused], [2, 2]);
  } finally {
    await t.close();
  }
});

test('the raw uplink, its states and the door\'s own writes commit in one transaction: a failing write rolls back all', async () => {
  const t = await setup();
  try {
    await t.registry.setDeviceCodec(t.codecs, t.device, { uplink: { format: 'js', script: PORT_SCRIPT } });
    const failing = () => {
      throw new Error('frame counter write failed');
    };
    await assert.rejects(t.pipeline.ingest(t.uplink({ payload: { bytes: Uint8Array.of(10), format: 'device' }, fPort: 2, alongside: failing })), /frame counter write failed/);
    assert.equal(t.uplinks().length, 0);
    assert.equal(t.stored().length, 0);
    assert.equal(t.events.length, 0, 'nothing is announced that did not commit');
    let counted = 0;
    await t.pipeline.ingest(t.uplink({ payload: { bytes: Uint8Array.of(10), format: 'device' }, fPort: 2, alongside: () => void counted++ }));
    assert.equal(counted, 1);
    assert.equal(t.uplinks().length, 1);
    assert.equal(t.stored().length, 2);
  } finally {
    await t.close();
  }
});

test('undecodable bytes are kept, the door\'s writes commit, then the uplink is refused', async () => {
  const t = await setup();
  try {
    let counted = 0;
    // No codec configured: the device cannot read binary; the bytes wait for one.
    await assert.rejects(t.pipeline.ingest(t.uplink({ payload: { bytes: Uint8Array.of(1, 2), format: 'codec' }, label: 'uplink', alongside: () => void counted++ })), (err: ServiceError) => err.code === 'DECODE_FAILED' && err.message.startsWith('uplink: '));
    assert.equal(counted, 1);
    assert.deepEqual(t.uplinks().map((u) => [u.decoded, u.error]), [[0, 'no custom binary codec configured']]);
    assert.deepEqual(t.refusals.map((r) => r.code), ['DECODE_FAILED']);
  } finally {
    await t.close();
  }
});

test('states are announced only after their commit', async () => {
  const t = await setup();
  try {
    const seenAtAnnounce: unknown[] = [];
    t.pipeline.on('state', (e) => {
      seenAtAnnounce.push(t.reader.prepare('SELECT value FROM states WHERE asset_id = ? ORDER BY seq DESC LIMIT 1').pluck().get(e.asset.id));
    });
    const pending = t.pipeline.ingest(t.uplink({ payload: { bytes: bytes('{"temperature": {"value": 33}}'), format: 'json' } }));
    assert.equal(t.events.length, 0, 'not announced while the group commit is pending');
    await pending;
    assert.deepEqual(seenAtAnnounce, ['33'], 'another connection already reads the state when it is announced');
  } finally {
    await t.close();
  }
});

test('a gateway\'s re-sent state is acknowledged but stored and announced once', async () => {
  const t = await setup();
  try {
    const resend = () => t.pipeline.ingest(t.uplink({ payload: { asset: 'temperature', bytes: bytes('{"value": 5, "at": "2024-01-01T00:00:00Z"}'), form: 'json' }, resent: true }));
    const first = await resend();
    const second = await resend();
    assert.deepEqual(second.states, first.states);
    assert.equal(t.stored().length, 1);
    assert.equal(t.events.length, 1);
    assert.equal(t.pipeline.duplicates, 1);
  } finally {
    await t.close();
  }
});

test('the doors\' rights check: unknown names answer 404 before rights, and only the device publishes its states', async () => {
  const t = await setup();
  try {
    const { secret } = t.registry.createAppToken({ name: 'app', scopes: ['read', 'command'] });
    const app: Principal = t.catalog.principalForSecret(secret)!;
    const code = (fn: () => unknown) => {
      try {
        fn();
        return 'allowed';
      } catch (err) {
        return isServiceError(err) ? err.code : String(err);
      }
    };
    const id = t.device.id;
    const assetId = t.catalog.assetByName(id, 'temperature')!.id;
    assert.equal(code(() => authorizeDeviceState(t.catalog, t.principal, id)), 'allowed');
    assert.equal(code(() => authorizeDeviceState(t.catalog, app, id)), 'FORBIDDEN');
    assert.equal(code(() => authorizeDeviceState(t.catalog, t.principal, 'x'.repeat(24))), 'DEVICE_NOT_FOUND');
    assert.deepEqual(authorizeAssetState(t.catalog, t.principal, { assetId }), { deviceId: id, assetName: 'temperature' });
    assert.equal(code(() => authorizeAssetState(t.catalog, app, { assetId })), 'FORBIDDEN');
    assert.equal(code(() => authorizeAssetState(t.catalog, app, { deviceId: id, assetName: 'nope' })), 'ASSET_NOT_FOUND');
    assert.equal(code(() => authorizeAssetState(t.catalog, app, { deviceId: id, assetName: 'temperature' })), 'FORBIDDEN');
    // The device's own unknown asset passes: the pipeline refuses it and reports it on the device's errors.
    assert.equal(code(() => authorizeAssetState(t.catalog, t.principal, { deviceId: id, assetName: 'nope' })), 'allowed');
  } finally {
    await t.close();
  }
});
