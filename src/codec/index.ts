// The codec layer facade: one DeviceCodec per device, compiled once from its codec settings and
// then called synchronously on the hot path.
import type { DecodeResult, EncodeResult, JsonObject, JsonValue } from './types.js';
import { isJsonObject } from './json.js';
import { decodeAbcl, encodeAbcl, loadAbcl, type AbclDocumentCache, type CompiledAbcl } from './abcl/index.js';
import { decodeCborDeviceState, encodeCborCommand } from './cbor.js';
import { decodeJsonDeviceState, decodeJsonDeviceStateBytes, parseJsonObjectBytes } from './json-state.js';
import { sharedParseProbe, type ScriptParseProbe } from './js/parse-probe.js';
import { markModuleDamaged } from './js/quickjs-module.js';
import { getQuickJSModule, JsCodec, type CodecDirection, type JsCodecLimits, type QuickJSWASMModule } from './js/index.js';

export type { DecodeResult, EncodeResult, JsonValue, JsonObject } from './types.js';
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

function decodeAuto(payload: Uint8Array | JsonObject): DecodeResult {
  if (!(payload instanceof Uint8Array)) return decodeJsonDeviceState(payload);
  const json = parseJsonObjectBytes(payload);
  return json === undefined ? decodeCborDeviceState(payload) : decodeJsonDeviceState(json);
}

