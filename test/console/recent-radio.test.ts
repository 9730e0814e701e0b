// What a device page's Radio section is built from (docs/console.md): the last uplink and the last
// downlink outcomes per device, taken from the device events, bounded in devices and outcomes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DeviceEvents } from '../../src/ingest/device-events.js';
import { RecentRadio } from '../../src/console/recent-radio.js';

const at = (s: number) => Date.parse('2026-11-26T10:00:00Z') + s * 1000;

test('keeps the last uplink and the newest downlink outcomes, only the members it shows', () => {
  const events = new DeviceEvents();
  const recent = new RecentRadio(events, { downlinksPerDevice: 3 });
  events.publish('d1', { type: 'uplink', at: at(1), rssi: -100, snr: 1, dataRate: 'SF12BW125', frequency: 868_100_000, source: 'gwmp:AA', fCnt: 1 });
  events.publish('d1', { type: 'uplink', at: at(2), rssi: -90, snr: 5.5, dataRate: 'SF9BW125', frequency: 868_300_000, source: 'gwmp:AA', fCnt: 2, gateway: 'gw1', macCommands: ['x'.repeat(10_000)] });
  for (let i = 0; i < 5; i++) events.publish('d1', { type: 'downlink', at: at(10 + i), id: `q${i}`, status: i % 2 ? 'sent' : 'queued', window: 'rx1', fCnt: i });
  events.publish('d1', { type: 'join', at: at(20) });
  events.publish('d1', { type: 'downlink', at: at(21) }); // no status: not an outcome
  const d1 = recent.of('d1');
  assert.deepEqual(d1.uplink, { at: '2026-11-26T10:00:02.000Z', rssi: -90, snr: 5.5, dataRate: 'SF9BW125', frequency: 868_300_000, source: 'gwmp:AA', gateway: 'gw1', fCnt: 2 });
  assert.deepEqual(d1.downlinks.map((d) => d.id), ['q4', 'q3', 'q2'], 'newest first, 3 kept');
  assert.deepEqual(d1.downlinks[0], { at: '2026-11-26T10:00:14.000Z', status: 'queued', id: 'q4', window: 'rx1', fCnt: 4 });
  assert.deepEqual(recent.of('never-heard'), { uplink: null, downlinks: [] });
  // A long reason is cut: what is kept per outcome stays small.
  events.publish('d2', { type: 'downlink', at: at(30), status: 'failed', reason: 'r'.repeat(5_000) });
  assert.equal(recent.of('d2').downlinks[0]!.reason!.length, 201);
  // What `of` returns is a copy: a reader cannot change what is kept.
  d1.downlinks.length = 0;
  assert.equal(recent.of('d1').downlinks.length, 3);
});

test('forgets the least recently heard device beyond maxDevices, and a deleted one', () => {
  const events = new DeviceEvents();
  const recent = new RecentRadio(events, { maxDevices: 3 });
  for (const id of ['a', 'b', 'c']) events.publish(id, { type: 'uplink', at: at(1), rssi: -80 });
  events.publish('a', { type: 'uplink', at: at(2), rssi: -81 }); // a is heard again: b is now the oldest
  events.publish('d', { type: 'uplink', at: at(3), rssi: -82 });
  assert.equal(recent.size, 3);
  assert.equal(recent.of('b').uplink, null);
  assert.equal(recent.of('a').uplink?.rssi, -81);
  assert.equal(recent.of('d').uplink?.rssi, -82);
  recent.forget('a');
  assert.equal(recent.of('a').uplink, null);
  assert.equal(recent.size, 2);
});
