// Shared helpers for the codec tests.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { hexToBytes, bytesToHex } from '../../src/codec/hex.js';
import { loadAbcl, type CompiledAbcl } from '../../src/codec/abcl/index.js';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
/** Published ABCL documents with real payloads (the project reference's vector file, kept in the repo). */
export const referenceDir = fileURLToPath(new URL('./fixtures/', import.meta.url));

export function hex(text: string): Uint8Array {
  const bytes = hexToBytes(text.replace(/\s+/g, ''));
  if (bytes === undefined) throw new Error(`bad hex in test: ${text}`);
  return bytes;
}

export function toHex(bytes: Uint8Array): string {
  return bytesToHex(bytes);
}

/** Loads a document that must load without errors. */
export function mustLoad(doc: string | object): CompiledAbcl {
  const result = loadAbcl(doc);
  assert.deepEqual(result.errors, [], `load errors: ${result.errors.join('; ')}`);
  assert.equal(result.ok, true);
  return result.doc!;
}

export function readJson(path: string): unknown {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/** A small deterministic PRNG (mulberry32) so property and fuzz tests are reproducible. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
