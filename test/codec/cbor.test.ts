// CBOR vectors and the strictness rules of docs/codecs.md, "CBOR".
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Decoder, type Options } from 'cbor-x';
import { decodeCborDeviceState, decodeCborItem, encodeCborCommand } from '../../src/codec/cbor.js';
import { hex, seededRandom, toHex } from './helpers.js';

const independentDecoder = new Decoder({ useRecords: false, mapsAsObjects: true, int64AsNumber: true } as Options);

describe('encoding', () => {
  const vectors: Array<[Record<string, never> | Record<string, unknown>, string]> = [
    [{ temperature: 23 }, 'A1 6B 74656D7065726174757265 17'],
    [{ temperature: 36 }, 'A1 6B 74656D7065726174757265 18 24'],
    [{ LED: true }, 'A1 63 4C4544 F5'],
    [{ intensity: 3, stop_delay: 1000 }, 'A2 69 696E74656E73697479 03 6A 73746F705F64656C6179 19 03E8'],
    [
      { setpoint: 21.5, offset: -100, ratio: 0.1, name: 'a', color: { r: 255 }, list: [1, 0.25], none: null },
      'A7 68 736574706F696E74 FA 41AC0000 66 6F6666736574 38 63 65 726174696F FB 3FB999999999999A 64 6E616D65 61 61 65 636F6C6F72 A1 61 72 18 FF 64 6C697374 82 01 FA 3E800000 64 6E6F6E65 F6',
    ],
    [{ big: 4294967296, neg: -500, ts: 1700000000000 }, 'A3 63 626967 1B 0000000100000000 63 6E6567 39 01F3 62 7473 1B 0000018BCFE56800'],
  ];
  for (const [command, bytes] of vectors) {
    test(JSON.stringify(command), () => {
      const result = encodeCborCommand(command as Record<string, never>);
      assert.deepEqual(result.errors, []);
      assert.equal(toHex(result.bytes), bytes.replace(/ /g, ''));
      assert.deepEqual(independentDecoder.decode(result.bytes), command);
    });
  }

  test('100000.0 re-encodes as an integer', () => {
    assert.equal(toHex(encodeCborCommand({ x: 100000 }).bytes), 'A161781A000186A0');
  });

  test('shortest heads at every boundary, -0 as 0, 2^64 − 2048 and −2^64', () => {
    const cases: Array<[number, string]> = [
      [0, '00'], [23, '17'], [24, '1818'], [255, '18FF'], [256, '190100'], [65535, '19FFFF'], [65536, '1A00010000'],
      [4294967295, '1AFFFFFFFF'], [-1, '20'], [-24, '37'], [-25, '3818'], [-0, '00'],
      [18446744073709549568, '1BFFFFFFFFFFFFF800'], [-18446744073709551616, '3BFFFFFFFFFFFFFFFF'],
      [1.5, 'FA3FC00000'], [1.1, 'FB3FF199999999999A'], [2 ** 70, 'FA62800000'],
    ];
    for (const [value, expected] of cases) assert.equal(toHex(encodeCborCommand({ v: value }).bytes), `A16176${expected}`, String(value));
  });

  test('non-finite numbers refuse the command', () => {
    const result = encodeCborCommand({ v: Number.NaN });
    assert.equal(result.errors.length, 1);
    assert.equal(result.bytes.length, 0);
  });

  test('random commands round-trip through an independent decoder', () => {
    const random = seededRandom(7);
    const pick = (): unknown => {
      const r = random();
      // cbor-x rounds negative 64-bit integers twice, so the oracle is only used up to 2^53.
      if (r < 0.2) return Math.floor(random() * 2 ** (random() * 53)) * (random() < 0.5 ? -1 : 1) || 0;
      if (r < 0.4) return (random() - 0.5) * 10 ** Math.floor(random() * 15);
      if (r < 0.5) return Math.fround(random() * 1000);
      if (r < 0.6) return random() < 0.5;
      if (r < 0.7) return null;
      return 'ü€' + random().toString(36);
    };
    for (let i = 0; i < 2000; i++) {
      const command: Record<string, unknown> = { a: pick(), b: [pick(), pick()], c: { d: pick() } };
      const bytes = encodeCborCommand(command as Record<string, never>).bytes;
      assert.deepEqual(independentDecoder.decode(bytes), command);
    }
  });
});

