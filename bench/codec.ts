// Codec benchmarks (issue 4): each measured side by side with its baseline in one run.
//   node --import tsx bench/codec.ts
import { fileURLToPath } from 'node:url';
import type { DecodeResult } from '../src/codec/types.js';
import { decodeAbcl, encodeAbcl, loadAbcl } from '../src/codec/abcl/index.js';
import { encodeCborCommand } from '../src/codec/cbor.js';
import { Decoder, Encoder, type Options } from 'cbor-x';
import { getQuickJSModule, JsCodec } from '../src/codec/js/index.js';
import { hexToBytes } from '../src/codec/hex.js';
import { printTable, saveResults, type BenchRow } from './lib.js';

export interface CodecBenchRow extends BenchRow {
  name: string;
  opsPerSec: number;
}

/** Operations per second: the median of several timed rounds after a warm-up. */
function opsPerSecond(operation: () => unknown, roundMs = 300, rounds = 5): number {
  const deadline = performance.now() + 100;
  while (performance.now() < deadline) operation();
  const rates: number[] = [];
  let sink: unknown;
  for (let round = 0; round < rounds; round++) {
    let count = 0;
    const started = performance.now();
    let elapsed = 0;
    while (elapsed < roundMs) {
      for (let i = 0; i < 64; i++) sink = operation();
      count += 64;
      elapsed = performance.now() - started;
    }
    rates.push((count / elapsed) * 1000);
  }
  if (sink === Symbol.for('never')) console.log(sink);
  rates.sort((a, b) => a - b);
  return Math.round(rates[Math.floor(rates.length / 2)]!);
}

// A typical 10-field sensor frame (20 bytes).
const TEN_FIELDS = {
  sense: [
    { asset: 'type', value: { byte: 0 } },
    { asset: 'temperature', value: { byte: 1, bytelength: 2, byteorder: 'little', signed: true, calculation: 'val / 100' } },
    { asset: 'humidity', value: { byte: 3, calculation: 'val / 2' } },
    { asset: 'pressure', value: { byte: 4, bytelength: 2, calculation: 'val / 10' } },
    { asset: 'counter', value: { byte: 6, bytelength: 4 } },
    { asset: 'open', value: { byte: 10, bit: 0, type: 'boolean' } },
    { asset: 'mode', value: { byte: 10, bit: 4, bitlength: 4 } },
    { asset: 'level', value: { byte: 11, bytelength: 4, type: 'float' } },
    { asset: 'offset', value: { byte: 15, bytelength: 2, signed: true } },
    { asset: 'battery', value: { byte: 17, bytelength: 2, calculation: 'val / 1000' } },
  ],
};
const TEN_FIELD_FRAME = hexToBytes('0166085B27100001E2403141AC0000FF9C0E10AB')!;

/** The same layout decoded by hand with a DataView, producing the same result shape. */
function handWrittenDecode(bytes: Uint8Array): DecodeResult {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const flags = view.getUint8(10);
  return {
    states: {
      type: { value: view.getUint8(0) },
      temperature: { value: view.getInt16(1, true) / 100 },
      humidity: { value: view.getUint8(3) / 2 },
      pressure: { value: view.getUint16(4) / 10 },
      counter: { value: view.getUint32(6) },
      open: { value: (flags & 1) !== 0 },
      mode: { value: flags >> 4 },
      level: { value: view.getFloat32(11) },
      offset: { value: view.getInt16(15) },
      battery: { value: view.getUint16(17) / 1000 },
    },
    warnings: [],
    errors: [],
  };
}

const JS_SCRIPT = `function decodeUplink(input) {
  var b = input.bytes;
  var t = ((b[1] << 8) | b[0]) << 16 >> 16;
  return { data: { temperature: t / 100, humidity: b[2] / 2, battery: ((b[3] << 8) | b[4]) / 1000 } };
}`;

/**
 * Two operations timed in alternating rounds, so machine noise (this host is shared) hits both
 * alike; the ratio is the median of the per-round ratios.
 */
function sideBySide(a: () => unknown, b: () => unknown, rounds = 9, roundMs = 200): { a: number; b: number; ratio: number } {
  const aRates: number[] = [];
  const bRates: number[] = [];
  const ratios: number[] = [];
  opsPerSecond(a, 100, 1);
  opsPerSecond(b, 100, 1);
  for (let i = 0; i < rounds; i++) {
    const ra = opsPerSecond(a, roundMs, 1);
    const rb = opsPerSecond(b, roundMs, 1);
    aRates.push(ra);
    bRates.push(rb);
    ratios.push(ra / rb);
  }
  const median = (v: number[]) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)]!;
  return { a: Math.round(median(aRates)), b: Math.round(median(bRates)), ratio: median(ratios) };
}

/**
 * The CBOR reader on the compiled code (dist/, as production runs it), side by side with cbor-x
 * and JSON.parse on the same state. The state is the one a cloud SDK's CBOR encoder (cbor-x)
 * writes for three assets: 39 bytes, 21.5 as float64.
 */
