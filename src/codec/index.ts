// The codec layer facade: one DeviceCodec per device, compiled once from its codec settings and
// then called synchronously on the hot path.
import type { DecodeResult, EncodeResult } from './types.js';
import { decodeAbcl, encodeAbcl, loadAbcl, type AbclDocumentCache, type CompiledAbcl } from './abcl/index.js';
import { decodeCborDeviceState, encodeCborCommand } from './cbor.js';
import { decodeJsonDeviceState, decodeJsonDeviceStateBytes, parseJsonObjectBytes } from './json-state.js';
import { sharedParseProbe, type ScriptParseProbe } from './js/parse-probe.js';
import { markModuleDamaged } from './js/quickjs-module.js';
import { getQuickJSModule, JsCodec, type CodecDirection, type JsCodecLimits, type QuickJSWASMModule } from './js/index.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../core/json.js';

export type { DecodeResult, EncodeResult } from './types.js';
export type { JsonValue, JsonObject } from '../core/json.js';
export type UplinkFormat = 'auto' | 'json' | 'cbor' | 'abcl' | 'js';
export type DownlinkFormat = 'cbor' | 'abcl' | 'js';

export type CodecSettings = {
  uplink: { format: UplinkFormat; document?: object | string; script?: string };
  downlink?: { format: DownlinkFormat; document?: object | string; script?: string; port?: number };
};

export interface CodecLimits {
  /** Sandbox limits for JS codecs (defaults: 16 MiB, 256 KiB, 100 ms, 64 KiB). */
  js?: Partial<JsCodecLimits>;
  /** The device's default port (uplink fPort when the transport has none; downlink default). */
  defaultPort?: number;
  /** The device's codec variables for JS codecs. */
  variables?: Record<string, string>;
  /** Shares compiled ABCL documents between devices (keyed by SHA-256). */
  abclCache?: AbclDocumentCache;
  /** QuickJS module to create runtimes from; the process-wide one by default. */
  quickjs?: QuickJSWASMModule;
  /** Compiles JS scripts in a disposable module first; the process-wide one by default. */
  parseProbe?: ScriptParseProbe;
}

export interface UplinkContext {
  fPort?: number;
  receivedAt?: Date | string;
}

export interface DownlinkContext {
  /** The last commanded value of each asset (ABCL previous-value rule). */
  previous?: Record<string, JsonValue>;
  /** The command's `meta.port`, when it names one. */
  fPort?: number;
}

export interface DeviceCodec {
  readonly uplinkFormat: UplinkFormat;
  readonly downlinkFormat: DownlinkFormat;
  /** Downlink port from the settings, if any (the caller applies the precedence: command meta.port, then the device's default). */
  readonly downlinkPort: number | undefined;
  /** Bytes, or a JSON object for ABCL JSON mode. */
  decodeUplink(payload: Uint8Array | JsonObject, context?: UplinkContext): DecodeResult;
  encodeDownlink(values: Record<string, JsonValue>, context?: DownlinkContext): EncodeResult;
  /** True when a JS codec was disabled after repeated resource failures. */
  readonly disabled: boolean;
  readonly disabledReason: string | undefined;
  dispose(): void;
}

export interface CompileCodecResult {
  ok: boolean;
  codec?: DeviceCodec;
  errors: string[];
  warnings: string[];
}

const UPLINK_FORMATS: readonly UplinkFormat[] = ['auto', 'json', 'cbor', 'abcl', 'js'];
const DOWNLINK_FORMATS: readonly DownlinkFormat[] = ['cbor', 'abcl', 'js'];
const EMPTY = new Uint8Array(0);

function prefixed(prefix: string, messages: string[]): string[] {
  return messages.map((message) => `${prefix}: ${message}`);
}

/** `auto`: a JSON object if the bytes are one, else CBOR (docs/codecs.md, "Formats"). */
function decodeAuto(payload: Uint8Array | JsonObject): DecodeResult {
  if (!(payload instanceof Uint8Array)) return decodeJsonDeviceState(payload);
  const json = parseJsonObjectBytes(payload);
  return json === undefined ? decodeCborDeviceState(payload) : decodeJsonDeviceState(json);
}

/** What compiling found; every step adds to the same lists, so one answer names every problem. */
interface Problems {
  errors: string[];
  warnings: string[];
}

interface CheckedFormats {
  uplinkFormat: UplinkFormat;
  downlinkFormat: DownlinkFormat;
  port: number | undefined;
}