describe('device-state decoding', () => {
  test('tag 120 data point with time and geo', () => {
    const result = decodeCborDeviceState(hex('D8 78 83 A1 6B 74656D7065726174757265 F9 4DE0 C1 1A 59682F00 D8 67 83 FB 404664AF4F0D844D FB 403472EB1C432CA5 18 75'));
    assert.deepEqual(result, {
      states: {
        temperature: { value: 23.5, at: '2017-07-14T02:40:00.000Z' },
        location: { value: { latitude: 44.7866, longitude: 20.4489, altitude: 117 }, at: '2017-07-14T02:40:00.000Z' },
      },
      warnings: [],
      errors: [],
    });
  });

  test('byte string to hex and Tag 103 below the top level', () => {
    const result = decodeCborDeviceState(hex('A2 63 6D6163 46 3B1592BDC3D3 63 706F73 D8 67 82 F9 5262 F9 4377'));
    assert.deepEqual(result, { states: { mac: { value: '3B1592BDC3D3' }, pos: { value: { latitude: 51.0625, longitude: 3.732421875 } } }, warnings: [], errors: [] });
  });

  test('tag 120 on a bare map, and data points with null/absent elements', () => {
    assert.deepEqual(decodeCborDeviceState(hex('D878 A1 6161 01')).states, { a: { value: 1 } });
    assert.deepEqual(decodeCborDeviceState(hex('D878 81 A1 6161 01')).states, { a: { value: 1 } });
    assert.deepEqual(decodeCborDeviceState(hex('D878 83 A1 6161 01 F6 82 01 02')).states, { a: { value: 1 }, location: { value: { latitude: 1, longitude: 2 } } });
    const extra = decodeCborDeviceState(hex('D878 84 A1 6161 01 F6 F6 00'));
    assert.deepEqual(extra.states, { a: { value: 1 } });
    assert.equal(extra.warnings.length, 1);
  });

  test('time element forms: untagged seconds, Tag 0 zone-less string, Tag 1001', () => {
    assert.equal(decodeCborDeviceState(hex('D878 82 A1 6161 01 1A 59682F00')).states.a!.at, '2017-07-14T02:40:00.000Z');
    const text = new TextEncoder().encode('2021-06-30 23:59:59');
    const tag0 = hex(`D878 82 A1 6161 01 C0 73 ${toHex(text)}`);
    assert.equal(decodeCborDeviceState(tag0).states.a!.at, '2021-06-30T23:59:59.000Z');
    assert.equal(decodeCborDeviceState(hex('D878 82 A1 6161 01 D9 03E9 A2 01 1A 59682F00 22 19 01F4')).states.a!.at, '2017-07-14T02:40:00.500Z');
    const bad = decodeCborDeviceState(hex('D878 82 A1 6161 01 F5'));
    assert.deepEqual(bad.states, { a: { value: 1 } });
    assert.equal(bad.warnings.length, 1);
  });

  test('geo replaces a location member with a warning; a malformed geo is dropped', () => {
    const replaced = decodeCborDeviceState(hex('D878 83 A1 686C6F636174696F6E 01 F6 D867 82 01 02'));
    assert.deepEqual(replaced.states, { location: { value: { latitude: 1, longitude: 2 } } });
    assert.equal(replaced.warnings.length, 1);
    const malformed = decodeCborDeviceState(hex('D878 83 A1 6161 01 F6 D867 81 01'));
    assert.deepEqual(malformed.states, { a: { value: 1 } });
    assert.equal(malformed.warnings.length, 1);
  });

  test('keys: integers become strings, other key types drop the entry, repeats warn and the last wins', () => {
    const result = decodeCborDeviceState(hex('A4 01 01 F4 02 6161 03 6161 04'));
    assert.deepEqual(result.states, { '1': { value: 1 }, a: { value: 4 } });
    assert.equal(result.warnings.length, 2);
  });

  test('__proto__ as an asset name stays an own member', () => {
    const result = decodeCborDeviceState(hex('A1 69 5F5F70726F746F5F5F 01'));
    assert.equal(Object.keys(result.states)[0], '__proto__');
    assert.equal(Object.getPrototypeOf(result.states), Object.prototype);
  });

  const errorCases: Array<[string, string]> = [
    ['empty payload', ''],
    ['not a map', '01'],
    ['a bare array', '83010203'],
    ['tag 120 around a number', 'D87801'],
    ['tag 120 around an array of a non-map', 'D8788101'],
    ['tag 120 around an empty array', 'D87880'],
    ['another tag at the top', 'C1A0'],
    ['truncated', 'A2616101'],
    ['truncated head', 'A1616119'],
    ['bytes left over', 'A0A0'],
    ['indefinite byte string', 'A1 6161 5F42010243030405FF'],
    ['indefinite text string', 'A1 6161 7F6161FF'],
    ['reserved additional information', 'A1 6161 1C'],
    ['stray break', 'A1 6161 FF'],
    ['simple value in two bytes below 32', 'A1 6161 F810'],
    ['a length beyond the payload', 'A1 6161 9B00000000FFFFFFFF'],
    ['nesting deeper than 32', `A1 6161 ${'81'.repeat(32)} 01`],
    ['deep tag chain', `A1 6161 ${'C6'.repeat(40)} 01`],
  ];
  for (const [name, bytes] of errorCases) {
    test(`error: ${name}`, () => {
      const result = decodeCborDeviceState(hex(bytes));
      assert.deepEqual(result.states, {});
      assert.equal(result.errors.length, 1);
    });
  }

  test('nesting of exactly 32 levels is accepted', () => {
    const result = decodeCborDeviceState(hex(`A1 6161 ${'81'.repeat(31)} 01`));
    assert.deepEqual(result.errors, []);
  });

  test('indefinite-length arrays and maps are accepted', () => {
    assert.deepEqual(decodeCborDeviceState(hex('BF 6161 9F 01 02 FF FF')).states, { a: { value: [1, 2] } });
  });
});

