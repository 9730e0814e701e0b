// Property test (decode(encode(x)) == x for generated actuate/sense pairs) and fuzzing of every
// abcl/ example document, the CBOR decoder and a JS codec with random payloads.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeAbcl, encodeAbcl, loadAbcl } from '../../src/codec/abcl/index.js';
import { decodeCborDeviceState } from '../../src/codec/cbor.js';
import { getQuickJSModule, JsCodec } from '../../src/codec/js/index.js';
import { mustLoad, repoRoot, seededRandom } from './helpers.js';

type FieldSpec = { byte: number; bytelength: number; type: string; signed?: boolean; byteorder?: string; bit?: number; bitlength?: number };

/** A random field layout that fits its bytes, and a random value that the field can hold. */
function randomField(random: () => number, byte: number): { field: FieldSpec; value: unknown } {
  const kind = Math.floor(random() * 6);
  const byteorder = random() < 0.5 ? 'little' : 'big';
  if (kind === 0 || kind === 1) {
    const bytelength = 1 + Math.floor(random() * 8);
    const signed = random() < 0.5;
    const useBits = kind === 1;
    const width = useBits ? 1 + Math.floor(random() * Math.min(53, 8 * bytelength)) : 8 * bytelength;
    const bit = useBits ? Math.floor(random() * (8 * bytelength - width + 1)) : undefined;
    // Values stay exact doubles: at most 53 significant bits.
    const magnitudeBits = Math.min(width - (signed ? 1 : 0), 53);
    let value = Math.floor(random() * 2 ** magnitudeBits);
    if (signed && random() < 0.5) value = -value - (magnitudeBits < width - 1 ? 0 : 1);
    if (signed && value < -(2 ** (width - 1))) value = -(2 ** (width - 1));
    const field: FieldSpec = { byte, bytelength, type: 'integer', signed, byteorder };
    if (useBits) Object.assign(field, { bit, bitlength: width });
    return { field, value };
  }
  if (kind === 2) {
    const bytelength = [2, 4, 8][Math.floor(random() * 3)]!;
    let value = (random() - 0.5) * 10 ** Math.floor(random() * 6);
    if (bytelength === 4) value = Math.fround(value);
    // binary16 holds multiples of 1/16 exactly up to 128 in magnitude.
    if (bytelength === 2) value = Math.round(random() * 4096 - 2048) / 16;
    return { field: { byte, bytelength, type: 'number', byteorder }, value };
  }
  if (kind === 3) {
    const bytelength = 1 + Math.floor(random() * 3);
    return { field: { byte, bytelength, type: 'boolean' }, value: random() < 0.5 };
  }
  if (kind === 4) {
    const bytelength = 1 + Math.floor(random() * 6);
    let text = '';
    const length = Math.floor(random() * (bytelength + 1));
    for (let i = 0; i < length; i++) text += String.fromCharCode(0x21 + Math.floor(random() * 94));
    return { field: { byte, bytelength, type: 'string' }, value: text };
  }
  const bytelength = 1 + Math.floor(random() * 6);
  let text = '';
  for (let i = 0; i < 2 * bytelength; i++) text += '0123456789ABCDEF'[Math.floor(random() * 16)];
  return { field: { byte, bytelength, type: 'hexstring', byteorder }, value: text };
}

describe('property: decode(encode(x)) == x', () => {
  test('2000 generated documents with 1–6 fields each', () => {
    const random = seededRandom(20240501);
    let checked = 0;
    for (let round = 0; round < 2000; round++) {
      const count = 1 + Math.floor(random() * 6);
      const actuate: object[] = [];
      const sense: object[] = [];
      const command: Record<string, unknown> = {};
      let byte = 0;
      for (let i = 0; i < count; i++) {
        const { field, value } = randomField(random, byte);
        byte += field.bytelength + Math.floor(random() * 2);
        actuate.push({ asset: `a${i}`, field });
        sense.push({ asset: `a${i}`, value: field });
        command[`a${i}`] = value;
      }
      const doc = mustLoad({ actuate, sense });
      const encoded = encodeAbcl(doc, command as never);
      assert.deepEqual(encoded.errors, [], JSON.stringify({ actuate, command }));
      const decoded = decodeAbcl(doc, encoded.bytes);
      const roundTripped = Object.fromEntries(Object.entries(decoded.states).map(([asset, state]) => [asset, state.value]));
      assert.deepEqual(roundTripped, command, JSON.stringify({ actuate, command, bytes: [...encoded.bytes] }));
      checked++;
    }
    assert.equal(checked, 2000);
  });
});

function assertDecodeShape(result: { states: object; warnings: string[]; errors: string[] }): void {
  assert.ok(Array.isArray(result.warnings) && Array.isArray(result.errors));
  if (result.errors.length > 0) assert.deepEqual(result.states, {});
}

function randomPayload(random: () => number, maxLength: number): Uint8Array {
  const bytes = new Uint8Array(Math.floor(random() * (maxLength + 1)));
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  return bytes;
}

