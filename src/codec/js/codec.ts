// A sandboxed JavaScript codec (docs/codecs.md, "JavaScript codecs"): one QuickJS runtime with one context per
// script, compiled once and reused for every call.
import { createHash } from 'node:crypto';
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from 'quickjs-emscripten';
import type { DecodeResult, EncodeResult } from '../types.js';
import { bytesToHex } from '../hex.js';
import { CALL_SOURCE, DETECT_SOURCE, preludeSource } from './glue.js';
import { resolveJsLimits, type JsCodecLimits } from './limits.js';
import { isModuleDamaged, markModuleDamaged } from './quickjs-module.js';
import type { JsonValue } from '../../core/json.js';
import {
  interpretDecodeUplink,
  interpretDecoder,
  interpretDownlinkConverter,
  interpretEncodeDownlink,
  interpretEncoder,
  interpretUplinkConverter,
} from './results.js';

export type UplinkConvention = 'decodeUplink' | 'Decoder' | 'converter';
export type DownlinkConvention = 'encodeDownlink' | 'Encoder' | 'converter';
export type CodecDirection = 'uplink' | 'downlink';

export interface JsCodecOptions {
  limits?: Partial<JsCodecLimits>;
  /** Directions the script is configured for; a missing entry point for one is a load error. */
  require?: CodecDirection[];
  /** The device's codec variables, string → string. */
  variables?: Record<string, string>;
  /** The device's default port: the uplink fPort when the transport has none, the Encoder port. */
  defaultPort?: number;
}

export interface JsCodecLoadResult {
  ok: boolean;
  codec?: JsCodec;
  errors: string[];
  warnings: string[];
}

export interface JsDecodeContext {
  fPort?: number;
  receivedAt?: Date | string;
}

export interface JsEncodeContext {
  /** The command's `meta.port`, when it names one. */
  fPort?: number;
}

const MAX_RESULT_CHARS = 256 * 1024;
const EMPTY = new Uint8Array(0);

type CallOutcome =
  | { kind: 'ok'; value: JsonValue }
  | { kind: 'threw'; message: string }
  | { kind: 'invalid'; message: string }
  | { kind: 'resource'; message: string }
  | { kind: 'damaged'; message: string };

interface EntryPoints {
  decodeUplink: boolean;
  Decoder: boolean;
  encodeDownlink: boolean;
  Encoder: boolean;
  converter: boolean;
}

/** A runtime + context with the script loaded; rebuilt after a resource failure. */
class Sandbox {
  private deadline = 0;

  private constructor(
    private readonly runtime: QuickJSRuntime,
    private readonly context: QuickJSContext,
    private readonly callFunction: QuickJSHandle,
    readonly entryPoints: EntryPoints,
  ) {}

  static create(module: QuickJSWASMModule, source: string, limits: JsCodecLimits): { sandbox?: Sandbox; error?: string; resource?: boolean } {
    const runtime = module.newRuntime();
    runtime.setMemoryLimit(limits.memoryBytes);
    runtime.setMaxStackSize(limits.stackBytes);
    const clock = { deadline: Date.now() + 10 * limits.timeoutMs };
    runtime.setInterruptHandler(() => Date.now() > clock.deadline);
    const context = runtime.newContext();
    const fail = (error: string, resource = false) => {
      context.dispose();
      runtime.dispose();
      return { error, resource };
    };
    const evaluate = (code: string, filename: string): { value?: QuickJSHandle; error?: string; resource?: boolean } => {
      const result = context.evalCode(code, filename, { type: 'global', strict: false });
      if (result.error === undefined) return { value: result.value };
      const failure = classifyError(context.dump(result.error), clock.deadline, 10 * limits.timeoutMs);
      result.error.dispose();
      return { error: failure.message, resource: failure.kind === 'resource' };
    };

    const prelude = evaluate(preludeSource(limits.memoryBytes), 'prelude.js');
    if (prelude.value === undefined) return fail(`sandbox set-up failed: ${prelude.error}`);
    const resetBudget = prelude.value;
    const script = evaluate(source, 'codec.js');
    if (script.value === undefined) {
      resetBudget.dispose();
      return fail(`script failed to load: ${script.error}`, script.resource);
    }
    script.value.dispose();
    const detected = evaluate(DETECT_SOURCE, 'detect.js');
    const factory = evaluate(CALL_SOURCE, 'call.js');
    if (detected.value === undefined || factory.value === undefined) {
      detected.value?.dispose();
      factory.value?.dispose();
      resetBudget.dispose();
      return fail(`script failed to load: ${detected.error ?? factory.error}`, detected.resource || factory.resource);
    }
    const entryPoints = JSON.parse(context.getString(detected.value)) as EntryPoints;
    detected.value.dispose();
    const made = context.callFunction(factory.value, context.undefined, resetBudget);
    factory.value.dispose();
    resetBudget.dispose();
    if (made.error !== undefined) {
      made.error.dispose();
      return fail('sandbox set-up failed');
    }
    const sandbox = new Sandbox(runtime, context, made.value, entryPoints);
    runtime.setInterruptHandler(() => Date.now() > sandbox.deadline);
    return { sandbox };
  }

