// JavaScript codecs in the QuickJS sandbox (docs/codecs.md, "JavaScript codecs").
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createQuickJSModule, getQuickJSModule, JsCodec, type JsCodecOptions } from '../../src/codec/js/index.js';
import type { QuickJSWASMModule } from '../../src/codec/js/quickjs-module.js';
import { hex, toHex } from './helpers.js';

let module: QuickJSWASMModule;
const codecs: JsCodec[] = [];
before(async () => {
  module = await getQuickJSModule();
});
after(() => {
  for (const codec of codecs) codec.dispose();
});

function load(source: string, options: JsCodecOptions = {}): JsCodec {
  const result = JsCodec.load(module, source, options);
  assert.deepEqual(result.errors, []);
  codecs.push(result.codec!);
  return result.codec!;
}

describe('examples', () => {
  test('AllThingsTalk uplink converter', () => {
    const codec = load(`function converter(code) {
      var t = parseInt(code.substr(0, 4), 16);
      if (t > 0x7fff) t -= 0x10000;
      return JSON.stringify({ temperature: { value: t / 100 }, raw: { value: code } });
    }`);
    assert.equal(codec.uplinkConvention, 'converter');
    assert.deepEqual(codec.decode(hex('F830')), { states: { temperature: { value: -20 }, raw: { value: 'F830' } }, warnings: [], errors: [] });
  });

  test('AllThingsTalk downlink converter', () => {
    const codec = load(`function converter(code) {
      var cmd = JSON.parse(code);
      var v = cmd.interval ? cmd.interval.value : 10;
      return JSON.stringify({ data: '01' + ('0000' + v.toString(16)).slice(-4).toUpperCase(), meta: { port: 6, confirmed: false } });
    }`);
    const result = codec.encode({ interval: 300 });
    assert.equal(toHex(result.bytes), '01012C');
    assert.equal(result.fPort, 6);
    assert.equal(result.confirmed, false);
    assert.deepEqual(result.errors, []);
  });

  describe('TTS/ChirpStack', () => {
    const source = `function decodeUplink(input) {
      if (input.fPort !== 2) return { data: {}, warnings: ['ignored port ' + input.fPort] };
      return { data: { battery: input.bytes[0] / 10, open: (input.bytes[1] & 1) === 1 } };
    }
    function encodeDownlink(input) { return { bytes: [input.data.open ? 1 : 0], fPort: 3 }; }`;
    test('uplink on port 2', () => {
      assert.deepEqual(load(source).decode(hex('2101'), { fPort: 2 }), { states: { battery: { value: 3.3 }, open: { value: true } }, warnings: [], errors: [] });
    });
    test('uplink on port 5: no states, one warning', () => {
      const result = load(source).decode(hex('2101'), { fPort: 5 });
      assert.deepEqual(result.states, {});
      assert.equal(result.warnings.length, 1);
      assert.deepEqual(result.errors, []);
    });
    test('downlink', () => {
      const result = load(source).encode({ open: true });
      assert.equal(toHex(result.bytes), '01');
      assert.equal(result.fPort, 3);
    });
  });

  test('errors array gives the error', () => {
    const result = load(`function decodeUplink(i) { return { data: {}, errors: ['bad frame'] }; }`).decode(hex('00'));
    assert.deepEqual(result, { states: {}, warnings: [], errors: ['bad frame'] });
  });

  test('an infinite loop times out within its budget', () => {
    const codec = load(`function decodeUplink(i) { while (true) {} }`, { limits: { timeoutMs: 50 } });
    const started = performance.now();
    const result = codec.decode(hex('00'));
    const elapsed = performance.now() - started;
    assert.equal(result.errors.length, 1);
    assert.match(result.errors[0]!, /timed out after 50 ms/);
    // Stopped, not run on: the margin allows for a heavily loaded test machine.
    assert.ok(elapsed < 50 + 2000, `took ${elapsed} ms`);
  });

  test('a wrong shape is an invalid result', () => {
    const result = load(`function decodeUplink(i) { return [1, 2]; }`).decode(hex('00'));
    assert.equal(result.errors.length, 1);
    assert.match(result.errors[0]!, /invalid result/);
  });

  test('host objects are absent', () => {
    const result = load(`function decodeUplink(i) { return { data: { t: typeof require + typeof process + typeof setTimeout } }; }`).decode(hex('00'));
    assert.deepEqual(result.states, { t: { value: 'undefinedundefinedundefined' } });
  });
});

