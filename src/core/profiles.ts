import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { ServiceError } from './errors.js';

/**
 * Asset profiles are a JSON-Schema subset (contract §6). Only these keywords are validated;
 * everything else (`unit`, `title`, `threshold`, vendor keys) is stored and echoed unchanged.
 */
const VALIDATED_KEYWORDS = ['type', 'enum', 'minimum', 'maximum', 'pattern', 'properties', 'required', 'items'] as const;
export const PROFILE_TYPES = ['string', 'boolean', 'integer', 'number', 'object', 'array'] as const;
export type ProfileType = (typeof PROFILE_TYPES)[number];

export type Profile = Record<string, unknown> & { type: ProfileType };

export interface ValueCheck {
  ok: boolean;
  /** Names the JSON path inside the value and the rule, e.g. `value/lat must be <= 90 (maximum)`. */
  error?: string;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Checks the shape of a profile and returns the schema that ajv compiles (validated keywords only).
 * Throws INVALID_PROFILE naming the path of the first problem.
 */
function toValidatedSchema(profile: unknown, path: string, topLevel: boolean): Record<string, unknown> {
  if (!isPlainObject(profile)) throw new ServiceError('INVALID_PROFILE', `${path} must be an object`);
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
        if (!isPlainObject(v)) throw new ServiceError('INVALID_PROFILE', `${where} must be an object`);
        const properties: Record<string, unknown> = {};
        for (const [name, sub] of Object.entries(v)) properties[name] = toValidatedSchema(sub, `${where}.${name}`, false);
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
  if (!isPlainObject(raw)) throw new ServiceError('INVALID_PROFILE', 'profile must be an object');
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
 * Compiles each distinct profile once: assets of the same model share one validator,
 * so a gateway with thousands of identical sensors compiles a handful of functions.
 */
export class ProfileValidators {
  readonly #ajv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: false });
  readonly #byProfile = new Map<string, ValidateFunction>();

  validatorFor(profile: Profile): (value: unknown) => ValueCheck {
    const key = JSON.stringify(profile);
    let validate = this.#byProfile.get(key);
    if (!validate) {
      validate = this.#ajv.compile(toValidatedSchema(profile, 'profile', true));
      this.#byProfile.set(key, validate);
    }
    const compiled = validate;
    return (value: unknown) => {
      if (compiled(value)) return { ok: true };
      const first = compiled.errors?.[0];
      return { ok: false, error: first ? describe(first) : 'value does not match the profile' };
    };
  }
}
