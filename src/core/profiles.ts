import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import type { RE2JS } from 're2js';
import { ServiceError } from './errors.js';
import { isJsonObject } from './json.js';

// Ajv and RE2 load when the first profile is compiled, not when the daemon starts: a gateway at
// rest, or one whose devices have not sent yet, carries neither (docs/architecture.md).
const load = createRequire(import.meta.url);
let re2: typeof RE2JS | undefined;
const RE2 = (): typeof RE2JS => (re2 ??= (load('re2js') as { RE2JS: typeof RE2JS }).RE2JS);

/**
 * Asset profiles are a JSON-Schema subset (docs/api.md, "Profiles"). Only these keywords are validated;
 * everything else (`unit`, `title`, `threshold`, vendor keys) is stored and echoed unchanged.
 */
const VALIDATED_KEYWORDS = ['type', 'enum', 'minimum', 'maximum', 'pattern', 'properties', 'required', 'items'] as const;
export const PROFILE_TYPES = ['string', 'boolean', 'integer', 'number', 'object', 'array'] as const;
export type ProfileType = (typeof PROFILE_TYPES)[number];

export type Profile = Record<string, unknown> & { type: ProfileType };

export interface ValueCheck {
  ok: boolean;
  /** Set when the refusal is not the value's fault (the profile cannot be compiled). */
  code?: 'PROFILE_UNSUPPORTED';
  /** Names the JSON path inside the value and the rule, e.g. `value/lat must be <= 90 (maximum)`. */
  error?: string;
}

/**
 * Checks the shape of a profile and returns the schema that ajv compiles (validated keywords only).
 * Throws INVALID_PROFILE naming the path of the first problem.
 */
function toValidatedSchema(profile: unknown, path: string, topLevel: boolean): Record<string, unknown> {
  if (!isJsonObject(profile)) throw new ServiceError('INVALID_PROFILE', `${path} must be an object`);
  const schema: Record<string, unknown> = {};
  const type = profile.type;
  if (type === undefined) {
    if (topLevel) throw new ServiceError('INVALID_PROFILE', `${path}.type is required`);
  } else if (typeof type !== 'string' || !(PROFILE_TYPES as readonly string[]).includes(type)) {
    throw new ServiceError('INVALID_PROFILE', `${path}.type must be one of ${PROFILE_TYPES.join(', ')}`);
  } else {
    schema.type = type;
  }
  for (const keyword of VALIDATED_KEYWORDS) {
    const v = profile[keyword];
    if (v === undefined || keyword === 'type') continue;
    const where = `${path}.${keyword}`;
    switch (keyword) {
      case 'enum':
        if (!Array.isArray(v) || v.length === 0) throw new ServiceError('INVALID_PROFILE', `${where} must be a non-empty array`);
        schema.enum = v;
        break;
      case 'minimum':
      case 'maximum':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw new ServiceError('INVALID_PROFILE', `${where} must be a number`);
        schema[keyword] = v;
        break;
      case 'pattern':
        if (typeof v !== 'string') throw new ServiceError('INVALID_PROFILE', `${where} must be a string`);
        try {
          new RegExp(v, 'u');
        } catch (err) {
          throw new ServiceError('INVALID_PROFILE', `${where} is not a valid regular expression: ${(err as Error).message}`);
        }
        schema.pattern = v;
        break;
      case 'required':
        if (!Array.isArray(v) || !v.every((n) => typeof n === 'string')) {
          throw new ServiceError('INVALID_PROFILE', `${where} must be an array of strings`);
        }
        schema.required = v;
        break;
      case 'properties': {
        if (!isJsonObject(v)) throw new ServiceError('INVALID_PROFILE', `${where} must be an object`);
        const properties: Record<string, unknown> = {};
        for (const [name, sub] of Object.entries(v)) {
          // ajv skips a `__proto__` property schema without a word: the member would go unchecked.
          if (name === '__proto__') throw new ServiceError('PROFILE_UNSUPPORTED', `${where}.__proto__: a member named "__proto__" cannot be validated; use another name`);
          properties[name] = toValidatedSchema(sub, `${where}.${name}`, false);
        }
        schema.properties = properties;
        break;
      }
      case 'items':
        schema.items = toValidatedSchema(v, where, false);
        break;
    }
  }
  return schema;
}

/** Reads profile keys case-insensitively at the top (SDKs send `Type`), keeping unknown keys. */
export function normalizeProfile(raw: unknown): Profile {
  if (!isJsonObject(raw)) throw new ServiceError('INVALID_PROFILE', 'profile must be an object');
  const profile: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    const lower = key.toLowerCase();
    const known = (VALIDATED_KEYWORDS as readonly string[]).includes(lower);
    profile[known ? lower : key] = value;
  }
  toValidatedSchema(profile, 'profile', true);
  return profile as Profile;
}