describe('conventions and validation', () => {
  test('precedence: decodeUplink over Decoder over converter; encodeDownlink over Encoder over converter', () => {
    const codec = load(`function converter(c) { return null } function Decoder(b) { return { via: 'Decoder' } }
      function decodeUplink(i) { return { data: { via: 'decodeUplink' } } } function Encoder(o) { return [2] }
      function encodeDownlink(i) { return { bytes: [1] } }`);
    assert.equal(codec.uplinkConvention, 'decodeUplink');
    assert.equal(codec.downlinkConvention, 'encodeDownlink');
    assert.deepEqual(codec.decode(hex('00')).states, { via: { value: 'decodeUplink' } });
    const legacy = load(`function converter(c) { return null } function Decoder(b, port) { return { port: port, n: b.length } } function Encoder(o, port) { return new Uint8Array([o.x, port]) }`, { defaultPort: 9 });
    assert.equal(legacy.uplinkConvention, 'Decoder');
    assert.deepEqual(legacy.decode(hex('0102')).states, { port: { value: 9 }, n: { value: 2 } });
    assert.equal(toHex(legacy.encode({ x: 7 }).bytes), '0709');
    assert.equal(toHex(legacy.encode({ x: 7 }, { fPort: 4 }).bytes), '0704');
  });

  test('decodeUplink input: bytes, fPort default 1, recvTime as a sandbox Date, variables', () => {
    const codec = load(`function decodeUplink(i) { return { data: { port: i.fPort, isDate: i.recvTime instanceof Date, at: i.recvTime.toISOString(), v: i.variables.k, n: i.bytes.length } } }`, { variables: { k: 'x' } });
    assert.deepEqual(codec.decode(hex('0102'), { receivedAt: '2024-05-01T10:00:00.000Z' }).states, {
      port: { value: 1 }, isDate: { value: true }, at: { value: '2024-05-01T10:00:00.000Z' }, v: { value: 'x' }, n: { value: 2 },
    });
  });

  test('converter uplink: null means nothing, members without value dropped, bad at dropped', () => {
    const nothing = load(`function converter(c) { return 'null' }`).decode(hex('00'));
    assert.deepEqual(nothing, { states: {}, warnings: [], errors: [] });
    const result = load(`function converter(c) { return { a: { value: 1, at: '2021-06-30 23:59:59' }, b: { x: 1 }, c: { value: 2, at: 'yesterday' }, d: { value: 3, at: 1600000000 } } }`).decode(hex('00'));
    assert.deepEqual(result.states, { a: { value: 1, at: '2021-06-30T23:59:59.000Z' }, c: { value: 2 }, d: { value: 3, at: '2020-09-13T12:26:40.000Z' } });
    assert.equal(result.warnings.length, 2);
    assert.match(load(`function converter(c) { return '{bad' }`).decode(hex('00')).errors[0]!, /invalid result/);
    assert.match(load(`function converter(c) { return 5 }`).decode(hex('00')).errors[0]!, /invalid result/);
  });

  test('converter downlink: plain hex, and refusals', () => {
    assert.equal(toHex(load(`function converter(c) { return 'a1b2' }`).encode({ x: 1 }).bytes), 'A1B2');
    for (const body of [`return null`, `return ''`, `return 'abc'`, `return 'zz'`, `return { data: '01', meta: { port: 0 } }`, `return { data: '01', meta: { confirmed: 'yes' } }`, `return 5`]) {
      const result = load(`function converter(c) { ${body} }`).encode({ x: 1 });
      assert.equal(result.errors.length, 1, body);
      assert.equal(result.bytes.length, 0);
    }
  });

  test('encodeDownlink bytes are validated, not clamped; fPort validated', () => {
    for (const body of [`return { bytes: [256] }`, `return { bytes: [1.5] }`, `return { bytes: [-1] }`, `return { bytes: 'x' }`, `return { bytes: [1], fPort: 224 }`, `return { bytes: [1], errors: ['no'] }`]) {
      const result = load(`function encodeDownlink(i) { ${body} }`).encode({ x: 1 });
      assert.equal(result.errors.length, 1, body);
      assert.equal(result.bytes.length, 0);
    }
    const typed = load(`function encodeDownlink(i) { return { bytes: new Uint8Array([1, 255]), warnings: [{ w: 1 }] } }`).encode({ x: 1 });
    assert.equal(toHex(typed.bytes), '01FF');
    assert.deepEqual(typed.warnings, ['{"w":1}']);
  });

  test('encodeDownlink receives fPort only when the command names one', () => {
    const codec = load(`function encodeDownlink(i) { return { bytes: [i.fPort === undefined ? 0 : i.fPort] } }`);
    assert.equal(toHex(codec.encode({ x: 1 }).bytes), '00');
    assert.equal(toHex(codec.encode({ x: 1 }, { fPort: 5 }).bytes), '05');
  });

  test('a throw names the error', () => {
    const result = load(`function decodeUplink(i) { return i.nothing.x }`).decode(hex('00'));
    assert.equal(result.errors.length, 1);
    assert.match(result.errors[0]!, /^codec threw: TypeError: /);
    assert.match(load(`function decodeUplink(i) { throw 'plain' }`).decode(hex('00')).errors[0]!, /codec threw: Error: plain/);
  });

  test('NaN arrives as null, undefined members vanish, functions cannot leak', () => {
    const result = load(`function decodeUplink(i) { return { data: { n: NaN, u: undefined, f: function () {} } } }`).decode(hex('00'));
    assert.deepEqual(result.states, { n: { value: null } });
  });

  test('a cyclic result is an invalid result', () => {
    const result = load(`function decodeUplink(i) { var d = {}; d.self = d; return { data: d } }`).decode(hex('00'));
    assert.match(result.errors[0]!, /invalid result/);
  });

  test('a result text longer than 256 KiB is an error', () => {
    const result = load(`function decodeUplink(i) { return { data: { s: new Array(300 * 1024).join('x') } } }`).decode(hex('00'));
    assert.match(result.errors[0]!, /invalid result/);
  });

  test('load errors: syntax, ES module syntax, size, missing entry points, top-level time-out, bad limits', () => {
    const cases: Array<[string, JsCodecOptions]> = [
      ['function decodeUplink(i) { return', {}],
      ['import x from "y"; function decodeUplink(i) {}', {}],
      ['export function decodeUplink(i) {}', {}],
      [`var s = '${'x'.repeat(2048)}'; function decodeUplink(i) {}`, { limits: { scriptBytes: 1024 } }],
      ['function decodeUplink(i) {}', { require: ['downlink'] }],
      ['var x = 1;', {}],
      ['while (true) {}', { limits: { timeoutMs: 10 } }],
      ['function decodeUplink(i) {}', { limits: { timeoutMs: 1 } }],
    ];
    for (const [source, options] of cases) {
      const result = JsCodec.load(module, source, options);
      assert.equal(result.ok, false, source.slice(0, 40));
      assert.equal(result.errors.length, 1, source.slice(0, 40));
    }
  });

  test('global state survives between calls of one codec', () => {
    const codec = load(`var n = 0; function decodeUplink(i) { n++; return { data: { n: n } } }`);
    codec.decode(hex('00'));
    assert.deepEqual(codec.decode(hex('00')).states, { n: { value: 2 } });
  });
});

