// `outpost device codec … --file F` looks F up where PUT /device/<id>/codec looks up `file` (the
// data dir, then the shipped abcl/), and a file it cannot find is one clear line, not the usage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, cliJson, removeDir, ROOT, tempDataDir } from '../helpers/daemon.js';

test('device codec --file: the data dir first, then abcl/, then a path from the current directory; a missing file is one line', () => {
  const dataDir = tempDataDir();
  try {
    const device = cliJson<{ id: string }>(['device', 'create', '--name', 'dimmer'], dataDir);

    // A bare name of a shipped document, from a directory that has no such file (the CLI runs in the checkout's root).
    const shipped = cliJson<{ uplink: Record<string, unknown>; downlink: Record<string, unknown> }>(
      ['device', 'codec', device.id, '--uplink', 'abcl', '--file', 'dimmer.abcl.json', '--downlink', 'abcl', '--downlink-file', 'dimmer.abcl.json'],
      dataDir,
    );
    assert.equal(shipped.uplink.file, 'dimmer.abcl.json', 'kept as a reference, as over HTTP');
    assert.equal(shipped.downlink.file, 'dimmer.abcl.json');

    // The data dir comes before abcl/: a document of the same name there wins. This one (a sensor's
    // document under the dimmer's name) has no actuate block, so as a downlink codec it is refused.
    const sensor = readFileSync(join(ROOT, 'abcl', 'environment-sensor.abcl.json'), 'utf8');
    writeFileSync(join(dataDir, 'dimmer.abcl.json'), sensor);
    const fromDataDir = cli(['device', 'codec', device.id, '--uplink', 'auto', '--downlink', 'abcl', '--downlink-file', 'dimmer.abcl.json', '--data', dataDir]);
    assert.equal(fromDataDir.code, 1, fromDataDir.stdout);
    assert.match(fromDataDir.stderr, /CODEC_INVALID[\s\S]*downlink\.file "dimmer\.abcl\.json" does not load/);

    // Not anywhere: exit 1 and one line naming the option, the file and where it was looked for.
    const missing = cli(['device', 'codec', device.id, '--uplink', 'abcl', '--file', 'no-such-codec.abcl.json', '--data', dataDir]);
    assert.equal(missing.code, 1);
    const lines = missing.stderr.trim().split('\n');
    assert.equal(lines.length, 1, missing.stderr);
    assert.match(lines[0]!, /--file "no-such-codec\.abcl\.json": not found in the data directory .*, the shipped abcl\/ directory, or as a path from the current directory/);
    assert.doesNotMatch(missing.stderr, /usage:/);
    const missingDownlink = cli(['device', 'codec', device.id, '--uplink', 'auto', '--downlink', 'abcl', '--downlink-file', 'gone.abcl.json', '--data', dataDir]);
    assert.equal(missingDownlink.code, 1);
    assert.match(missingDownlink.stderr, /^outpost: --downlink-file "gone\.abcl\.json": not found/);
    assert.doesNotMatch(missingDownlink.stderr, /usage:/);
  } finally {
    removeDir(dataDir);
  }
});
