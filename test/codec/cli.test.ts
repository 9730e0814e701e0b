// `outpost codec check | decode | encode` on the abcl/ examples, with the JSON shapes of docs/codecs.md, "Command line".
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { runCodecCommand } from '../../src/cli/commands/codec.js';
import { repoRoot } from './helpers.js';

async function run(args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runCodecCommand(args, (line) => lines.push(line));
  return { code, lines };
}

async function runJson(args: string[]): Promise<{ code: number; body: Record<string, unknown> }> {
  const { code, lines } = await run([...args, '--json']);
  assert.equal(lines.length, 1);
  return { code, body: JSON.parse(lines[0]!) as Record<string, unknown> };
}

const example = (name: string) => join(repoRoot, 'abcl', name);
const scratch = mkdtempSync(join(tmpdir(), 'outpost-codec-cli-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe('codec check', () => {
  test('every example checks out', async () => {
    for (const name of ['counter', 'environment-sensor', 'tracker', 'door-sensor', 'dimmer']) {
      const { code, body } = await runJson(['check', example(`${name}.abcl.json`)]);
      assert.equal(code, 0);
      assert.deepEqual(body, { ok: true, warnings: [], errors: [] });
    }
  });

  test('a broken document lists every problem with its path, exit 1', async () => {
    const file = join(scratch, 'broken.abcl.json');
    writeFileSync(file, '{"sense": [{"asset": "a", "value": {"byte": -1}}, {"asset": "", "value": {"json": "a..b"}}], "extra": 1}');
    const { code, body } = await runJson(['check', file]);
    assert.equal(code, 1);
    assert.equal(body.ok, false);
    assert.equal((body.errors as string[]).length, 3);
    assert.equal((body.warnings as string[]).length, 1);
    assert.match((body.errors as string[])[0]!, /^sense\[0\]\.value\.byte /);
  });

  test('a syntax error gives line and column', async () => {
    const file = join(scratch, 'syntax.abcl.json');
    writeFileSync(file, '{\n  "sense": [,]\n}');
    const { code, body } = await runJson(['check', file]);
    assert.equal(code, 1);
    assert.match((body.errors as string[])[0]!, /line 2, column 13/);
  });

  test('a JS codec file', async () => {
    const file = join(scratch, 'codec.js');
    writeFileSync(file, 'function decodeUplink(i) { return { data: { first: i.bytes[0], port: i.fPort } } }\nfunction encodeDownlink(i) { return { bytes: [i.data.x], fPort: 7 } }');
    assert.deepEqual((await runJson(['check', file])).body, { ok: true, warnings: [], errors: [] });
    assert.deepEqual((await runJson(['decode', file, '--hex', '2A', '--port', '3'])).body, { states: { first: { value: 42 }, port: { value: 3 } }, warnings: [], errors: [] });
    assert.deepEqual((await runJson(['encode', file, '--values', '{"x": 255}'])).body, { bytes: 'FF', fPort: 7, warnings: [], errors: [] });
    const broken = join(scratch, 'broken.js');
    writeFileSync(broken, 'function decodeUplink(i) {');
    assert.equal((await runJson(['check', broken])).code, 1);
  });

  test('readable output by default', async () => {
    const { code, lines } = await run(['check', example('tracker.abcl.json')]);
    assert.equal(code, 0);
    assert.match(lines[0]!, /OK/);
  });
});

describe('codec decode', () => {
  test('binary uplink', async () => {
    const { code, body } = await runJson(['decode', example('environment-sensor.abcl.json'), '--hex', '66085B100E']);
    assert.equal(code, 0);
    assert.deepEqual(body, { states: { temperature: { value: 21.5 }, humidity: { value: 45.5 }, battery: { value: 3.6 } }, warnings: [], errors: [] });
  });

  test('warnings are listed and the exit code stays 0', async () => {
    const { code, body } = await runJson(['decode', example('tracker.abcl.json'), '--hex', '09abcd']);
    assert.equal(code, 0);
    assert.equal((body.warnings as string[]).length, 1);
  });

  test('JSON mode with --text', async () => {
    const file = join(scratch, 'json-mode.abcl.json');
    writeFileSync(file, '{"sense": [{"asset": "t", "value": {"json": "m.temp", "calculation": "val / 10"}, "at": {"json": "ts"}}]}');
    const { body } = await runJson(['decode', file, '--text', '{"m": {"temp": 215}, "ts": 1600000000}']);
    assert.deepEqual(body, { states: { t: { value: 21.5, at: '2020-09-13T12:26:40.000Z' } }, warnings: [], errors: [] });
  });

  test('readable output lists the states', async () => {
    const { lines } = await run(['decode', example('door-sensor.abcl.json'), '--hex', '310102']);
    assert.ok(lines.includes('openings = 258'));
  });
});

describe('codec encode', () => {
  test('command with previous values', async () => {
    const { code, body } = await runJson(['encode', example('dimmer.abcl.json'), '--values', '{"level": 100}', '--previous', '{"fade": 1.5, "on": true, "scene": 2}']);
    assert.equal(code, 0);
    assert.deepEqual(body, { bytes: '01A5FF000F21', warnings: [], errors: [] });
  });

  test('a refused command exits 1 with empty bytes', async () => {
    const { code, body } = await runJson(['encode', example('dimmer.abcl.json'), '--values', '{"level": 120}']);
    assert.equal(code, 1);
    assert.equal(body.bytes, '');
    assert.equal((body.errors as string[]).length, 1);
  });
});

describe('usage errors exit 2', () => {
  const cases: string[][] = [
    [],
    ['check'],
    ['frobnicate', example('counter.abcl.json')],
    ['decode', example('counter.abcl.json')],
    ['decode', example('counter.abcl.json'), '--hex', 'ABC'],
    ['decode', example('counter.abcl.json'), '--hex', '00', '--text', '{}'],
    ['encode', example('dimmer.abcl.json')],
    ['encode', example('dimmer.abcl.json'), '--values', '[1]'],
    ['check', join(scratch, 'missing-file.json')],
    ['check', example('counter.abcl.json'), '--bogus'],
  ];
  for (const args of cases) {
    test(args.join(' ') || '(no arguments)', async () => {
      assert.equal((await run(args)).code, 2);
    });
  }
});
