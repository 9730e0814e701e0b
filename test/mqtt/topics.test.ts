import { test } from 'node:test';
import assert from 'node:assert/strict';
import { filterMatches, parsePublishTopic } from '../../src/wire/topics.js';
import { maySubscribe } from '../../src/doors/mqtt/acl.js';
import { RetainedFeed } from '../../src/doors/mqtt/retained-feed.js';
import type { Principal } from '../../src/core/access.js';

const A = 'AAAAAAAAAAAAAAAAAAAAAAAA';
const B = 'BBBBBBBBBBBBBBBBBBBBBBBB';
const A_ASSET = 'aaaaaaaaaaaaaaaaaaaaaaa1';
const B_ASSET = 'bbbbbbbbbbbbbbbbbbbbbbb1';
const owners: Record<string, string> = { [A_ASSET]: A, [B_ASSET]: B };
const ownerOf = (id: string) => owners[id];

const deviceA: Principal = { tokenId: 't1', kind: 'device', deviceId: A, scopes: [] };
const reader: Principal = { tokenId: 't2', kind: 'app', deviceId: null, scopes: ['read'] };
const commander: Principal = { tokenId: 't3', kind: 'app', deviceId: null, scopes: ['command'] };

test('publish topics parse by name and by id', () => {
  assert.deepEqual(parsePublishTopic(`device/${A}/asset/temp/state`), { kind: 'asset-state', deviceId: A, assetName: 'temp' });
  assert.deepEqual(parsePublishTopic(`device/${A}/asset/9/command`), { kind: 'asset-command', deviceId: A, assetName: '9' });
  assert.deepEqual(parsePublishTopic(`asset/${A_ASSET}/state`), { kind: 'asset-state-by-id', assetId: A_ASSET });
  assert.deepEqual(parsePublishTopic(`asset/${A_ASSET}/command`), { kind: 'asset-command-by-id', assetId: A_ASSET });
  assert.deepEqual(parsePublishTopic(`device/${A}/state`), { kind: 'device-state', deviceId: A });
  assert.deepEqual(parsePublishTopic(`device/${A}/command`), { kind: 'device-command', deviceId: A });
  for (const bad of [
    `device/${A}/asset/temp/feed`,
    `device/${A}/asset/temp/state/x`,
    `device/${A}/asset//state`,
    `device//state`,
    `device/${A}/errors`,
    `devices/${A}/state`,
    `asset/${A_ASSET}/feed`,
    'state',
    '',
    `/device/${A}/state`,
  ]) {
    assert.equal(parsePublishTopic(bad).kind, 'unknown', bad);
  }
});

test('filter matching follows MQTT 3.1.1', () => {
  assert.ok(filterMatches('#', 'a/b'));
  assert.ok(filterMatches('a/#', 'a'));
  assert.ok(filterMatches('a/+/c', 'a/b/c'));
  assert.ok(!filterMatches('a/+/c', 'a/b/d'));
  assert.ok(!filterMatches('a/+', 'a/b/c'));
  assert.ok(!filterMatches('#', '$SYS/x'));
  assert.ok(!filterMatches('+/x', '$SYS/x'));
  assert.ok(filterMatches('$SYS/x', '$SYS/x'));
});

test('device subscription ACL: own subtree only', () => {
  const granted = [
    `device/${A}/asset/temp/command`,
    `device/${A}/asset/temp/state`,
    `device/${A}/asset/temp/feed`,
    `device/${A}/errors`,
    `device/${A}/events`,
    `device/${A}/#`,
    `device/${A}/+`,
    `device/${A}/asset/+/command`,
    `device/${A}/asset/+/+`,
    `device/${A}/asset/#`,
    `asset/${A_ASSET}/command`,
  ];
  const refused = [
    '#',
    '+/#',
    '+/+/+/+/+',
    '$SYS/#',
    '$SYS/broker/clients',
    `device/${B}/asset/temp/command`,
    `device/${B}/asset/temp/state`,
    `device/${B}/asset/temp/feed`,
    `device/${B}/errors`,
    `device/${B}/#`,
    'device/+/asset/+/feed',
    'device/+/errors',
    'device/#',
    `asset/${B_ASSET}/command`,
    'asset/+/command',
    'asset/#',
    `+/${A}/#`,
    `device/${A}/nothing`,
    `device/${A}/asset/temp/other`,
    'foo/bar',
  ];
  for (const f of granted) assert.ok(maySubscribe(deviceA, f, ownerOf), `granted ${f}`);
  for (const f of refused) assert.ok(!maySubscribe(deviceA, f, ownerOf), `refused ${f}`);
});

test('application subscription ACL: read scope, no command topics', () => {
  for (const f of ['device/+/asset/+/feed', 'device/+/asset/+/state', `device/${B}/asset/+/feed`, 'device/+/errors', 'device/+/events', 'device/+/+', `device/${A}/asset/temp/feed`]) {
    assert.ok(maySubscribe(reader, f, ownerOf), `granted ${f}`);
    assert.ok(!maySubscribe(commander, f, ownerOf), `commander refused ${f}`);
  }
  for (const f of ['#', 'device/#', 'device/+/asset/+/+', 'device/+/asset/+/command', `asset/${A_ASSET}/command`, '$SYS/#', 'foo/#']) {
    assert.ok(!maySubscribe(reader, f, ownerOf), `refused ${f}`);
  }
});

test('retained feed keeps the latest state by at and matches filters', () => {
  const feed = new RetainedFeed();
  assert.ok(feed.offer(A, 'temp', 2000, '21'));
  assert.ok(!feed.offer(A, 'temp', 1000, '19'));
  assert.ok(feed.offer(A, 'temp', 2000, '22'));
  feed.offer(B, 'temp', 1000, '5');
  assert.equal(feed.size, 2);
  assert.deepEqual([...feed.matching(`device/${A}/#`)].map((m) => m.valueJson), ['22']);
  assert.equal([...feed.matching('device/+/asset/+/feed')].length, 2);
  assert.equal([...feed.matching(`device/${A}/asset/temp/state`)].length, 0);
  feed.removeDevice(A);
  assert.equal(feed.size, 1);
});
