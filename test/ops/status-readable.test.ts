// `outpost status` shows the radio and the upstream as lines a person reads, not as raw JSON.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cli, cliJson, removeDir, startDaemon } from '../helpers/daemon.js';
import { ForwarderSimulator } from '../lpwan/forwarder.js';
import { readableLines } from '../../src/cli/commands/status.js';

test('outpost status prints radio sources and heard gateways readably', async () => {
  const daemon = await startDaemon();
  const fwd = new ForwarderSimulator('b827ebfffe00c0de');
  try {
    await fwd.connect(daemon.gwmpPort);
    await fwd.pull();
    await fwd.push([], { time: '2026-11-26 10:00:00 GMT', rxnb: 3, rxok: 2, rxfw: 2, ackr: 100, dwnb: 0, txnb: 0 });
    const status = cliJson<{ radio: { sources: Array<{ source: string }> } }>(['status'], daemon.dataDir);
    assert.equal(status.radio.sources[0]!.source, 'gwmp', '--json keeps the structure');

    const human = cli(['status', '--data', daemon.dataDir]);
    assert.equal(human.code, 0, human.stderr);
    const lines = human.stdout.split('\n');
    assert.ok(!lines.some((l) => /[{}]|":/.test(l)), `no raw JSON:\n${human.stdout}`);
    assert.match(human.stdout, /^radio +0 LoRaWAN devices$/m);
    assert.match(human.stdout, /^ +gwmp: up, \d+ frames received, \d+ sent, \d+ errors$/m);
    assert.match(human.stdout, new RegExp(`port ${daemon.gwmpPort}`));
    assert.match(human.stdout, /known 1, online 1/);
    assert.match(human.stdout, /eui B827EBFFFE00C0DE/i);
    assert.match(human.stdout, /^upstream +not configured$/m);
  } finally {
    fwd.close();
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }
});

test('readableLines: plain members on one line, nested objects indented under their name, lists of objects one line each', () => {
  assert.deepEqual(readableLines({ link: 'up', depth: 0, tags: ['a', 'b'], none: [], inner: { x: 1 }, list: [{ id: 1 }, { id: 2 }] }), [
    'link up, depth 0, tags a, b, none none',
    'inner:',
    '  x 1',
    'list:',
    '  id 1',
    '  id 2',
  ]);
  assert.deepEqual(readableLines(null), ['null']);
});