describe('sandbox', () => {
  test('the host is invisible: require, process, fetch, Buffer, module, setTimeout, std, os', () => {
    const names = ['require', 'process', 'fetch', 'Buffer', 'module', 'exports', 'setTimeout', 'setInterval', 'setImmediate', 'XMLHttpRequest', 'std', 'os'];
    const codec = load(`function decodeUplink(i) { return { data: { types: [${names.map((n) => `typeof ${n}`).join(',')}] } } }`);
    assert.deepEqual(codec.decode(hex('00')).states.types!.value, names.map(() => 'undefined'));
  });

  test('console exists and does nothing', () => {
    const codec = load(`function decodeUplink(i) { console.log('x'); console.error('y'); return { data: { ok: typeof console.log } } }`);
    assert.deepEqual(codec.decode(hex('00')).states, { ok: { value: 'function' } });
  });

  test('a memory bomb is refused and the runtime is rebuilt for the next call', async () => {
    // A module of its own with a small heap ceiling keeps the accumulating bomb quick.
    const smallModule = await createQuickJSModule({ maxHeapBytes: 48 * 1024 * 1024 });
    const loaded = JsCodec.load(smallModule, `var calls = 0; function decodeUplink(i) {
      calls++;
      if (i.bytes[0] === 1) { var a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length); }
      if (i.bytes[0] === 2) return { data: { s: 'x'.repeat(1 << 25) } };
      if (i.bytes[0] === 3) { var b = []; for (;;) b.push([1, 2, 3, 4, 5, 6, 7, 8]); }
      return { data: { calls: calls } } }`, { limits: { timeoutMs: 2000 } });
    const codec = loaded.codec!;
    codecs.push(codec);
    for (const bombPayload of ['01', '02', '03']) {
      const started = performance.now();
      const bomb = codec.decode(hex(bombPayload));
      assert.equal(bomb.errors.length, 1, bombPayload);
      assert.match(bomb.errors[0]!, /ran out of memory/, bombPayload);
      // Generous: only a runaway bomb takes this long, and the test machine may be heavily loaded.
      assert.ok(performance.now() - started < 15_000, bombPayload);
    }
    // The script's top-level code ran again: its global counter restarted.
    assert.deepEqual(codec.decode(hex('00')).states, { calls: { value: 1 } });
  });

  test('typed-array allocations are charged against the memory budget', () => {
    const codec = load(`function decodeUplink(i) { var a = []; for (var k = 0; k < 100; k++) a.push(new Uint8Array(1 << 20)); return { data: { n: a.length } } }`);
    const started = performance.now();
    const result = codec.decode(hex('00'));
    assert.match(result.errors[0]!, /ran out of memory/);
    assert.ok(performance.now() - started < 1000);
    const slices = load(`function decodeUplink(i) { var b = new Uint8Array(1 << 20), a = []; for (var k = 0; k < 100; k++) a.push(b.slice()); return { data: { n: a.length } } }`);
    assert.match(slices.decode(hex('00')).errors[0]!, /ran out of memory/);
    const small = load(`function decodeUplink(i) { var a = new Uint8Array(i.bytes); return { data: { n: a.length, ok: a instanceof Uint8Array } } }`);
    for (let k = 0; k < 50; k++) assert.deepEqual(small.decode(hex('0102')).states, { n: { value: 2 }, ok: { value: true } });
  });

  test('deep recursion is a stack overflow error, not a crash', () => {
    const result = load(`function f(n) { return f(n + 1) + 1 } function decodeUplink(i) { return { data: { x: f(0) } } }`).decode(hex('00'));
    assert.equal(result.errors.length, 1);
  });

  test('the event loop keeps running between calls while a codec keeps timing out, and the codec gets disabled', async () => {
    const codec = load(`function decodeUplink(i) { if (i.bytes[0]) while (true) {} return { data: {} } }`, { limits: { timeoutMs: 20 } });
    let ticks = 0;
    const interval = setInterval(() => ticks++, 1);
    try {
      for (let i = 0; i < 4; i++) {
        const result = codec.decode(hex('01'));
        assert.match(result.errors[0]!, /timed out after 20 ms/);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      assert.ok(ticks >= 4, `host interval ticked ${ticks} times`);
      assert.equal(codec.disabled, false);
      // A successful call resets the consecutive count.
      assert.deepEqual(codec.decode(hex('00')).errors, []);
      for (let i = 0; i < 5; i++) codec.decode(hex('01'));
      assert.equal(codec.disabled, true);
      assert.match(codec.disabledReason!, /5 consecutive/);
      assert.deepEqual(codec.decode(hex('00')).errors, ['codec disabled']);
      assert.deepEqual(codec.encode({ x: 1 }).errors.length, 1);
      codec.enable();
      assert.deepEqual(codec.decode(hex('00')).errors, []);
    } finally {
      clearInterval(interval);
    }
  });

  test('dispose is idempotent and later calls fail cleanly', () => {
    const result = JsCodec.load(module, 'function decodeUplink(i) { return { data: {} } }');
    const codec = result.codec!;
    codec.dispose();
    codec.dispose();
    assert.equal(codec.decode(hex('00')).errors.length, 1);
  });
});
