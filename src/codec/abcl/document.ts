// Loading (validation + compilation) and running of whole ABCL documents (docs/codecs.md, "Writing an ABCL document").
import { createHash } from 'node:crypto';
import type { DecodeResult, DecodedState, EncodeResult } from '../types.js';
import { compileActuate, runActuate, type CompiledActuate } from './actuate.js';
import { parseJsonc } from './jsonc.js';
import { LoadProblems, memberPath } from './problems.js';
import { compileSenseBlock } from './sense.js';
import type { SenseRun, SenseStatement } from './sense-run.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../../core/json.js';

/** A loaded document: only this compiled form runs per message. */
export interface CompiledAbcl {
  readonly kind: 'abcl';
  /** SHA-256 (hex) of the text, or of the JSON text of an object. */
  readonly hash: string;
  readonly name: string | undefined;
  readonly sense: readonly SenseStatement[] | undefined;
  readonly actuate: CompiledActuate | undefined;
}

export interface AbclLoadResult {
  ok: boolean;
  doc?: CompiledAbcl;
  errors: string[];
  warnings: string[];
}

const FREE_TEXT_KEYS = ['name', 'comment', 'version'];

function compileDocument(root: JsonValue, hash: string, problems: LoadProblems): CompiledAbcl | undefined {
  if (!isJsonObject(root)) {
    problems.error('', 'the document must be a JSON object');
    return undefined;
  }
  for (const key of Object.keys(root)) {
    if (FREE_TEXT_KEYS.includes(key)) {
      if (typeof root[key] !== 'string') problems.warning(memberPath('', key), 'should be a string; ignored');
    } else if (key !== 'sense' && key !== 'actuate') {
      problems.warning(memberPath('', key), 'is not a known top-level key; ignored');
    }
  }
  const hasSense = Object.hasOwn(root, 'sense');
  const hasActuate = Object.hasOwn(root, 'actuate');
  if (!hasSense && !hasActuate) {
    problems.error('', 'the document has neither "sense" nor "actuate"');
    return undefined;
  }
  const sense = hasSense ? compileSenseBlock(root.sense!, 'sense', problems) : undefined;
  const actuate = hasActuate ? compileActuate(root.actuate!, problems) : undefined;
  return { kind: 'abcl', hash, name: typeof root.name === 'string' ? root.name : undefined, sense, actuate };
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Loads without caching: validates the whole document and compiles it once. */
export function loadAbclUncached(source: string | object): AbclLoadResult {
  const problems = new LoadProblems();
  let root: JsonValue;
  let hashInput: string;
  try {
    if (typeof source === 'string') {
      hashInput = source;
      const parsed = parseJsonc(source);
      if (!parsed.ok) return { ok: false, errors: [parsed.error], warnings: [] };
      root = parsed.value;
    } else {
      hashInput = JSON.stringify(source);
      root = source as JsonValue;
    }
    const doc = compileDocument(root, sha256(hashInput), problems);
    if (doc === undefined || problems.errors.length > 0) return { ok: false, errors: problems.errors, warnings: problems.warnings };
    return { ok: true, doc, errors: [], warnings: problems.warnings };
  } catch (error) {
    // Only pathological nesting can get here: the parsers and compilers recurse per level.
    if (error instanceof RangeError) return { ok: false, errors: [`the document is nested too deeply (${error.message})`], warnings: problems.warnings };
    throw error;
  }
}

/**
 * Compiled documents keyed by the SHA-256 of their text (or JSON text, for objects; member
 * order matters because object descriptors keep it). The same document attached to many devices
 * is compiled once. Bounded, least recently used out first.
 */
export class AbclDocumentCache {
  private readonly entries = new Map<string, AbclLoadResult>();

  constructor(readonly capacity = 256) {}

  load(source: string | object): AbclLoadResult {
    const key = sha256(typeof source === 'string' ? `t:${source}` : `o:${JSON.stringify(source)}`);
    const cached = this.entries.get(key);
    if (cached !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, cached);
      return { ...cached, errors: [...cached.errors], warnings: [...cached.warnings] };
    }
    const result = loadAbclUncached(source);
    this.entries.set(key, result);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    return { ...result, errors: [...result.errors], warnings: [...result.warnings] };
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Loads a document, through `cache` when one is given. */
export function loadAbcl(source: string | object, cache?: AbclDocumentCache): AbclLoadResult {
  return cache === undefined ? loadAbclUncached(source) : cache.load(source);
}

const EMPTY = new Uint8Array(0);

/**
 * The states of one decode. A constructor rather than `{}` because V8 sizes a constructor's objects
 * for the properties they end up with (in-object slack tracking), so a document's ten assets are
 * stored in-object instead of in a grown backing store (~10 % faster decodes, measured). The
 * prototype is Object.prototype: results stay plain objects to every caller and to deepEqual.
 */
const DecodedStates = function DecodedStates(this: object) {} as unknown as new () => { [asset: string]: DecodedState };
DecodedStates.prototype = Object.prototype;

export function decodeAbcl(doc: CompiledAbcl, uplink: Uint8Array | JsonObject): DecodeResult {
  if (doc.sense === undefined) return { states: {}, warnings: [], errors: ['the document has no sense block'] };
  let bytes: Uint8Array | null = null;
  let json: JsonObject | null = null;
  if (uplink instanceof Uint8Array) bytes = uplink;
  else if (isJsonObject(uplink)) json = uplink;
  else return { states: {}, warnings: [], errors: ['the uplink is neither bytes nor a JSON object'] };
  const run: SenseRun = { bytes, json, states: new DecodedStates(), warnings: [] };
  const statements = doc.sense;
  for (let i = 0; i < statements.length; i++) statements[i]!(run);
  return { states: run.states, warnings: run.warnings, errors: [] };
}

export function encodeAbcl(doc: CompiledAbcl, command: JsonObject, previous?: JsonObject): EncodeResult {
  if (doc.actuate === undefined) return { bytes: EMPTY, warnings: [], errors: ['the document has no actuate block'] };
  if (!isJsonObject(command)) return { bytes: EMPTY, warnings: [], errors: ['the command must be an object of asset → value'] };
  return runActuate(doc.actuate, command, previous !== undefined && isJsonObject(previous) ? previous : undefined);
}