/** Loads every document and script named by the settings; a bad one is refused with its problems listed. */
export async function compileCodec(settings: CodecSettings, limits: CodecLimits = {}): Promise<CompileCodecResult> {
  const errors: string[] = [];
  const warnings: string[] = [];
  if (!isJsonObject(settings) || !isJsonObject(settings.uplink)) return { ok: false, errors: ['settings.uplink must be an object'], warnings };
  const uplinkFormat = settings.uplink.format;
  if (!UPLINK_FORMATS.includes(uplinkFormat)) errors.push(`uplink.format must be one of ${UPLINK_FORMATS.join(', ')}`);
  const downlink = settings.downlink;
  const downlinkFormat: DownlinkFormat = downlink?.format ?? 'cbor';
  if (downlink !== undefined && !DOWNLINK_FORMATS.includes(downlinkFormat)) errors.push(`downlink.format must be one of ${DOWNLINK_FORMATS.join(', ')}`);
  const port = downlink?.port;
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 223)) errors.push('downlink.port must be an integer from 1 to 223');

  let uplinkDoc: CompiledAbcl | undefined;
  let downlinkDoc: CompiledAbcl | undefined;
  const loadDocument = (direction: CodecDirection, document: object | string | undefined): CompiledAbcl | undefined => {
    if (document === undefined) {
      errors.push(`${direction}.document is required for format abcl`);
      return undefined;
    }
    const loaded = loadAbcl(document, limits.abclCache);
    errors.push(...prefixed(`${direction} document`, loaded.errors));
    warnings.push(...prefixed(`${direction} document`, loaded.warnings));
    if (loaded.doc === undefined) return undefined;
    if (direction === 'uplink' && loaded.doc.sense === undefined) errors.push('uplink document has no sense block');
    if (direction === 'downlink' && loaded.doc.actuate === undefined) errors.push('downlink document has no actuate block');
    return loaded.doc;
  };
  if (uplinkFormat === 'abcl') uplinkDoc = loadDocument('uplink', settings.uplink.document);
  if (downlinkFormat === 'abcl') downlinkDoc = loadDocument('downlink', downlink?.document);

  const jsCodecs: JsCodec[] = [];
  let uplinkJs: JsCodec | undefined;
  let downlinkJs: JsCodec | undefined;
  const wantsUplinkJs = uplinkFormat === 'js';
  const wantsDownlinkJs = downlinkFormat === 'js';
  if (wantsUplinkJs && typeof settings.uplink.script !== 'string') errors.push('uplink.script is required for format js');
  if (wantsDownlinkJs && typeof downlink?.script !== 'string') errors.push('downlink.script is required for format js');
  if (errors.length === 0 && (wantsUplinkJs || wantsDownlinkJs)) {
    const module = limits.quickjs ?? (await getQuickJSModule());
    // Parsed first where a stack overflow cannot harm the shared module (parse-probe.ts).
    const probe = limits.parseProbe ?? sharedParseProbe();
    const unsafe = new Map<string, string>();
    for (const script of new Set([wantsUplinkJs ? settings.uplink.script! : undefined, wantsDownlinkJs ? downlink!.script! : undefined])) {
      if (script === undefined) continue;
      const problem = await probe.check(script);
      if (problem !== undefined) unsafe.set(script, problem);
    }
    const loadScript = (script: string, require: CodecDirection[], label: string): JsCodec | undefined => {
      const problem = unsafe.get(script);
      if (problem !== undefined) {
        errors.push(`${label}: ${problem}`);
        return undefined;
      }
      let loaded: ReturnType<typeof JsCodec.load>;
      try {
        loaded = JsCodec.load(module, script, { limits: limits.js, require, variables: limits.variables, defaultPort: limits.defaultPort });
      } catch (err) {
        // Top-level code that exhausts Node's stack inside WebAssembly damages the module (quickjs-module.ts).
        if (!(err instanceof RangeError)) throw err;
        markModuleDamaged(module);
        errors.push(`${label}: script exhausted the native stack while loading (nesting thousands of levels deep)`);
        return undefined;
      }
      errors.push(...prefixed(label, loaded.errors));
      warnings.push(...prefixed(label, loaded.warnings));
      if (loaded.codec !== undefined) jsCodecs.push(loaded.codec);
      return loaded.codec;
    };
    const uplinkScript = settings.uplink.script;
    const downlinkScript = downlink?.script;
    if (wantsUplinkJs && wantsDownlinkJs && uplinkScript === downlinkScript) {
      // One text for both directions: one runtime.
      uplinkJs = downlinkJs = loadScript(uplinkScript!, ['uplink', 'downlink'], 'script');
    } else {
      if (wantsUplinkJs) uplinkJs = loadScript(uplinkScript!, ['uplink'], 'uplink script');
      if (wantsDownlinkJs) downlinkJs = loadScript(downlinkScript!, ['downlink'], 'downlink script');
    }
  }
  if (errors.length > 0) {
    for (const codec of jsCodecs) codec.dispose();
    return { ok: false, errors, warnings };
  }

  let decode: (payload: Uint8Array | JsonObject, context: UplinkContext) => DecodeResult;
  switch (uplinkFormat) {
    case 'abcl':
      decode = (payload) => decodeAbcl(uplinkDoc!, payload);
      break;
    case 'cbor':
      decode = (payload) => (payload instanceof Uint8Array ? decodeCborDeviceState(payload) : decodeJsonDeviceState(payload));
      break;
    case 'json':
      decode = (payload) => (payload instanceof Uint8Array ? decodeJsonDeviceStateBytes(payload) : decodeJsonDeviceState(payload));
      break;
    case 'js':
      decode = (payload, context) =>
        payload instanceof Uint8Array ? uplinkJs!.decode(payload, context) : { states: {}, warnings: [], errors: ['a JS codec decodes bytes, not a JSON object'] };
      break;
    default:
      decode = (payload) => decodeAuto(payload);
  }
  let encode: (values: Record<string, JsonValue>, context: DownlinkContext) => EncodeResult;
  switch (downlinkFormat) {
    case 'abcl':
      encode = (values, context) => encodeAbcl(downlinkDoc!, values, context.previous);
      break;
    case 'js':
      encode = (values, context) => downlinkJs!.encode(values, { fPort: context.fPort });
      break;
    default:
      encode = (values) => encodeCborCommand(values);
  }
  let disposed = false;
  const codec: DeviceCodec = {
    uplinkFormat,
    downlinkFormat,
    downlinkPort: port,
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
  return { ok: true, codec, errors: [], warnings };
}

export { loadAbcl, decodeAbcl, encodeAbcl, AbclDocumentCache } from './abcl/index.js';
export type { CompiledAbcl, AbclLoadResult } from './abcl/index.js';
export { decodeCborDeviceState, encodeCborCommand } from './cbor.js';
export { decodeJsonDeviceState } from './json-state.js';
export { JsCodec, getQuickJSModule, createQuickJSModule, DEFAULT_JS_LIMITS, onSharedModuleDamaged } from './js/index.js';
export type { JsCodecLimits } from './js/index.js';