  call(kind: string, input: unknown, timeoutMs: number): CallOutcome {
    const context = this.context;
    const kindHandle = context.newString(kind);
    const inputHandle = context.newString(JSON.stringify(input));
    this.deadline = Date.now() + timeoutMs;
    let result: ReturnType<QuickJSContext['callFunction']>;
    try {
      result = context.callFunction(this.callFunction, context.undefined, kindHandle, inputHandle);
    } catch (err) {
      // Node's own stack ran out inside the WebAssembly code (e.g. JSON.stringify of a value
      // nested thousands deep): this runtime and its module are unusable from here on.
      if (err instanceof RangeError) return { kind: 'damaged', message: 'codec exhausted the native stack (nesting thousands of levels deep); the sandbox is reloaded' };
      throw err;
    }
    kindHandle.dispose();
    inputHandle.dispose();
    if (result.error !== undefined) {
      const failure = classifyError(context.dump(result.error), this.deadline, timeoutMs);
      result.error.dispose();
      return failure.kind === 'threw' ? { kind: 'threw', message: `codec threw: ${failure.message}` } : failure;
    }
    const text = context.getString(result.value);
    result.value.dispose();
    if (text.length > MAX_RESULT_CHARS) return { kind: 'invalid', message: `result text is longer than ${MAX_RESULT_CHARS / 1024} KiB` };
    const envelope = JSON.parse(text) as { threw?: boolean; invalid?: boolean; name?: string; message?: string; result?: JsonValue };
    if (envelope.threw) {
      if (envelope.name === 'InternalError' && envelope.message === 'out of memory') return { kind: 'resource', message: 'codec ran out of memory' };
      return { kind: 'threw', message: `codec threw: ${envelope.name}: ${envelope.message}` };
    }
    if (envelope.invalid) return { kind: 'invalid', message: `the result cannot be turned into JSON: ${envelope.message}` };
    return { kind: 'ok', value: envelope.result ?? null };
  }

  dispose(): void {
    // Handles first, then the context, then the runtime.
    this.callFunction.dispose();
    this.context.dispose();
    this.runtime.dispose();
  }
}

function classifyError(dumped: unknown, deadline: number, budgetMs: number): { kind: 'threw' | 'resource'; message: string } {
  // QuickJS throws null when it cannot even allocate the out-of-memory error object.
  const error =
    dumped === null ? { name: 'InternalError', message: 'out of memory' } : typeof dumped === 'object' ? (dumped as { name?: unknown; message?: unknown }) : { name: 'Error', message: dumped };
  const name = String(error.name ?? 'Error');
  const message = String(error.message ?? '');
  if (name === 'InternalError' && message === 'interrupted' && Date.now() >= deadline) return { kind: 'resource', message: `codec timed out after ${budgetMs} ms` };
  if (name === 'InternalError' && message === 'out of memory') return { kind: 'resource', message: 'codec ran out of memory' };
  return { kind: 'threw', message: `${name}: ${message}` };
}

function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

