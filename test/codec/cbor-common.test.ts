// The common-path CBOR reader (src/codec/cbor-common.ts) must never change a result: on generated
// and mutated payloads, decoding gives exactly what the general reader alone gives.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder, type Options } from 'cbor-x';
import { decodeCborDeviceState, decodeCborDeviceStateInFull, decodeCborItem, decodeCborItemInFull, encodeCborCommand } from '../../src/codec/cbor.js';
import { hex, seededRandom } from './helpers.js';

/** Writes CBOR by hand, so a payload can hold what no encoder writes: repeats, odd widths, breaks. */
class Writer {
  readonly bytes: number[] = [];

  head(major: number, argument: number, random: () => number): void {
    // Not always the shortest form: a longer head is well-formed and must decode the same.
    const widths = [argument < 24 ? 0 : 99, argument < 256 ? 24 : 99, argument < 65536 ? 25 : 99, argument < 2 ** 32 ? 26 : 99, 27].filter((w) => w !== 99);
    const info = random() < 0.8 ? widths[0]! : widths[Math.floor(random() * widths.length)]!;
    if (info === 0) return void this.bytes.push((major << 5) | argument);
    this.bytes.push((major << 5) | info);
    const size = { 24: 1, 25: 2, 26: 4, 27: 8 }[info]!;
    for (let i = size - 1; i >= 0; i--) this.bytes.push(Number((BigInt(argument) >> BigInt(8 * i)) & 0xffn));
  }

  text(text: string, random: () => number): void {
    const encoded = new TextEncoder().encode(text);
    this.head(3, encoded.length, random);
    this.bytes.push(...encoded);
  }
}

const KEYS = ['temperature', 'humidity', 'open', 'a', '', 'location', '__proto__', 'toString', 'constructor', 'ü', 'k'.repeat(40), '😀', '1', 'value'];
const TEXTS = ['', 'kitchen', 'ü€', 'x'.repeat(33), '\u0000', '2021-06-30T10:00:00Z'];
const NUMBERS = [0, 1, 23, 24, 255, 256, 65535, 65536, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 64 - 1];

function writeItem(w: Writer, random: () => number, depth: number): void {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const roll = random();
  if (roll < 0.18) w.head(0, pick(NUMBERS) === 2 ** 64 - 1 ? 2 ** 32 + 7 : Math.min(pick(NUMBERS), 2 ** 53), random);
  else if (roll < 0.26) {
    const n = pick(NUMBERS);
    if (n >= 2 ** 53) w.bytes.push(0x3b, 0x00, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, random() < 0.5 ? 0xfe : 0xff);
    else w.head(1, n, random);
  } else if (roll < 0.4) {
    const kind = pick([0xf9, 0xfa, 0xfb]);
    const value = pick([21.5, -0, 0.1, 1e300, Number.NaN, Infinity, -Infinity, 65504, 5.960464477539063e-8]);
    const view = new DataView(new ArrayBuffer(8));
    if (kind === 0xf9) w.bytes.push(0xf9, ...pick([[0x4d, 0x60], [0x7c, 0x00], [0x00, 0x01], [0x80, 0x00], [0x7e, 0x00]]));
    else if (kind === 0xfa) {
      view.setFloat32(0, value);
      w.bytes.push(0xfa, ...new Uint8Array(view.buffer, 0, 4));
    } else {
      view.setFloat64(0, value);
      w.bytes.push(0xfb, ...new Uint8Array(view.buffer, 0, 8));
    }
  } else if (roll < 0.52) w.text(pick(TEXTS), random);
  else if (roll < 0.58) w.bytes.push(pick([0xf4, 0xf5, 0xf6, 0xf7, 0xf0, 0xf8, 0xff, 0x1c]));
  else if (roll < 0.62) {
    w.head(2, 3, random);
    w.bytes.push(1, 2, 3);
  } else if (roll < 0.66) {
    w.bytes.push(pick([0xc0, 0xc1, 0xc2, 0xd8]));
    if (w.bytes[w.bytes.length - 1] === 0xd8) w.bytes.push(pick([0x67, 0x78, 0x40]));
    writeItem(w, random, depth + 1);
  } else if (roll < 0.83 || depth > 34) {
    const length = Math.floor(random() * 4);
    const indefinite = random() < 0.05;
    if (indefinite) w.bytes.push(0x9f);
    else w.head(4, length, random);
    for (let i = 0; i < length; i++) writeItem(w, random, depth + 1);
    if (indefinite) w.bytes.push(0xff);
  } else writeMap(w, random, depth + 1);
}

