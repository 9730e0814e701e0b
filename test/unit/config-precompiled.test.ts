// The build precompiles the config schema's validator (src/core/config-validator.ts): the compiled
// daemon must use it, and it must judge every config exactly as the schema compiled at run time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as fromSources from '../../src/core/config.js';
import { configValidator } from '../../src/core/config-validator.js';
import { ROOT } from '../helpers/daemon.js';

type ConfigModule = typeof fromSources;
type ValidatorModule = { configValidator: typeof configValidator };
const dist = (path: string) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

test('the compiled daemon validates its config with the validator the build generated from the current schema', async () => {
  const built = (await dist('core/config.js')) as ConfigModule;
  const { configValidator: builtValidator } = (await dist('core/config-validator.js')) as ValidatorModule;
  assert.equal(builtValidator(built.CONFIG_SCHEMA).precompiled, true, 'run `npm run build`: dist has no validator for this schema');
  // From the sources there is none: the schema is compiled at run time, as a fallback.
  assert.equal(configValidator(fromSources.CONFIG_SCHEMA).precompiled, false);
});

test('the precompiled validator refuses what the run-time one refuses, with the same message', async () => {
  const built = (await dist('core/config.js')) as ConfigModule;
  const base = structuredClone(fromSources.DEFAULT_CONFIG) as unknown as Record<string, any>;
  const variants: Array<(c: Record<string, any>) => void> = [
    () => {},
    (c) => (c.bogus = 1),
    (c) => (c.http.port = 70000),
    (c) => (c.mqtt.tls.enabled = 'yes'),
    (c) => (c.role = 'hub'),
    (c) => (c.radio.serial = [{ path: '/dev/ttyUSB0', modem: 'rn2483' }]),
    (c) => (c.radio.serial = [{ path: '/dev/ttyUSB0', modem: 'rn2483', baudRate: 57600, frequency: 868100000, spreadingFactor: 6, bandwidth: 125 }]),
    (c) => (c.upstream.window = 0),
    (c) => delete c.version,
  ];
  const outcome = (validate: (c: unknown) => void, candidate: unknown) => {
    try {
      validate(candidate);
      return 'valid';
    } catch (err) {
      return (err as Error).message;
    }
  };
  for (const change of variants) {
    const candidate = structuredClone(base);
    change(candidate);
    const expected = outcome(fromSources.validateConfig, structuredClone(candidate));
    assert.equal(outcome(built.validateConfig, structuredClone(candidate)), expected, String(change));
  }
});
