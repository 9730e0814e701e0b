// compileCodec: per-device codec settings into one synchronous DeviceCodec.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { AbclDocumentCache, compileCodec, encodeCborCommand } from '../../src/codec/index.js';
import { hex, repoRoot, toHex } from './helpers.js';

const utf8 = (text: string) => new TextEncoder().encode(text);

describe('compileCodec', () => {
  test('auto: a JSON object, else CBOR; commands default to CBOR', async () => {
    const { codec, errors } = await compileCodec({ uplink: { format: 'auto' } });
    assert.deepEqual(errors, []);
    assert.deepEqual(codec!.decodeUplink(utf8(' {"t": {"value": 1, "at": "2024-05-01T10:00:00+02:00"}}')).states, { t: { value: 1, at: '2024-05-01T08:00:00.000Z' } });
    assert.deepEqual(codec!.decodeUplink(hex('A1 6161 01')).states, { a: { value: 1 } });
    assert.equal(codec!.decodeUplink(hex('FF')).errors.length, 1);
    assert.equal(toHex(codec!.encodeDownlink({ LED: true }).bytes), 'A1634C4544F5');
  });

  test('json: members must be state objects; at needs a zone', async () => {
    const { codec } = await compileCodec({ uplink: { format: 'json' } });
    const result = codec!.decodeUplink(utf8('{"a": {"value": 1}, "b": 2, "c": {"value": 3, "at": "2024-05-01 10:00"}}'));
    assert.deepEqual(result.states, { a: { value: 1 } });
    assert.equal(result.warnings.length, 2);
    assert.equal(codec!.decodeUplink(hex('A0')).errors.length, 1);
  });

  test('cbor', async () => {
    const { codec } = await compileCodec({ uplink: { format: 'cbor' }, downlink: { format: 'cbor', port: 5 } });
    assert.deepEqual(codec!.decodeUplink(encodeCborCommand({ x: 1.5 }).bytes).states, { x: { value: 1.5 } });
    assert.equal(codec!.downlinkPort, 5);
  });

  test('abcl both ways with the previous-value rule, sharing a document cache', async () => {
    const cache = new AbclDocumentCache();
    const document = readFileSync(`${repoRoot}abcl/dimmer.abcl.json`, 'utf8');
    const { codec, errors } = await compileCodec({ uplink: { format: 'abcl', document }, downlink: { format: 'abcl', document } }, { abclCache: cache });
    assert.deepEqual(errors, []);
    assert.equal(cache.size, 1);
    assert.deepEqual(codec!.decodeUplink(hex('80000F21')).states.scene, { value: 2 });
    assert.equal(toHex(codec!.encodeDownlink({ level: 100 }, { previous: { fade: 1.5, on: true, scene: 2 } }).bytes), '01A5FF000F21');
  });

  test('js with one script for both directions', async () => {
    const script = 'function decodeUplink(i) { return { data: { port: i.fPort } } } function encodeDownlink(i) { return { bytes: [i.data.x] } }';
    const { codec, errors } = await compileCodec({ uplink: { format: 'js', script }, downlink: { format: 'js', script } }, { defaultPort: 9 });
    assert.deepEqual(errors, []);
    assert.deepEqual(codec!.decodeUplink(hex('00')).states, { port: { value: 9 } });
    assert.deepEqual(codec!.decodeUplink(hex('00'), { fPort: 2 }).states, { port: { value: 2 } });
    assert.equal(toHex(codec!.encodeDownlink({ x: 7 }).bytes), '07');
    assert.equal(codec!.disabled, false);
    codec!.dispose();
    assert.equal(codec!.decodeUplink(hex('00')).errors.length, 1);
  });

  test('bad settings are refused with every problem listed', async () => {
    const cases: Array<[unknown, number]> = [
      [{ uplink: { format: 'xml' } }, 1],
      [{ uplink: { format: 'abcl' } }, 1],
      [{ uplink: { format: 'abcl', document: '{"sense": [{"asset": 1}], "actuate": 5}' } }, 2],
      [{ uplink: { format: 'abcl', document: { actuate: [] } } }, 1],
      [{ uplink: { format: 'cbor' }, downlink: { format: 'abcl', document: { sense: [] } } }, 1],
      [{ uplink: { format: 'js' } }, 1],
      [{ uplink: { format: 'js', script: 'function encodeDownlink(i) {}' } }, 1],
      [{ uplink: { format: 'cbor' }, downlink: { format: 'cbor', port: 0 } }, 1],
      [{ uplink: 5 }, 1],
    ];
    for (const [settings, count] of cases) {
      const result = await compileCodec(settings as never);
      assert.equal(result.ok, false, JSON.stringify(settings));
      assert.equal(result.errors.length, count, `${JSON.stringify(settings)}: ${result.errors.join('; ')}`);
    }
  });
});
