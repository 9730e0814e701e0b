// Every ABCL vector kept with the tests and every entry of fixtures/abcl-published-vectors.json (documents published for real devices).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeAbcl, encodeAbcl, loadAbcl } from '../../src/codec/abcl/index.js';
import { hex, mustLoad, readJson, referenceDir, toHex } from './helpers.js';

describe('public vectors', () => {
  test('V1 boolean', () => {
    const doc = mustLoad({ sense: [{ asset: 'motion', value: { byte: 0, bytelength: 1, type: 'boolean' } }] });
    assert.deepEqual(decodeAbcl(doc, hex('01')), { states: { motion: { value: true } }, warnings: [], errors: [] });
  });

  test('V2 byte order', () => {
    const doc = mustLoad({
      sense: [
        { asset: 'big', value: { byte: 0, bytelength: 2, byteorder: 'big', type: 'integer' } },
        { asset: 'little', value: { byte: 0, bytelength: 2, byteorder: 'little', type: 'integer' } },
      ],
    });
    assert.deepEqual(decodeAbcl(doc, hex('08BD')).states, { big: { value: 2237 }, little: { value: 48392 } });
  });

  test('V3 boolean actuation writes FF', () => {
    const doc = mustLoad({ actuate: [{ asset: 'mode', field: { byte: 0, type: 'boolean' } }] });
    const result = encodeAbcl(doc, { mode: true });
    assert.equal(toHex(result.bytes), 'FF');
    assert.deepEqual(result.errors, []);
  });

  test('V4 Ellenex RS1-L original document', () => {
    const doc = mustLoad({
      actuate: [
        { const: 1, field: { byte: 0 }, comment: 'First byte is always 0' },
        { const: 0, field: { byte: 1 }, comment: 'Second byte is always 0' },
        { const: 0, field: { byte: 2 }, comment: 'Third byte is always 0' },
        { const: 1, field: { byte: 3 }, comment: 'Fourth byte needs to be set to 1 for minutes or 0 for seconds' },
        { asset: 'SamplingTime', field: { byte: 4, type: 'integer' }, comment: 'Minimum sleep period is 60 seconds' },
      ],
    });
    const result = encodeAbcl(doc, { SamplingTime: 10 });
    assert.equal(toHex(result.bytes), '010000010A');
    assert.deepEqual(result.warnings, []);
  });

  test('V5 1NCE dialect', () => {
    const doc = mustLoad({
      sense: [
        { asset: 'Temperature', value: { byte: 0, bytelength: 2, type: 'int', signed: true } },
        { asset: 'Humidity', value: { byte: 2, bytelength: 2, type: 'int' } },
        { asset: 'Switch', value: { byte: 4, type: 'boolean' } },
      ],
    });
    assert.deepEqual(decodeAbcl(doc, hex('001A003700')), {
      states: { Temperature: { value: 26 }, Humidity: { value: 55 }, Switch: { value: false } },
      warnings: [],
      errors: [],
    });
  });
});