export class JsCodec {
  readonly uplinkConvention: UplinkConvention | undefined;
  readonly downlinkConvention: DownlinkConvention | undefined;
  private sandbox: Sandbox | undefined;
  private consecutiveResourceFailures = 0;
  private disabledBecause: string | undefined;
  private disposed = false;

  private constructor(
    private readonly module: QuickJSWASMModule,
    private readonly source: string,
    /** SHA-256 (hex) of the script text: scripts are identified by it. */
    readonly hash: string,
    readonly limits: JsCodecLimits,
    private readonly options: JsCodecOptions,
    sandbox: Sandbox,
  ) {
    this.sandbox = sandbox;
    const found = sandbox.entryPoints;
    this.uplinkConvention = found.decodeUplink ? 'decodeUplink' : found.Decoder ? 'Decoder' : found.converter ? 'converter' : undefined;
    this.downlinkConvention = found.encodeDownlink ? 'encodeDownlink' : found.Encoder ? 'Encoder' : found.converter ? 'converter' : undefined;
  }

  /** Compiles the script and runs its top-level code once (synchronous; the module is loaded already). */
  static load(module: QuickJSWASMModule, source: string, options: JsCodecOptions = {}): JsCodecLoadResult {
    const { limits, errors } = resolveJsLimits(options.limits);
    if (errors.length > 0) return { ok: false, errors, warnings: [] };
    if (typeof source !== 'string') return { ok: false, errors: ['script must be a string'], warnings: [] };
    const size = utf8Length(source);
    if (size > limits.scriptBytes) return { ok: false, errors: [`script is ${size} bytes, more than the limit of ${limits.scriptBytes}`], warnings: [] };
    const created = Sandbox.create(module, source, limits);
    if (created.sandbox === undefined) return { ok: false, errors: [created.error!], warnings: [] };
    const codec = new JsCodec(module, source, createHash('sha256').update(source).digest('hex'), limits, options, created.sandbox);
    const problems: string[] = [];
    const wanted = options.require ?? [];
    if (wanted.includes('uplink') && codec.uplinkConvention === undefined) problems.push('script defines no uplink entry point (decodeUplink, Decoder or converter)');
    if (wanted.includes('downlink') && codec.downlinkConvention === undefined) problems.push('script defines no downlink entry point (encodeDownlink, Encoder or converter)');
    if (codec.uplinkConvention === undefined && codec.downlinkConvention === undefined && wanted.length === 0) problems.push('script defines none of decodeUplink, Decoder, encodeDownlink, Encoder or converter');
    if (problems.length > 0) {
      codec.dispose();
      return { ok: false, errors: problems, warnings: [] };
    }
    return { ok: true, codec, errors: [], warnings: [] };
  }

  get disabled(): boolean {
    return this.disabledBecause !== undefined;
  }

  get disabledReason(): string | undefined {
    return this.disabledBecause;
  }

  /** Operator action: re-enable a disabled codec. */
  enable(): void {
    this.disabledBecause = undefined;
    this.consecutiveResourceFailures = 0;
  }

  decode(bytes: Uint8Array, context: JsDecodeContext = {}): DecodeResult {
    const convention = this.uplinkConvention;
    if (convention === undefined) return { states: {}, warnings: [], errors: ['script has no uplink entry point'] };
    const fPort = context.fPort ?? this.options.defaultPort ?? 1;
    let input: unknown;
    if (convention === 'converter') input = { code: bytesToHex(bytes) };
    else {
      const list = Array.from(bytes);
      if (convention === 'Decoder') input = { bytes: list, fPort };
      else {
        const received = context.receivedAt === undefined ? new Date() : new Date(context.receivedAt);
        input = { bytes: list, fPort, recvTime: Number.isNaN(received.getTime()) ? new Date().toISOString() : received.toISOString(), variables: this.options.variables ?? {} };
      }
    }
    const outcome = this.invoke(convention, input);
    if (outcome.kind !== 'ok') return { states: {}, warnings: [], errors: [outcome.message] };
    const result = convention === 'decodeUplink' ? interpretDecodeUplink(outcome.value) : convention === 'Decoder' ? interpretDecoder(outcome.value) : interpretUplinkConverter(outcome.value);
    this.noteValidResult(result.errors.length === 0 || !result.errors[0]!.startsWith('codec returned an invalid result'));
    return result;
  }

