import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatTimestamp, parseTimestamp } from '../../src/core/time.js';

test('timestamps with any fraction length and zone parse to the same instant', () => {
  const expected = Date.UTC(2026, 10, 21, 10, 0, 0, 123);
  for (const text of [
    '2026-11-21T10:00:00.123Z',
    '2026-11-21T10:00:00.123456Z',
    '2026-11-21T10:00:00.123456789Z',
    '2026-11-21T11:00:00.123+01:00',
    '2026-11-21T05:30:00.123-04:30',
    '2026-11-21T11:00:00.123+0100',
  ]) {
    assert.equal(parseTimestamp(text), expected, text);
  }
  assert.equal(parseTimestamp('2026-11-21T10:00:00Z'), Date.UTC(2026, 10, 21, 10));
  assert.equal(parseTimestamp('2026-11-21T10:00Z'), Date.UTC(2026, 10, 21, 10));
});

test('timestamps without a zone or with impossible fields are refused', () => {
  for (const text of ['2026-11-21T10:00:00', '2026-11-21', '2026-13-01T00:00:00Z', '2026-02-30T00:00:00Z', '2026-11-21T24:00:00Z', 'yesterday', '']) {
    assert.equal(parseTimestamp(text), undefined, text);
  }
});

test('the service emits UTC with milliseconds', () => {
  assert.equal(formatTimestamp(Date.UTC(2026, 10, 21, 10)), '2026-11-21T10:00:00.000Z');
});

test('years 0000–0099 are taken literally (Date.UTC would move them to 1900–1999), leap years included', () => {
  assert.equal(formatTimestamp(parseTimestamp('0050-06-01T12:00:00Z')!), '0050-06-01T12:00:00.000Z');
  assert.equal(formatTimestamp(parseTimestamp('0000-02-29T00:00:00Z')!), '0000-02-29T00:00:00.000Z', 'year 0 is a leap year');
  assert.equal(formatTimestamp(parseTimestamp('0001-01-01T00:30:00+01:00')!), '0000-12-31T23:30:00.000Z');
  assert.equal(parseTimestamp('0100-02-29T00:00:00Z'), undefined, 'year 100 is not');
  assert.equal(parseTimestamp('1900-02-29T00:00:00Z'), undefined);
  assert.equal(formatTimestamp(parseTimestamp('2000-02-29T00:00:00Z')!), '2000-02-29T00:00:00.000Z');
  assert.equal(formatTimestamp(parseTimestamp('9999-12-31T23:59:59.999Z')!), '9999-12-31T23:59:59.999Z');
});
