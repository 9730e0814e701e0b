// The Prometheus text registry (src/ops/metrics.ts): counters by label set, as /metrics shows them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter } from '../../src/ops/metrics.js';

test('a counter adds up each label set apart, one label or several, and renders each once', () => {
  const c = new Counter('outpost_test_total', 'Test');
  for (let i = 0; i < 3; i++) c.inc({ type: 'push-data' });
  c.inc({ type: 'pull-data' }, 5);
  c.inc({ result: 'push-data' }); // the same value under another label name is another series
  c.inc({ window: 'rx1', result: 'sent' });
  c.inc({ window: 'rx1', result: 'sent' }, 2);
  c.inc({ window: 'rx2', result: 'sent' });
  c.inc();
  assert.equal(c.get({ type: 'push-data' }), 3);
  assert.equal(c.get({ type: 'pull-data' }), 5);
  assert.equal(c.get({ result: 'push-data' }), 1);
  assert.equal(c.get({ window: 'rx1', result: 'sent' }), 3);
  assert.equal(c.get({ window: 'rx2', result: 'sent' }), 1);
  assert.equal(c.get(), 1);
  const lines = c.render().split('\n');
  assert.deepEqual(lines.slice(0, 2), ['# HELP outpost_test_total Test', '# TYPE outpost_test_total counter']);
  assert.deepEqual(lines.slice(2).sort(), [
    'outpost_test_total 1',
    'outpost_test_total{result="push-data"} 1',
    'outpost_test_total{type="pull-data"} 5',
    'outpost_test_total{type="push-data"} 3',
    'outpost_test_total{window="rx1",result="sent"} 3',
    'outpost_test_total{window="rx2",result="sent"} 1',
  ]);
});

test('label values are escaped, and values that never repeat are still counted past the remembered ones', () => {
  const c = new Counter('outpost_test_total', 'Test');
  c.inc({ reason: 'a "quoted"\\ value\nnext' });
  assert.match(c.render(), /outpost_test_total\{reason="a \\"quoted\\"\\\\ value\\nnext"\} 1/);
  for (let i = 0; i < 1500; i++) c.inc({ source: `serial:/dev/tty${i}` });
  c.inc({ source: 'serial:/dev/tty1499' });
  assert.equal(c.get({ source: 'serial:/dev/tty0' }), 1);
  assert.equal(c.get({ source: 'serial:/dev/tty1499' }), 2);
  assert.equal(c.render().split('\n').length, 2 + 1 + 1500);
});