function describe(error: ErrorObject): string {
  const where = `value${error.instancePath}`;
  const p = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'type':
      return `${where} must be of type ${String(p.type)} (type)`;
    case 'enum':
      return `${where} must be one of ${JSON.stringify(p.allowedValues)} (enum)`;
    case 'minimum':
      return `${where} must be >= ${String(p.limit)} (minimum)`;
    case 'maximum':
      return `${where} must be <= ${String(p.limit)} (maximum)`;
    case 'pattern':
      return `${where} must match pattern ${JSON.stringify(p.pattern)} (pattern)`;
    case 'required':
      return `${where} must have member ${JSON.stringify(p.missingProperty)} (required)`;
    default:
      return `${where} ${error.message ?? 'is invalid'} (${error.keyword})`;
  }
}

/**
 * JSON Schema `pattern`s come from devices (a device token may create assets on its own device),
 * so they must not be able to stall the daemon: JavaScript's backtracking engine takes exponential
 * time on patterns like `^(a|aa)+$`. Patterns run on RE2's linear-time engine instead (re2js, a
 * pure-JavaScript port: nothing to build on a Raspberry Pi, loaded in a few milliseconds).
 * RE2 has no lookaround or backreferences; such patterns are refused when the profile is set.
 */
function re2Syntax(pattern: string): string {
  // ECMAScript's `\uXXXX` and `\u{X…}` escapes are RE2's `\x{…}`; an escaped backslash stays as is.
  return pattern.replace(/\\(\\|u\{([0-9A-Fa-f]{1,6})\}|u([0-9A-Fa-f]{4}))/g, (whole, _body, braced, four) =>
    braced !== undefined || four !== undefined ? `\\x{${braced ?? four}}` : whole,
  );
}

const linearRegExp: RegExpEngine = Object.assign(
  (pattern: string) => {
    const compiled = RE2().compile(re2Syntax(pattern));
    // ajv shares compiled patterns by their toString(), so it must name the pattern.
    return { test: (text: string) => compiled.matcher(text).find(), toString: () => `re2:${pattern}` };
  },
  { code: 're2js' },
);

/** Why RE2 cannot compile a pattern that JavaScript accepts, or undefined when it can. */
export function patternProblem(pattern: string): string | undefined {
  try {
    linearRegExp(pattern, 'u');
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** A profile that is well-formed but cannot be compiled (e.g. a pattern RE2 does not support). */
function unsupported(detail: string): ServiceError {
  return new ServiceError('PROFILE_UNSUPPORTED', `profile cannot be compiled: ${detail}`);
}

/**
 * Compiles each distinct profile once: assets of the same model share one validator,
 * so a gateway with thousands of identical sensors compiles a handful of functions.
 */
export class ProfileValidators {
  // ownProperties: members such as `constructor` or `toString` are checked only when the value has them.
  // strictNumbers: a number must be finite (`strict: false` would turn that off along with the rest).
  #ajvInstance: Ajv | undefined;
  get #ajv(): Ajv {
    if (this.#ajvInstance) return this.#ajvInstance;
    const { Ajv: AjvClass } = load('ajv') as { Ajv: typeof Ajv };
    return (this.#ajvInstance = new AjvClass({ allErrors: false, strict: false, strictNumbers: true, ownProperties: true, allowUnionTypes: false, code: { regExp: linearRegExp } }));
  }
  readonly #byProfile = new Map<string, ValidateFunction | ServiceError>();

  #compiled(profile: Profile): ValidateFunction | ServiceError {
    const key = JSON.stringify(profile);
    let compiled = this.#byProfile.get(key);
    if (!compiled) {
      try {
        compiled = this.#ajv.compile(toValidatedSchema(profile, 'profile', true));
      } catch (err) {
        compiled = err instanceof ServiceError ? err : unsupported((err as Error).message);
      }
      this.#byProfile.set(key, compiled);
    }
    return compiled;
  }

  /** Throws PROFILE_UNSUPPORTED naming the problem when the profile cannot be compiled (asset create/change). */
  assertCompiles(profile: Profile): void {
    const compiled = this.#compiled(profile);
    if (compiled instanceof ServiceError) throw compiled;
  }

  /**
   * Never throws: an asset stored with a profile that no longer compiles (made by an older version)
   * gets a check that refuses its states with the reason, and every other asset keeps working.
   */
  validatorFor(profile: Profile): (value: unknown) => ValueCheck {
    const compiled = this.#compiled(profile);
    if (compiled instanceof ServiceError) {
      const refusal: ValueCheck = { ok: false, code: 'PROFILE_UNSUPPORTED', error: `the asset's ${compiled.message}; change the profile` };
      return () => refusal;
    }
    return (value: unknown) => {
      let valid: boolean;
      try {
        valid = compiled(value) as boolean;
      } catch (err) {
        // ajv compares `enum` members with fast-deep-equal, which calls a member named `toString` or
        // `valueOf` as a method: a value (or enum entry) where that member is not one throws.
        return { ok: false, error: `value cannot be compared with the profile (${(err as Error).message}); members named toString or valueOf do not work with enum (enum)` };
      }
      if (valid) return { ok: true };
      const first = compiled.errors?.[0];
      return { ok: false, error: first ? describe(first) : 'value does not match the profile' };
    };
  }
}
