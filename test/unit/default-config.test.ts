import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { DEFAULT_CONFIG, validateConfig } from '../../src/core/config.js';

test('config/default.json is valid and equals the embedded defaults', () => {
  const file = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8'));
  validateConfig(file);
  assert.deepEqual(file, DEFAULT_CONFIG);
});

test('docs/configuration.md documents every key', () => {
  const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
  const keys = (obj: Record<string, unknown>, prefix = ''): string[] =>
    Object.entries(obj).flatMap(([k, v]) =>
      v && typeof v === 'object' && !Array.isArray(v) ? keys(v as Record<string, unknown>, `${prefix}${k}.`) : [`${prefix}${k}`],
    );
  for (const key of keys(DEFAULT_CONFIG as unknown as Record<string, unknown>)) assert.ok(doc.includes(`\`${key}\``), `${key} is documented`);
});