function checkFormats(settings: CodecSettings, problems: Problems): CheckedFormats {
  const uplinkFormat = settings.uplink.format;
  if (!UPLINK_FORMATS.includes(uplinkFormat)) problems.errors.push(`uplink.format must be one of ${UPLINK_FORMATS.join(', ')}`);
  const downlink = settings.downlink;
  const downlinkFormat: DownlinkFormat = downlink?.format ?? 'cbor';
  if (downlink !== undefined && !DOWNLINK_FORMATS.includes(downlinkFormat)) problems.errors.push(`downlink.format must be one of ${DOWNLINK_FORMATS.join(', ')}`);
  const port = downlink?.port;
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 223)) problems.errors.push('downlink.port must be an integer from 1 to 223');
  return { uplinkFormat, downlinkFormat, port };
}

/** An ABCL document for one direction; it must have the block that direction runs. */
function loadDocument(direction: CodecDirection, document: object | string | undefined, cache: AbclDocumentCache | undefined, problems: Problems): CompiledAbcl | undefined {
  if (document === undefined) {
    problems.errors.push(`${direction}.document is required for format abcl`);
    return undefined;
  }
  const loaded = loadAbcl(document, cache);
  problems.errors.push(...prefixed(`${direction} document`, loaded.errors));
  problems.warnings.push(...prefixed(`${direction} document`, loaded.warnings));
  if (loaded.doc === undefined) return undefined;
  if (direction === 'uplink' && loaded.doc.sense === undefined) problems.errors.push('uplink document has no sense block');
  if (direction === 'downlink' && loaded.doc.actuate === undefined) problems.errors.push('downlink document has no actuate block');
  return loaded.doc;
}

interface LoadedScripts {
  uplink?: JsCodec;
  downlink?: JsCodec;
  /** Every runtime created (one when both directions share a script), to dispose of. */
  all: JsCodec[];
}

/** Scripts that fail the parse probe, with the probe's reason (parse-probe.ts). */
async function unsafeScripts(scripts: Array<string | undefined>, probe: ScriptParseProbe): Promise<Map<string, string>> {
  const unsafe = new Map<string, string>();
  for (const script of new Set(scripts)) {
    if (script === undefined) continue;
    const problem = await probe.check(script);
    if (problem !== undefined) unsafe.set(script, problem);
  }
  return unsafe;
}

/** One script in its own runtime; undefined (with the problems listed) when it does not load. */
function loadScript(module: QuickJSWASMModule, script: string, require: CodecDirection[], label: string, limits: CodecLimits, problem: string | undefined, problems: Problems): JsCodec | undefined {
  if (problem !== undefined) {
    problems.errors.push(`${label}: ${problem}`);
    return undefined;
  }
  let loaded: ReturnType<typeof JsCodec.load>;
  try {
    loaded = JsCodec.load(module, script, { limits: limits.js, require, variables: limits.variables, defaultPort: limits.defaultPort });
  } catch (err) {
    // Top-level code that exhausts Node's stack inside WebAssembly damages the module (quickjs-module.ts).
    if (!(err instanceof RangeError)) throw err;
    markModuleDamaged(module);
    problems.errors.push(`${label}: script exhausted the native stack while loading (nesting thousands of levels deep)`);
    return undefined;
  }
  problems.errors.push(...prefixed(label, loaded.errors));
  problems.warnings.push(...prefixed(label, loaded.warnings));
  return loaded.codec;
}

/** The JS runtimes the settings ask for: one per script, shared when both directions use the same text. */
async function loadScripts(uplinkScript: string | undefined, downlinkScript: string | undefined, limits: CodecLimits, problems: Problems): Promise<LoadedScripts> {
  const module = limits.quickjs ?? (await getQuickJSModule());
  // Parsed first where a stack overflow cannot harm the shared module (parse-probe.ts).
  const unsafe = await unsafeScripts([uplinkScript, downlinkScript], limits.parseProbe ?? sharedParseProbe());
  const load = (script: string, require: CodecDirection[], label: string) => loadScript(module, script, require, label, limits, unsafe.get(script), problems);
  if (uplinkScript !== undefined && uplinkScript === downlinkScript) {
    const shared = load(uplinkScript, ['uplink', 'downlink'], 'script');
    return { uplink: shared, downlink: shared, all: shared ? [shared] : [] };
  }
  const uplink = uplinkScript === undefined ? undefined : load(uplinkScript, ['uplink'], 'uplink script');
  const downlink = downlinkScript === undefined ? undefined : load(downlinkScript, ['downlink'], 'downlink script');
  return { uplink, downlink, all: [uplink, downlink].filter((codec): codec is JsCodec => codec !== undefined) };
}

type UplinkDecode = (payload: Uint8Array | JsonObject, context: UplinkContext) => DecodeResult;
type DownlinkEncode = (values: Record<string, JsonValue>, context: DownlinkContext) => EncodeResult;