  encode(values: Record<string, JsonValue>, context: JsEncodeContext = {}): EncodeResult {
    const convention = this.downlinkConvention;
    if (convention === undefined) return { bytes: EMPTY, warnings: [], errors: ['script has no downlink entry point'] };
    let input: unknown;
    if (convention === 'converter') {
      const wrapped: Record<string, { value: JsonValue }> = {};
      for (const [asset, value] of Object.entries(values)) Object.defineProperty(wrapped, asset, { value: { value }, enumerable: true });
      input = { code: JSON.stringify(wrapped) };
    } else if (convention === 'Encoder') input = { data: values, fPort: context.fPort ?? this.options.defaultPort ?? 1 };
    else input = context.fPort === undefined ? { data: values, variables: this.options.variables ?? {} } : { data: values, fPort: context.fPort, variables: this.options.variables ?? {} };
    const outcome = this.invoke(convention, input);
    if (outcome.kind !== 'ok') return { bytes: EMPTY, warnings: [], errors: [outcome.message] };
    const result = convention === 'encodeDownlink' ? interpretEncodeDownlink(outcome.value) : convention === 'Encoder' ? interpretEncoder(outcome.value) : interpretDownlinkConverter(outcome.value);
    this.noteValidResult(result.errors.length === 0 || !result.errors[0]!.startsWith('codec returned an invalid result'));
    return result;
  }

  private noteValidResult(valid: boolean): void {
    if (valid) this.consecutiveResourceFailures = 0;
  }

  private invoke(entryPoint: string, input: unknown): CallOutcome {
    if (this.disposed) return { kind: 'threw', message: 'codec disposed' };
    if (this.disabledBecause !== undefined) return { kind: 'threw', message: 'codec disabled' };
    if (isModuleDamaged(this.module)) return { kind: 'threw', message: 'codec sandbox is being reloaded after a stack overflow' };
    if (this.sandbox === undefined) {
      // Rebuilt lazily after a resource failure: the script's top-level code runs again.
      let created: ReturnType<typeof Sandbox.create>;
      try {
        created = Sandbox.create(this.module, this.source, this.limits);
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        markModuleDamaged(this.module);
        return { kind: 'threw', message: 'codec exhausted the native stack while reloading; the sandbox is reloaded' };
      }
      if (created.sandbox === undefined) {
        const message = created.error ?? 'sandbox rebuild failed';
        if (created.resource) this.noteResourceFailure(message);
        return { kind: created.resource ? 'resource' : 'threw', message };
      }
      this.sandbox = created.sandbox;
    }
    const outcome = this.sandbox.call(entryPoint, input, this.limits.timeoutMs);
    if (outcome.kind === 'damaged') {
      this.sandbox = undefined; // never touched again: its module is unusable
      markModuleDamaged(this.module);
      return { kind: 'threw', message: outcome.message };
    }
    if (outcome.kind === 'resource') {
      // A runtime interrupted mid-allocation or out of memory may hold half-built state.
      this.sandbox.dispose();
      this.sandbox = undefined;
      this.noteResourceFailure(outcome.message);
    } else if (outcome.kind === 'invalid') {
      return { kind: 'invalid', message: `codec returned an invalid result: ${outcome.message}` };
    }
    return outcome;
  }

  private noteResourceFailure(message: string): void {
    this.consecutiveResourceFailures++;
    if (this.consecutiveResourceFailures >= this.limits.maxConsecutiveResourceFailures) {
      this.disabledBecause = `disabled after ${this.consecutiveResourceFailures} consecutive resource failures (last: ${message}); script ${this.hash.slice(0, 12)}`;
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    // A damaged module's memory is abandoned whole (freed with the module), not walked again.
    if (!isModuleDamaged(this.module)) this.sandbox?.dispose();
    this.sandbox = undefined;
  }
}