async function benchCborDecode(): Promise<CodecBenchRow[]> {
  const compiled = (await import(new URL('../dist/codec/cbor.js', import.meta.url).href)) as typeof import('../src/codec/cbor.js');
  const cborX = new Decoder({ useRecords: false, mapsAsObjects: true } as Options);
  const sdkEncoder = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true } as Options);
  const three = { temperature: 21.5, humidity: 45, open: true };
  const threeBytes = new Uint8Array(sdkEncoder.encode(three));
  const threeJson = JSON.stringify(three);
  const rows: CodecBenchRow[] = [];
  const name = `CBOR device state decode, 3 assets (${threeBytes.length} B)`;
  const versusCborX = sideBySide(() => compiled.decodeCborDeviceState(threeBytes), () => cborX.decode(threeBytes));
  rows.push({ name, opsPerSec: versusCborX.a, baseline: 'cbor-x decode of the same bytes', baselineOpsPerSec: versusCborX.b, ratio: +versusCborX.ratio.toFixed(2), target: 'ratio ≥ 1' });
  const versusJson = sideBySide(() => compiled.decodeCborDeviceState(threeBytes), () => JSON.parse(threeJson));
  rows.push({ name, opsPerSec: versusJson.a, baseline: 'JSON.parse of the same state', baselineOpsPerSec: versusJson.b, ratio: +versusJson.ratio.toFixed(2), target: null });
  // The general reader alone (what every state went through before the common path), for scale.
  const general = sideBySide(() => compiled.decodeCborDeviceStateInFull(threeBytes), () => cborX.decode(threeBytes));
  rows.push({ name: `${name}, general reader only`, opsPerSec: general.a, baseline: 'cbor-x decode of the same bytes', baselineOpsPerSec: general.b, ratio: +general.ratio.toFixed(2), target: null });
  const six = { temperature: 21.5, humidity: 45, battery: 3.6, open: true, label: 'kitchen', counter: 123456 };
  const sixBytes = encodeCborCommand(six).bytes;
  const sixJson = JSON.stringify(six);
  const versusJsonSix = sideBySide(() => compiled.decodeCborDeviceState(sixBytes), () => JSON.parse(sixJson));
  rows.push({ name: 'CBOR device state decode, 6 assets', opsPerSec: versusJsonSix.a, baseline: 'JSON.parse of the same state', baselineOpsPerSec: versusJsonSix.b, ratio: +versusJsonSix.ratio.toFixed(2), target: null });
  return rows;
}

export async function benchCodecs(): Promise<CodecBenchRow[]> {
  const rows: CodecBenchRow[] = [];
  const doc = loadAbcl(TEN_FIELDS).doc!;
  const decode = sideBySide(() => decodeAbcl(doc, TEN_FIELD_FRAME), () => handWrittenDecode(TEN_FIELD_FRAME));
  rows.push({ name: 'ABCL decode, 10 fields', opsPerSec: decode.a, baseline: 'hand-written DataView', baselineOpsPerSec: decode.b, ratio: +decode.ratio.toFixed(2), target: 'ratio ≥ 0.5' });

  const dimmer = loadAbcl({
    actuate: [
      { const: 1, field: { byte: 0 } },
      { const: 'A5', field: { byte: 1, type: 'hexstring' } },
      { asset: 'level', field: { byte: 2, calculation: 'val * 2.55' } },
      { asset: 'fade', field: { byte: 3, bytelength: 2, calculation: 'val * 10' } },
      { asset: 'on', field: { byte: 5, bit: 0, type: 'boolean' } },
      { asset: 'scene', field: { byte: 5, bit: 4, bitlength: 4 } },
    ],
  }).doc!;
  const command = { level: 40, fade: 1.5, on: true, scene: 2 };
  rows.push({ name: 'ABCL actuate encode, 4 assets + 2 const', opsPerSec: opsPerSecond(() => encodeAbcl(dimmer, command)), baseline: null, baselineOpsPerSec: null, ratio: null, target: null });

  const module = await getQuickJSModule();
  const codec = JsCodec.load(module, JS_SCRIPT).codec!;
  const jsPayload = hexToBytes('66085B0E10')!;
  const reused = opsPerSecond(() => codec.decode(jsPayload, { fPort: 1 }), 300, 3);
  // The ChirpStack way: a new runtime and context, the script evaluated, one call, then disposal.
  const fresh = opsPerSecond(() => {
    const once = JsCodec.load(module, JS_SCRIPT).codec!;
    const result = once.decode(jsPayload, { fPort: 1 });
    once.dispose();
    return result;
  }, 300, 3);
  codec.dispose();
  rows.push({ name: 'JS decode, reused runtime', opsPerSec: reused, baseline: 'fresh runtime per call', baselineOpsPerSec: fresh, ratio: +(reused / fresh).toFixed(1), target: 'ratio ≥ 20, ≥ 30 000/s' });

  rows.push(...(await benchCborDecode()));
  return rows;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const rows = await benchCodecs();
  printTable('Codec benchmarks (operations per second; ratio = codec / baseline)', rows);
  const path = saveResults('codec', rows);
  console.log(`\nsaved ${path}`);
}
