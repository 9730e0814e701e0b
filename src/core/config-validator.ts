import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Ajv, Options, ValidateFunction } from 'ajv';

/** How the config schema is checked; the build's precompiled validator is made with the same options. */
export const CONFIG_AJV_OPTIONS: Options = { allErrors: false, strict: true, allowUnionTypes: true };

/**
 * The validator `npm run build` generates next to this module (scripts/precompile-config-schema.mjs),
 * as Ajv's standalone code. Compiling the schema at run time costs about 60 ms of CPU and several
 * MB on every start (more than any other step of `outpost run`); loading the generated code costs
 * about 1 ms.
 */
export const PRECOMPILED_FILE = 'config-schema.precompiled.cjs';

/** Names the schema and the options together: a validator built from other ones is not used. */
export function schemaFingerprint(schema: object): string {
  return createHash('sha256').update(JSON.stringify([CONFIG_AJV_OPTIONS, schema])).digest('hex');
}

let cached: { schema: object; validate: ValidateFunction; precompiled: boolean } | undefined;

/**
 * The validator of `schema`: the precompiled one when the build made it from this very schema,
 * else compiled here (running from the sources, or a schema edited since the build). Kept for
 * SIGHUP reloads.
 */
export function configValidator(schema: object): { validate: ValidateFunction; precompiled: boolean } {
  if (cached?.schema === schema) return cached;
  const load = createRequire(import.meta.url);
  let validate: ValidateFunction | undefined;
  try {
    const built = load(`./${PRECOMPILED_FILE}`) as ValidateFunction & { schemaFingerprint?: string };
    if (built.schemaFingerprint === schemaFingerprint(schema)) validate = built;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw err;
  }
  cached = { schema, validate: validate ?? new (load('ajv') as { Ajv: typeof Ajv }).Ajv(CONFIG_AJV_OPTIONS).compile(schema), precompiled: validate !== undefined };
  return cached;
}