describe('fuzzing', () => {
  test('100 000 random payloads through every abcl/ example document', () => {
    const random = seededRandom(99);
    const documents = readdirSync(`${repoRoot}abcl/`).filter((name) => name.endsWith('.abcl.json')).map((name) => mustLoad(readFileSync(`${repoRoot}abcl/${name}`, 'utf8')));
    assert.equal(documents.length, 5);
    let decoded = 0;
    for (let i = 0; i < 100_000; i++) {
      const payload = randomPayload(random, 24);
      for (const doc of documents) {
        assertDecodeShape(decodeAbcl(doc, payload));
        decoded++;
      }
    }
    assert.equal(decoded, 500_000);
  });

  test('random actuate commands never throw', () => {
    const random = seededRandom(5);
    const dimmer = mustLoad(readFileSync(`${repoRoot}abcl/dimmer.abcl.json`, 'utf8'));
    const candidates: unknown[] = [0, 1, -1, 0.5, 255, 1e300, -1e300, true, false, null, 'x', '', [], {}, 2 ** 64, Number.MAX_VALUE];
    for (let i = 0; i < 20_000; i++) {
      const pick = () => candidates[Math.floor(random() * candidates.length)];
      const result = encodeAbcl(dimmer, { level: pick(), fade: pick(), on: pick(), scene: pick() } as never);
      if (result.errors.length > 0) assert.equal(result.bytes.length, 0);
      else assert.equal(result.bytes.length, 6);
    }
  });

  test('random documents never throw while loading', () => {
    const random = seededRandom(11);
    const atoms: unknown[] = [0, 1, -1, 2.5, 9, 'x', '', 'val', 'val / 0', '$payloadLength', '$default', 'integer', 'string', 'little', 'a.b[0]', true, false, null];
    const keys = ['byte', 'json', 'bytelength', 'byteorder', 'type', 'signed', 'bit', 'bitlength', 'calculation', 'asset', 'value', 'switch', 'on', 'case', 'do', 'at', 'const', 'field', 'comment', 'sense', 'actuate'];
    const build = (depth: number): unknown => {
      const r = random();
      if (depth > 4 || r < 0.35) return atoms[Math.floor(random() * atoms.length)];
      if (r < 0.55) return Array.from({ length: Math.floor(random() * 4) }, () => build(depth + 1));
      const object: Record<string, unknown> = {};
      for (let i = Math.floor(random() * 5); i > 0; i--) object[keys[Math.floor(random() * keys.length)]!] = build(depth + 1);
      return object;
    };
    let loaded = 0;
    for (let i = 0; i < 20_000; i++) {
      const result = loadAbcl({ sense: build(0), actuate: build(0) } as object);
      assert.equal(result.ok, result.errors.length === 0);
      if (result.ok) {
        loaded++;
        assertDecodeShape(decodeAbcl(result.doc!, randomPayload(random, 12)));
      }
    }
    assert.ok(loaded > 0);
  });

  test('100 000 random payloads through the CBOR decoder', () => {
    const random = seededRandom(1234);
    const prefixes = [[], [0xa1, 0x61, 0x61], [0xd8, 0x78, 0x83, 0xa1, 0x61, 0x61], [0xbf, 0x61, 0x61]];
    for (let i = 0; i < 100_000; i++) {
      const prefix = prefixes[i % prefixes.length]!;
      const body = randomPayload(random, 16);
      const payload = new Uint8Array(prefix.length + body.length);
      payload.set(prefix);
      payload.set(body, prefix.length);
      assertDecodeShape(decodeCborDeviceState(payload));
    }
  });

  test('100 000 random payloads through a JS codec', async () => {
    const loaded = JsCodec.load(await getQuickJSModule(), `function decodeUplink(input) {
      var b = input.bytes;
      if (b.length === 0) return { data: {}, errors: ['empty'] };
      if (b[0] === 0xEE) throw new RangeError('bad type ' + b[0]);
      if (b[0] === 0xAA) return [b.length];
      var t = ((b[1] << 8) | b[2]) << 16 >> 16;
      return { data: { type: b[0], temperature: t / 100, text: String.fromCharCode.apply(null, b.slice(3, 8)) } };
    }`);
    const codec = loaded.codec!;
    try {
      const random = seededRandom(77);
      let outcomes = { ok: 0, failed: 0 };
      for (let i = 0; i < 100_000; i++) {
        const payload = randomPayload(random, 12);
        if (i % 50 === 0) payload[0] = 0xee;
        const result = codec.decode(payload, { fPort: 1 });
        assertDecodeShape(result);
        if (result.errors.length === 0) outcomes.ok++;
        else outcomes.failed++;
      }
      assert.ok(outcomes.ok > 85_000 && outcomes.failed > 1000, JSON.stringify(outcomes));
      assert.equal(codec.disabled, false);
    } finally {
      codec.dispose();
    }
  });
});
