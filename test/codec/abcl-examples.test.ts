// Runs every vector beside every document in abcl/.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeAbcl, encodeAbcl } from '../../src/codec/abcl/index.js';
import { hex, mustLoad, repoRoot, toHex } from './helpers.js';

type ExampleVector = {
  name: string;
  direction: 'sense' | 'actuate';
  input: string | Record<string, never>;
  previous?: Record<string, never>;
  expect: { states?: unknown; bytes?: string; warnings?: number; errors?: number };
};

const exampleDir = `${repoRoot}abcl/`;
const documents = readdirSync(exampleDir).filter((name) => name.endsWith('.abcl.json'));

test('the five example devices are present, each with vectors', () => {
  assert.deepEqual(documents.sort(), ['counter.abcl.json', 'dimmer.abcl.json', 'door-sensor.abcl.json', 'environment-sensor.abcl.json', 'tracker.abcl.json']);
});

for (const documentName of documents) {
  describe(documentName, () => {
    const doc = mustLoad(readFileSync(exampleDir + documentName, 'utf8'));
    const vectors = JSON.parse(readFileSync(exampleDir + documentName.replace('.abcl.json', '.vectors.json'), 'utf8')) as ExampleVector[];
    test('has vectors', () => assert.ok(vectors.length >= 3));
    for (const vector of vectors) {
      test(vector.name, () => {
        if (vector.direction === 'sense') {
          const result = decodeAbcl(doc, hex(vector.input as string));
          assert.deepEqual(result.states, vector.expect.states);
          assert.equal(result.warnings.length, vector.expect.warnings ?? 0, result.warnings.join('; '));
          assert.equal(result.errors.length, vector.expect.errors ?? 0);
        } else {
          const result = encodeAbcl(doc, vector.input as Record<string, never>, vector.previous);
          assert.equal(toHex(result.bytes), vector.expect.bytes);
          assert.equal(result.warnings.length, vector.expect.warnings ?? 0, result.warnings.join('; '));
          assert.equal(result.errors.length, vector.expect.errors ?? 0, result.errors.join('; '));
        }
      });
    }
  });
}
