import { test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TIMESTAMP, CODEC_TIMESTAMP, CODEC_TIMESTAMP_WITH_ZONE, epochMillisToIso, formatTimestamp, isoTimestamp, parseTimestamp, toIsoTimestamp } from '../../src/core/time.js';

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

test('one parser, two forms: API input needs a zone and keeps its leniencies; codec data reads a missing zone as UTC', () => {
  const at = Date.UTC(2021, 5, 30, 10, 0, 0);
  // API input (the default form).
  assert.equal(parseTimestamp('2021-06-30T10:00:00'), undefined, 'no zone');
  assert.equal(parseTimestamp('2021-06-30T11:00:00+01:'), at, '±hh: without minutes has always been accepted');
  assert.equal(parseTimestamp('2021-06-30T09:59:60Z'), Date.UTC(2021, 5, 30, 9, 59, 59), 'second 60 is read as 59');
  // Codec data: CBOR tag 0, ABCL `at`, JS results.
  assert.equal(parseTimestamp('2021-06-30T10:00:00', CODEC_TIMESTAMP), at);
  assert.equal(parseTimestamp('2021-06-30 10:00', CODEC_TIMESTAMP), at);
  assert.equal(parseTimestamp('2021-06-30', CODEC_TIMESTAMP), Date.UTC(2021, 5, 30));
  assert.equal(parseTimestamp('2021-06-30T11:00:00+0100', CODEC_TIMESTAMP), at);
  assert.equal(parseTimestamp('2021-06-30T11:00:00+01:', CODEC_TIMESTAMP), undefined);
  assert.equal(parseTimestamp('2021-06-30T09:59:60Z', CODEC_TIMESTAMP), undefined);
  assert.equal(parseTimestamp('2021-06-30Z', CODEC_TIMESTAMP), undefined, 'a zone needs a time');
  // The JSON device-state codec's `at`: codec rules with a zone required.
  assert.equal(parseTimestamp('2021-06-30T10:00:00', CODEC_TIMESTAMP_WITH_ZONE), undefined);
  assert.equal(parseTimestamp('2021-06-30', CODEC_TIMESTAMP_WITH_ZONE), undefined);
  assert.equal(parseTimestamp('2021-06-30T10:00:00z', CODEC_TIMESTAMP_WITH_ZONE), at);
  assert.equal(parseTimestamp('2021-06-30T10:00:00.5Z', API_TIMESTAMP), at + 500);
});

test('codec timestamps: ISO text in the output form, numbers below 1e11 as seconds', () => {
  assert.equal(isoTimestamp('2021-06-30 23:59:59', CODEC_TIMESTAMP), '2021-06-30T23:59:59.000Z');
  assert.equal(toIsoTimestamp(1498000000), '2017-06-20T23:06:40.000Z');
  assert.equal(toIsoTimestamp(1498000000123), '2017-06-20T23:06:40.123Z');
  assert.equal(toIsoTimestamp('yesterday'), undefined);
  assert.equal(toIsoTimestamp(true), undefined);
  assert.equal(epochMillisToIso(Number.NaN), undefined);
});
