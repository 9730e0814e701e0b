import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from 'aedes';
import { filterMatches } from '../../src/wire/topics.js';
import { SubscriptionIndex, levelsMatch } from '../../src/doors/mqtt/subscriptions.js';
import type { Principal } from '../../src/core/access.js';

const A = 'AAAAAAAAAAAAAAAAAAAAAAAA';
const B = 'BBBBBBBBBBBBBBBBBBBBBBBB';
const deviceA: Principal = { tokenId: 't1', kind: 'device', deviceId: A, scopes: [] };
const reader: Principal = { tokenId: 't2', kind: 'app', deviceId: null, scopes: ['read'] };
/** The index only looks at a session's identity and `closed`. */
const session = () => ({ closed: false }) as unknown as Client;

test('split-free filter matching agrees with filterMatches on every pair', () => {
  const filters = ['#', '+', '+/+', 'a', 'a/', 'a/#', 'a/+', 'a/+/c', '+/b/#', 'a/b', 'a/b/c', '/a', '/+', '+/', 'ab', '$SYS/#', '$SYS/+', `device/${A}/asset/+/command`, `device/${A}/errors`, 'device/+/asset/+/feed'];
  const topics = ['a', 'a/', 'a/b', 'a/b/c', 'a/bc', 'ab', '/a', '/', '', 'a//c', '$SYS/x', '$SYS', `device/${A}/asset/t/command`, `device/${A}/asset/t/state`, `device/${A}/errors`, `device/${B}/asset/t/feed`, `device/${A}/asset/t/feed/x`];
  for (const f of filters) {
    for (const t of topics) assert.equal(levelsMatch(f.split('/'), t), filterMatches(f, t), `filter ${JSON.stringify(f)} topic ${JSON.stringify(t)}`);
  }
});

test('the index answers who may receive a device topic from granted filters only', () => {
  const index = new SubscriptionIndex();
  const dev = session();
  const app = session();
  const dashboard = session();
  const gateway = session();
  const feed = `device/${A}/asset/t/feed`;
  assert.equal(index.mayReach(A, 'errors'), false);
  index.add(dev, deviceA, `device/${A}/asset/+/command`);
  index.add(dev, deviceA, `device/${A}/errors`);
  assert.equal(index.mayReach(A, 'errors'), true);
  assert.equal(index.mayReach(A, 'command'), true);
  // what the SDKs subscribe to rules out the echo and the feed without building a topic
  assert.equal(index.mayReach(A, 'state'), false);
  assert.equal(index.mayReach(A, 'feed'), false);
  assert.equal(index.mayReach(B, 'errors'), false);
  assert.equal(index.reaches(A, feed), false);
  assert.equal(index.reaches(A, `device/${A}/asset/t/command`), true);
  assert.equal(index.reaches(A, `device/${A}/errors`), true);
  assert.equal(index.reaches(B, `device/${B}/errors`), false);
  index.add(dev, deviceA, `device/${A}/asset/+/command`); // a QoS change: not another filter
  assert.equal(index.count(dev), 2);
  assert.equal(index.holds(dev, `device/${A}/errors`), true);
  assert.equal(index.matches(dev, `device/${A}/asset/x/command`), true);
  assert.equal(index.matches(dev, feed), false);
  // an application with a wildcard, a dashboard with exact feed topics
  index.add(app, reader, 'device/+/asset/+/feed');
  index.add(dashboard, reader, feed);
  index.add(dashboard, reader, `device/${B}/asset/t/feed`);
  assert.equal(index.mayReach(B, 'feed'), true);
  assert.equal(index.mayReach(B, 'state'), false);
  assert.equal(index.reaches(A, feed), true);
  index.remove(app, 'device/+/asset/+/feed');
  assert.equal(index.reaches(A, feed), true, 'the dashboard still holds it');
  assert.equal(index.reaches(A, `device/${A}/asset/u/feed`), false);
  index.drop(dashboard);
  assert.equal(index.reaches(A, feed), false);
  assert.equal(index.mayReach(B, 'feed'), false);
  index.add(app, reader, `device/${B}/#`);
  assert.equal(index.mayReach(B, 'state'), true, 'a # filter can end anywhere');
  assert.equal(index.mayReach(A, 'events'), true, 'an application filter counts for every device');
  index.remove(app, `device/${B}/#`);
  // a gateway session's filters count for its limit, not for reach
  index.add(gateway, { tokenId: 'g', kind: 'gateway', deviceId: null, scopes: [] } as Principal, feed);
  assert.equal(index.count(gateway), 1);
  assert.equal(index.reaches(A, feed), false);
  assert.deepEqual([...(index.deviceSessions(A) ?? [])], [dev]);
  index.remove(dev, `device/${A}/errors`);
  assert.equal(index.reaches(A, `device/${A}/errors`), false);
  assert.equal(index.reaches(A, `device/${A}/asset/t/command`), true);
  index.drop(dev);
  assert.equal(index.mayReach(A, 'command'), false);
  assert.equal(index.count(dev), 0);
  assert.equal(index.deviceSessions(A), undefined);
});
