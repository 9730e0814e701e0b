// Sandbox limits (docs/codecs.md, "JavaScript codecs"). Each is configurable per daemon, with a per-device override.

export interface JsCodecLimits {
  /** QuickJS heap per runtime. */
  memoryBytes: number;
  /** Interpreter stack per runtime. */
  stackBytes: number;
  /** Budget per call; loading (top-level code) gets 10×. */
  timeoutMs: number;
  /** Script size in UTF-8 bytes, checked before loading. */
  scriptBytes: number;
  /** Consecutive time-outs/out-of-memory failures before the codec is disabled. */
  maxConsecutiveResourceFailures: number;
}

const KIB = 1024;
const MIB = 1024 * KIB;

export const DEFAULT_JS_LIMITS: Readonly<JsCodecLimits> = Object.freeze({
  memoryBytes: 16 * MIB,
  stackBytes: 256 * KIB,
  timeoutMs: 100,
  scriptBytes: 64 * KIB,
  maxConsecutiveResourceFailures: 5,
});

const RANGES: Record<keyof JsCodecLimits, [number, number]> = {
  memoryBytes: [1 * MIB, 256 * MIB],
  stackBytes: [64 * KIB, 8 * MIB],
  timeoutMs: [10, 5000],
  scriptBytes: [1 * KIB, 1 * MIB],
  maxConsecutiveResourceFailures: [1, 1000],
};

export function resolveJsLimits(overrides: Partial<JsCodecLimits> = {}): { limits: JsCodecLimits; errors: string[] } {
  const limits: JsCodecLimits = { ...DEFAULT_JS_LIMITS };
  const errors: string[] = [];
  for (const key of Object.keys(RANGES) as (keyof JsCodecLimits)[]) {
    const value = overrides[key];
    if (value === undefined) continue;
    const [min, max] = RANGES[key];
    if (!Number.isInteger(value) || value < min || value > max) errors.push(`limits.${key} must be an integer from ${min} to ${max} (got ${value})`);
    else limits[key] = value;
  }
  return { limits, errors };
}
