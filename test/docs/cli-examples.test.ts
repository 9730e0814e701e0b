// Every command-line example in the docs names the data dir or config it acts on: without them a
// command silently works on ./data of the current directory (a gateway registered in the wrong
// database was the result). Daemons are started with node or the service, never `npx outpost run`
// (npx does not pass SIGTERM on, leaving the daemon running).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/daemon.js';

/** Commands that act on a data directory (the codec commands act on files only). */
const DATA_COMMANDS = new Set(['run', 'device', 'asset', 'token', 'state', 'gateway', 'outbox', 'status', 'doctor', 'backup', 'restore']);

interface Example {
  file: string;
  line: number;
  text: string;
  block: string[];
}

function codeBlockExamples(file: string): Example[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  const examples: Example[] = [];
  let block: string[] | undefined;
  let section = '';
  lines.forEach((raw, i) => {
    if (raw.startsWith('## ')) section = raw;
    if (/^\s*```/.test(raw)) {
      block = block ? undefined : [];
      return;
    }
    if (!block) return;
    block.push(raw);
    // The README's command synopsis lists the syntax; the paragraph above it names --data/--config.
    if (file === 'README.md' && section === '## Command line') return;
    const m = /^\s*(?:\$ )?(?:[A-Z_]+=\S+ )*(?:npx )?outpost (\w+)/.exec(raw) ?? /^\s*(?:\$ )?(?:[A-Z_]+=\S+ )*node \S*dist\/cli\/main\.js (\w+)/.exec(raw);
    if (m && DATA_COMMANDS.has(m[1]!)) examples.push({ file, line: i + 1, text: raw.trim(), block });
  });
  return examples;
}

test('every outpost command in a docs code block names its --data or --config', () => {
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const examples = files.flatMap(codeBlockExamples);
  assert.ok(examples.length >= 10, `found ${examples.length} examples: the scan works`);
  const unnamed = examples.filter((e) => !/--data\b|--config\b/.test(e.text) && !e.block.some((l) => /# the alias above/.test(l)));
  assert.deepEqual(unnamed.map((e) => `${e.file}:${e.line}: ${e.text}`), []);
});

test('no doc starts a daemon with npx outpost run', () => {
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const starts = files.flatMap(codeBlockExamples).filter((e) => /npx outpost run/.test(e.text));
  assert.deepEqual(starts.map((e) => `${e.file}:${e.line}`), []);
  // In prose it may only be named as what not to do.
  for (const file of files) {
    for (const line of readFileSync(join(ROOT, file), 'utf8').split('\n').filter((l) => l.includes('npx outpost run'))) {
      assert.match(line, /not|npx does not pass/, `${file}: ${line}`);
    }
  }
});

test('the docs agree with each other and cite nothing a user does not have', () => {
  const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  for (const file of files) {
    const text = read(file);
    assert.doesNotMatch(text, /\bthe spec\b|project reference/i, `${file} points at a document outside the repository`);
  }
  // Node.js: the README's minimum is the one operations.md states.
  const minimum = /Node\.js ≥ (\d+)/.exec(read('README.md'))?.[1];
  assert.ok(minimum, 'the README states a minimum Node.js version');
  assert.match(read('docs/operations.md'), new RegExp(`needs Node\\.js ${minimum} or later`));
  // CBOR speed: docs/codecs.md repeats the README benchmark's ratio to JSON.parse (3 assets).
  const row = /\| the same \| [\d ]+ \| `JSON\.parse` of the same state \| [\d ]+ \| ([\d.]+) \|/.exec(read('README.md'));
  assert.ok(row, 'the README has the CBOR-vs-JSON.parse row');
  const ratio = Number(row[1]).toFixed(1);
  assert.match(read('docs/codecs.md'), new RegExp(`CBOR device state \\(3 assets\\) decodes at about ${ratio.replace('.', '\\.')}× the speed of\\s+\`JSON\\.parse\``));
});
