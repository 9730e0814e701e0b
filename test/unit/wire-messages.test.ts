// The wire model's readers (src/wire): a malformed message is refused as a whole, naming what is wrong.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { catalogText, managedDeviceContent, parseAppliedRevisions, parseLorawanCounters, parseManagedDeviceMessage } from '../../src/wire/messages.js';
import { parseGatewayTopic } from '../../src/wire/topics.js';
import type { DeviceRecord } from '../../src/core/model.js';

const ID = 'AbCdEfGhIjKlMnOpQrStUvWx';
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

test('gateway topics parse to what they are', () => {
  assert.deepEqual(parseGatewayTopic(`gateway/G/config/device/${ID}`), { kind: 'config-device', gatewayId: 'G', deviceId: ID });
  assert.deepEqual(parseGatewayTopic('gateway/G/config/applied'), { kind: 'config-applied', gatewayId: 'G' });
  assert.deepEqual(parseGatewayTopic(`gateway/G/lorawan/${ID}`), { kind: 'lorawan-counters', gatewayId: 'G', deviceId: ID });
  assert.deepEqual(parseGatewayTopic(`gateway/G/device/${ID}`), { kind: 'catalog', gatewayId: 'G', deviceId: ID });
  assert.equal(parseGatewayTopic('gateway/G/config/device/').kind, 'unknown');
  assert.equal(parseGatewayTopic('device/G/status').kind, 'unknown');
});

test('a managed device message: whole, deleted, or refused naming the member', () => {
  const definition = { revision: 7, device: { id: ID, name: 'pump', title: null, description: null }, assets: [{ name: 't', is: 'sensor', profile: { type: 'number' } }], codec: null, tokenHash: 'h' };
  const read = parseManagedDeviceMessage(ID, json(definition));
  assert.equal(read.revision, 7);
  assert.ok(!('deleted' in read) && read.assets[0]!.title === null && read.tokenHash === 'h');
  assert.deepEqual(parseManagedDeviceMessage(ID, json({ revision: 8, deleted: true })), { revision: 8, deleted: true });
  const refused = (payload: Buffer, pattern: RegExp) => assert.throws(() => parseManagedDeviceMessage(ID, payload), (e: Error & { code?: string }) => e.code === 'INVALID_BODY' && pattern.test(e.message));
  refused(Buffer.from('{'), /not valid JSON/);
  refused(json({ ...definition, revision: 0 }), /revision/);
  refused(json({ ...definition, device: { ...definition.device, id: 'other' } }), /device\.id/);
  refused(json({ ...definition, assets: [{ name: 't' }] }), /"name", "is" and "profile"/);
  refused(json({ ...definition, lorawan: 'keys' }), /lorawan/);
});

test('applied revisions and counters', () => {
  assert.deepEqual(parseAppliedRevisions(json({ [ID]: 3 })), { [ID]: 3 });
  assert.throws(() => parseAppliedRevisions(json({ [ID]: -1 })), /non-negative/);
  assert.throws(() => parseAppliedRevisions(json([1])), /JSON object/);
  assert.deepEqual(parseLorawanCounters(json({ fCntUp: 2, fCntDown: 1 })), { fCntUp: 2, fCntDown: 1 });
  assert.throws(() => parseLorawanCounters(json({ fCntUp: 2 ** 32, fCntDown: 0 })), /32-bit/);
});

test('the same definition gives the same content whatever the asset order', () => {
  const a = { name: 'a', is: 'sensor', profile: { type: 'number' }, title: null, description: null };
  const b = { ...a, name: 'b' };
  const base = { device: { id: ID, name: 'x', title: null, description: null }, codec: null, tokenHash: null };
  assert.equal(managedDeviceContent({ ...base, assets: [a, b] }), managedDeviceContent({ ...base, assets: [b, a] }));
});

test('a catalog message is bounded: texts cut, asset texts left out when still too large', () => {
  const device: DeviceRecord = { id: ID, name: 'n', title: 'T'.repeat(5000), description: 'D'.repeat(5000), payloadFormat: 'auto', codec: null, createdOn: 0, updatedOn: 0 };
  const assets = Array.from({ length: 40 }, (_, i) => ({ id: `a${i}`, deviceId: ID, name: `asset${i}`, title: 't'.repeat(300), description: 'd'.repeat(2000), is: 'sensor' as const, profile: { type: 'number' as const }, createdOn: 0, updatedOn: 0 }));
  const roomy = JSON.parse(catalogText(device, assets, 1_000_000));
  assert.equal(roomy.title.length, 256);
  assert.ok(roomy.title.endsWith('…'));
  assert.equal(roomy.assets[0].description.length, 1024);
  const tight = catalogText(device, assets, 8192);
  assert.ok(Buffer.byteLength(tight) <= 8192, `${Buffer.byteLength(tight)} bytes`);
  assert.equal(JSON.parse(tight).assets[0].description, null);
  // A surrogate pair is never split.
  const emoji = { ...device, title: '😀'.repeat(300) };
  assert.doesNotThrow(() => encodeURIComponent(JSON.parse(catalogText(emoji, [], 1_000_000)).title));
});