describe('item conversions', () => {
  const items: Array<[string, unknown, number]> = [
    ['00', 0, 0], ['1818', 24, 0], ['1903E8', 1000, 0], ['20', -1, 0], ['3863', -100, 0],
    ['1B000000E8D4A51000', 1000000000000, 0], ['F4', false, 0], ['F5', true, 0], ['F6', null, 0],
    ['6161', 'a', 0], ['83010203', [1, 2, 3], 0], ['A26161016162820203', { a: 1, b: [2, 3] }, 0],
    ['C11A514B67B0', '2013-03-21T20:04:00.000Z', 0], ['F93E00', 1.5, 0], ['FB3FF199999999999A', 1.1, 0],
    ['FA47C35000', 100000, 0], ['F90001', 5.960464477539063e-8, 0], ['F97C00', null, 1],
    ['3BFFFFFFFFFFFFFFFF', -18446744073709552000, 1], ['F7', null, 1], ['4401020304', '01020304', 0],
    ['9F018202039F0405FFFF', [1, [2, 3], [4, 5]], 0], ['BF61610161629F0203FFFF', { a: 1, b: [2, 3] }, 0],
    ['C074323031332D30332D32315432303A30343A30305A', '2013-03-21T20:04:00.000Z', 0],
    ['FB7FF8000000000000', null, 1], ['F0', null, 1], ['F8FF', null, 1],
    ['C249010000000000000000', 18446744073709551616, 0], ['C349010000000000000000', -18446744073709551617, 1],
    ['C2 49 010000000000000001', 18446744073709551617, 1], ['D9 03E8 01', 1, 1], ['D878 01', 1, 1],
    ['D867 83 01 02 03', { latitude: 1, longitude: 2, altitude: 3 }, 0], ['D867 81 01', [1], 1],
    ['C1 FB 41D452D9EC200000', '2013-03-21T20:04:00.500Z', 0],
    ['62 C328', '\uFFFD(', 0],
  ];
  for (const [bytes, value, warnings] of items) {
    test(bytes, () => {
      const result = decodeCborItem(hex(bytes));
      assert.deepEqual(result.errors, []);
      assert.deepEqual(result.value, value);
      assert.equal(result.warnings.length, warnings);
    });
  }
  test('5F42010243030405FF is an error', () => {
    assert.equal(decodeCborItem(hex('5F42010243030405FF')).errors.length, 1);
  });
});
