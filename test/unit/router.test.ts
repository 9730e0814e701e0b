import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Router, type Route } from '../../src/doors/http/router.js';

const ok = () => ({ status: 200 });
const route = (pattern: string): Route => ({ pattern, methods: { GET: ok } });

test('the router captures and percent-decodes path segments', () => {
  const router = new Router([route('/device/:deviceId/asset/:name'), route('/devices')]);
  const found = router.match('/device/d1/asset/temp%20in');
  assert.equal(found?.route.pattern, '/device/:deviceId/asset/:name');
  assert.deepEqual(found?.params, { deviceId: 'd1', name: 'temp in' });
  assert.equal(router.match('/devices')?.route.pattern, '/devices');
  assert.equal(router.match('/device/d1'), undefined);
  assert.throws(() => router.match('/device/d1/asset/%ED%A0%80'), { code: 'INVALID_NAME' });
});

test('the router refuses two patterns that match the same path, so route order never decides', () => {
  assert.throws(() => new Router([route('/device/:deviceId/state'), route('/device/:id/state')]), /routes \/device\/:deviceId\/state and \/device\/:id\/state match the same paths/);
  assert.throws(() => new Router([route('/device/:deviceId/:what'), route('/device/:deviceId/codec')]), /match the same paths/);
  assert.throws(() => new Router([route('/tokens'), route('/tokens/')]), /match the same paths/);
  // Same length but a different literal, or a different length: no clash.
  assert.doesNotThrow(() => new Router([route('/device/:deviceId/state'), route('/device/:deviceId/codec'), route('/device/:deviceId'), route('/devices')]));
});
