import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, DEFAULT_CONFIG, configKeyPaths, loadConfig } from '../../src/core/config.js';

const EXAMPLE = fileURLToPath(new URL('../../config/example.jsonc', import.meta.url));

test('config/example.jsonc loads as a config file and gives the embedded defaults', () => {
  const config = loadConfig({ file: EXAMPLE, env: {} });
  assert.deepEqual({ ...config, dataDir: DEFAULT_CONFIG.dataDir }, DEFAULT_CONFIG);
});

test('config/example.jsonc mentions every key the loader knows, with a comment', () => {
  const text = readFileSync(EXAMPLE, 'utf8');
  const keys = configKeyPaths();
  assert.ok(keys.includes('mqtt.tls.cert') && keys.includes('limits.rate'), 'the schema walk finds nested keys');
  for (const key of keys) {
    const leaf = key.split('.').pop()!.replace('[]', '');
    assert.ok(text.includes(`"${leaf}"`), `${key} appears in the example`);
  }
  // The optional sections of later features are there for people to uncomment.
  for (const section of ['"radio"', '"upstream"', '"serial"', '"maxBytes"']) assert.ok(text.includes(section), section);
  assert.ok(text.split('\n').filter((l) => l.trim().startsWith('//')).length > 40, 'the example explains its keys');
});

test('a config file may carry comments and trailing commas; a syntax error names line and column', () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-jsonc-'));
  try {
    const good = join(dir, 'good.json');
    writeFileSync(good, '// gateway\n{\n  /* port */ "http": { "port": 9001, },\n}\n');
    assert.equal(loadConfig({ file: good, env: {} }).http.port, 9001);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{\n  "http": { "port": 9001 }\n  "mqtt": {}\n}\n');
    assert.throws(
      () => loadConfig({ file: bad, env: {} }),
      (e: unknown) => e instanceof ConfigError && /not valid JSON at line 3, column 3/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