function writeMap(w: Writer, random: () => number, depth: number): void {
  const length = Math.floor(random() * 5);
  const indefinite = random() < 0.05;
  if (indefinite) w.bytes.push(0xbf);
  else w.head(5, length, random);
  for (let i = 0; i < length; i++) {
    if (random() < 0.05) w.head(0, Math.floor(random() * 3), random);
    else w.text(KEYS[Math.floor(random() * KEYS.length)]!, random);
    if (depth > 34 || random() < 0.7) w.head(0, i, random);
    else writeItem(w, random, depth);
  }
  if (indefinite) w.bytes.push(0xff);
}

/** Small damage: a payload cut short, one byte changed, one byte added. */
function mutate(bytes: Uint8Array, random: () => number): Uint8Array {
  const roll = random();
  if (bytes.length === 0 || roll < 0.6) return bytes;
  if (roll < 0.75) return bytes.subarray(0, Math.floor(random() * bytes.length));
  if (roll < 0.9) {
    const changed = bytes.slice();
    changed[Math.floor(random() * changed.length)] = Math.floor(random() * 256);
    return changed;
  }
  const longer = new Uint8Array(bytes.length + 1);
  longer.set(bytes);
  longer[bytes.length] = Math.floor(random() * 256);
  return longer;
}

function assertSame(actual: unknown, expected: unknown, bytes: Uint8Array): void {
  const shown = Buffer.from(bytes).toString('hex');
  assert.deepStrictEqual(actual, expected, shown);
  // deepStrictEqual ignores member order; the stored JSON does not.
  assert.equal(JSON.stringify(actual), JSON.stringify(expected), shown);
}

describe('the common path never changes a result', () => {
  test('30 000 generated and mutated device states and items', () => {
    const random = seededRandom(8949);
    let common = 0;
    for (let i = 0; i < 30_000; i++) {
      const w = new Writer();
      if (random() < 0.8) writeMap(w, random, 0);
      else writeItem(w, random, 0);
      const bytes = mutate(Uint8Array.from(w.bytes), random);
      const full = decodeCborDeviceStateInFull(bytes);
      assertSame(decodeCborDeviceState(bytes), full, bytes);
      if (full.errors.length === 0 && full.warnings.length === 0) common++;
      for (const keepNonFinite of [false, true]) assertSame(decodeCborItem(bytes, { keepNonFinite }), decodeCborItemInFull(bytes, { keepNonFinite }), bytes);
    }
    // The generator must reach both readers often.
    assert.ok(common > 3000 && common < 27_000, `${common} clean states`);
  });

  test('what other encoders write: cbor-x and our own, with many distinct keys (the key cache)', () => {
    const random = seededRandom(21);
    const cborX = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true } as Options);
    for (let i = 0; i < 5000; i++) {
      const state: Record<string, unknown> = {};
      for (let k = Math.floor(random() * 6); k > 0; k--) {
        const name = `asset${Math.floor(random() * 3000)}`;
        state[name] = [Math.floor(random() * 2 ** 40) - 2 ** 39, random() * 100, `s${i}`, random() < 0.5, null, [1, { x: 2.5 }]][Math.floor(random() * 6)];
      }
      for (const bytes of [new Uint8Array(cborX.encode(state)), encodeCborCommand(state as never).bytes]) {
        const full = decodeCborDeviceStateInFull(bytes);
        assert.deepEqual(full.errors, []);
        assertSame(decodeCborDeviceState(bytes), full, bytes);
      }
    }
  });

  test('keys read from one reused Buffer (as Node reuses payload buffers) are remembered by value, not by reference', () => {
    const payload = Buffer.from(hex('A1 68 6173736574303030 01'));
    for (let i = 0; i < 3000; i++) {
      const name = `asset${String(i).padStart(3, '0')}`.slice(-8);
      payload.write(name, 2, 'latin1');
      assert.deepEqual(Object.keys(decodeCborDeviceState(payload).states), [name]);
    }
  });

  test('the three-asset state of the benchmark', () => {
    const bytes = hex('A3 6B 74656D7065726174757265 FB 4035800000000000 68 68756D6964697479 18 2D 64 6F70656E F5');
    assert.equal(bytes.length, 39);
    assert.deepStrictEqual(decodeCborDeviceState(bytes), { states: { temperature: { value: 21.5 }, humidity: { value: 45 }, open: { value: true } }, warnings: [], errors: [] });
  });
});