function uplinkDecode(format: UplinkFormat, document: CompiledAbcl | undefined, script: JsCodec | undefined): UplinkDecode {
  switch (format) {
    case 'abcl':
      return (payload) => decodeAbcl(document!, payload);
    case 'cbor':
      return (payload) => (payload instanceof Uint8Array ? decodeCborDeviceState(payload) : decodeJsonDeviceState(payload));
    case 'json':
      return (payload) => (payload instanceof Uint8Array ? decodeJsonDeviceStateBytes(payload) : decodeJsonDeviceState(payload));
    case 'js':
      return (payload, context) =>
        payload instanceof Uint8Array ? script!.decode(payload, context) : { states: {}, warnings: [], errors: ['a JS codec decodes bytes, not a JSON object'] };
    default:
      return (payload) => decodeAuto(payload);
  }
}

function downlinkEncode(format: DownlinkFormat, document: CompiledAbcl | undefined, script: JsCodec | undefined): DownlinkEncode {
  switch (format) {
    case 'abcl':
      return (values, context) => encodeAbcl(document!, values, context.previous);
    case 'js':
      return (values, context) => script!.encode(values, { fPort: context.fPort });
    default:
      return (values) => encodeCborCommand(values);
  }
}

function deviceCodec(formats: CheckedFormats, decode: UplinkDecode, encode: DownlinkEncode, jsCodecs: JsCodec[]): DeviceCodec {
  let disposed = false;
  return {
    uplinkFormat: formats.uplinkFormat,
    downlinkFormat: formats.downlinkFormat,
    downlinkPort: formats.port,
    decodeUplink: (payload, context = {}) => (disposed ? { states: {}, warnings: [], errors: ['codec disposed'] } : decode(payload, context)),
    encodeDownlink: (values, context = {}) => (disposed ? { bytes: EMPTY, warnings: [], errors: ['codec disposed'] } : encode(values, context)),
    get disabled() {
      return jsCodecs.some((js) => js.disabled);
    },
    get disabledReason() {
      return jsCodecs.find((js) => js.disabled)?.disabledReason;
    },
    dispose() {
      disposed = true;
      for (const js of jsCodecs) js.dispose();
    },
  };
}

/** Loads every document and script named by the settings; a bad one is refused with its problems listed. */
export async function compileCodec(settings: CodecSettings, limits: CodecLimits = {}): Promise<CompileCodecResult> {
  const problems: Problems = { errors: [], warnings: [] };
  if (!isJsonObject(settings) || !isJsonObject(settings.uplink)) return { ok: false, errors: ['settings.uplink must be an object'], warnings: problems.warnings };
  const formats = checkFormats(settings, problems);
  const { uplinkFormat, downlinkFormat } = formats;
  const downlink = settings.downlink;
  const uplinkDoc = uplinkFormat === 'abcl' ? loadDocument('uplink', settings.uplink.document, limits.abclCache, problems) : undefined;
  const downlinkDoc = downlinkFormat === 'abcl' ? loadDocument('downlink', downlink?.document, limits.abclCache, problems) : undefined;
  const uplinkScript = uplinkFormat === 'js' ? settings.uplink.script : undefined;
  const downlinkScript = downlinkFormat === 'js' ? downlink?.script : undefined;
  if (uplinkFormat === 'js' && typeof uplinkScript !== 'string') problems.errors.push('uplink.script is required for format js');
  if (downlinkFormat === 'js' && typeof downlinkScript !== 'string') problems.errors.push('downlink.script is required for format js');
  let scripts: LoadedScripts = { all: [] };
  if (problems.errors.length === 0 && (uplinkScript !== undefined || downlinkScript !== undefined)) scripts = await loadScripts(uplinkScript, downlinkScript, limits, problems);
  if (problems.errors.length > 0) {
    for (const codec of scripts.all) codec.dispose();
    return { ok: false, errors: problems.errors, warnings: problems.warnings };
  }
  const decode = uplinkDecode(uplinkFormat, uplinkDoc, scripts.uplink);
  const encode = downlinkEncode(downlinkFormat, downlinkDoc, scripts.downlink);
  return { ok: true, codec: deviceCodec(formats, decode, encode, scripts.all), errors: [], warnings: problems.warnings };
}

export { loadAbcl, decodeAbcl, encodeAbcl, AbclDocumentCache } from './abcl/index.js';
export type { CompiledAbcl, AbclLoadResult } from './abcl/index.js';
export { decodeCborDeviceState, encodeCborCommand } from './cbor.js';
export { decodeJsonDeviceState } from './json-state.js';
export { JsCodec, getQuickJSModule, createQuickJSModule, DEFAULT_JS_LIMITS, onSharedModuleDamaged } from './js/index.js';
export type { JsCodecLimits } from './js/index.js';