describe('worked examples', () => {
  test('W1 bit fields', () => {
    const doc = mustLoad({
      sense: [
        { asset: 'alarm', value: { byte: 0, bit: 0, type: 'boolean' } },
        { asset: 'door_open', value: { byte: 0, bit: 3, type: 'boolean' } },
        { asset: 'level', value: { byte: 0, bit: 4, bitlength: 3 } },
        { asset: 'mode', value: { byte: 0, bit: 6, bitlength: 2 } },
        { asset: 'window', value: { byte: 1, bytelength: 2, bit: 4, bitlength: 8 } },
      ],
    });
    assert.deepEqual(decodeAbcl(doc, hex('A91234')).states, {
      alarm: { value: true },
      door_open: { value: true },
      level: { value: 2 },
      mode: { value: 2 },
      window: { value: 35 },
    });
  });

  test('W2 signed little-endian', () => {
    const doc = mustLoad({
      sense: [
        { asset: 'temperature', value: { byte: 0, bytelength: 2, byteorder: 'little', signed: true, calculation: 'val / 10' } },
        { asset: 'counter', value: { byte: 2, bytelength: 4, byteorder: 'little' } },
        { asset: 'offset', value: { byte: 6, bytelength: 2, byteorder: 'little', signed: true } },
      ],
    });
    assert.deepEqual(decodeAbcl(doc, hex('9CFFE80300000080')).states, {
      temperature: { value: -10 },
      counter: { value: 1000 },
      offset: { value: -32768 },
    });
  });

  describe('W3 switch with $default first', () => {
    const doc = mustLoad({
      sense: [
        { asset: 'frame_type', value: { byte: 0 } },
        {
          switch: { byte: 0 },
          on: [
            { case: '$default', comment: 'position in the list does not matter', do: [{ asset: 'unknown_frame', value: { byte: 0, bytelength: 3, type: 'hexstring' } }] },
            { case: 1, do: [{ asset: 'temperature', value: { byte: 1, bytelength: 2, signed: true, calculation: 'val / 100' } }] },
            { case: 2, do: [{ asset: 'battery', value: { byte: 1, calculation: 'val / 50' } }] },
          ],
        },
      ],
    });
    test('01F830', () => {
      assert.deepEqual(decodeAbcl(doc, hex('01F830')), { states: { frame_type: { value: 1 }, temperature: { value: -20 } }, warnings: [], errors: [] });
    });
    test('02A0', () => {
      assert.deepEqual(decodeAbcl(doc, hex('02A0')), { states: { frame_type: { value: 2 }, battery: { value: 3.2 } }, warnings: [], errors: [] });
    });
    test('07AB truncates the hexstring with one warning', () => {
      const result = decodeAbcl(doc, hex('07AB'));
      assert.deepEqual(result.states, { frame_type: { value: 7 }, unknown_frame: { value: '07AB' } });
      assert.equal(result.warnings.length, 1);
      assert.match(result.warnings[0]!, /unknown_frame/);
    });
  });

  describe('W4 nested object with constants', () => {
    const doc = mustLoad({
      sense: [
        {
          asset: 'motion',
          value: {
            accel: {
              x: { byte: 0, signed: true, calculation: 'val * 16' },
              y: { byte: 1, signed: true, calculation: 'val * 16' },
              z: { byte: 2, signed: true, calculation: 'val * 16' },
            },
            unit: 'mg',
            moving: { byte: 3, bit: 7, type: 'boolean' },
          },
        },
      ],
    });
    test('FF023E80', () => {
      const result = decodeAbcl(doc, hex('FF023E80'));
      assert.deepEqual(result.states, { motion: { value: { accel: { x: -16, y: 32, z: 992 }, unit: 'mg', moving: true } } });
      assert.deepEqual(Object.keys((result.states.motion!.value as Record<string, unknown>)), ['accel', 'unit', 'moving']);
    });
    test('FF023E skips the statement with one warning', () => {
      const result = decodeAbcl(doc, hex('FF023E'));
      assert.deepEqual(result.states, {});
      assert.equal(result.warnings.length, 1);
      assert.deepEqual(result.errors, []);
    });
  });

  describe('W5 actuate', () => {
    const doc = mustLoad({
      actuate: [
        { const: 3, field: { byte: 0 }, comment: 'command code: set reporting' },
        { asset: 'interval', field: { byte: 1, bytelength: 2, calculation: 'val * 60' }, comment: 'minutes on the platform, seconds on the device' },
        { asset: 'led', field: { byte: 3, bit: 0, type: 'boolean' } },
      ],
    });
    test('interval 15, led true', () => {
      const result = encodeAbcl(doc, { interval: 15, led: true });
      assert.equal(toHex(result.bytes), '03038401');
      assert.deepEqual([result.warnings, result.errors], [[], []]);
    });
    test('led taken from previous', () => {
      const result = encodeAbcl(doc, { interval: 5 }, { led: true, interval: 15 });
      assert.equal(toHex(result.bytes), '03012C01');
      assert.deepEqual([result.warnings, result.errors], [[], []]);
    });
    test('missing interval left zero with one warning', () => {
      const result = encodeAbcl(doc, { led: false });
      assert.equal(toHex(result.bytes), '03000000');
      assert.equal(result.warnings.length, 1);
      assert.match(result.warnings[0]!, /interval/);
      assert.deepEqual(result.errors, []);
    });
    test('out of range refuses the command', () => {
      const result = encodeAbcl(doc, { interval: 1200 });
      assert.equal(result.bytes.length, 0);
      assert.equal(result.errors.length, 1);
      assert.match(result.errors[0]!, /interval/);
      assert.equal(result.warnings.length, 1);
      assert.match(result.warnings[0]!, /led/);
    });
  });

  test('W6 JSON mode', () => {
    const doc = mustLoad({
      sense: [
        { asset: 'temperature', value: { json: 'm.temp', calculation: 'val / 10' }, at: { json: 't' } },
        { asset: 'moving', value: { json: 'm.flags[1]', type: 'boolean' } },
        { asset: 'first_cell', value: { json: 'cells.0.id' } },
      ],
    });
    const input = { t: '2024-05-01 10:00:00', m: { temp: 215, flags: 6 }, cells: [{ id: 'A1' }, { id: 'B7' }] };
    assert.deepEqual(decodeAbcl(doc, input), {
      states: {
        temperature: { value: 21.5, at: '2024-05-01T10:00:00.000Z' },
        moving: { value: true },
        first_cell: { value: 'A1' },
      },
      warnings: [],
      errors: [],
    });
  });
});

type PublishedVector = {
  name: string;
  direction: 'sense' | 'actuate';
  doc: string | object;
  input: string | Record<string, unknown>;
  previous?: Record<string, unknown>;
  expect: { states?: Record<string, unknown>; bytes?: string; warnings_min?: number; warnings?: number; errors_min?: number };
};

describe('published documents (abcl-published-vectors.json)', () => {
  const vectors = readJson(`${referenceDir}abcl-published-vectors.json`) as PublishedVector[];
  test('the file holds vectors of both directions', () => {
    assert.ok(vectors.length >= 15);
    assert.ok(vectors.some((v) => v.direction === 'actuate'));
  });
  for (const vector of vectors) {
    test(vector.name, () => {
      const loaded = loadAbcl(vector.doc);
      assert.deepEqual(loaded.errors, []);
      assert.equal(loaded.ok, true);
      const doc = loaded.doc!;
      if (vector.direction === 'sense') {
        const input = typeof vector.input === 'string' ? hex(vector.input) : (vector.input as Record<string, never>);
        const result = decodeAbcl(doc, input);
        assert.deepEqual(result.errors, []);
        assert.deepEqual(result.states, vector.expect.states);
        if (vector.expect.warnings_min !== undefined) assert.ok(result.warnings.length >= vector.expect.warnings_min);
        else assert.deepEqual(result.warnings, []);
      } else {
        const result = encodeAbcl(doc, vector.input as Record<string, never>, vector.previous as Record<string, never> | undefined);
        assert.deepEqual(result.errors, []);
        assert.equal(toHex(result.bytes), vector.expect.bytes);
      }
    });
  }
});
