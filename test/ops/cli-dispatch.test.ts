// The `outpost` dispatcher (src/cli/main.ts): help, version, and how a wrong command line is
// answered — the same for every command now that each lives in its own file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, removeDir, ROOT, tempDataDir } from '../helpers/daemon.js';

const USAGE_HEAD = 'usage: outpost <command> [options]\n';
const USAGE_TAIL = 'Every command takes --data DIR and --config FILE (or OUTPOST_CONFIG / OUTPOST_DATA_DIR).\n';

test('help lists every command, in the order of the table; no command at all is a usage error', () => {
  const help = cli(['help']);
  assert.equal(help.code, 0);
  assert.ok(help.stdout.startsWith(USAGE_HEAD) && help.stdout.endsWith(USAGE_TAIL), help.stdout);
  const lines = help.stdout.split('\n').map((l) => l.trim());
  const first = (word: string) => lines.findIndex((l) => l.startsWith(`${word} `));
  const order = ['run', 'device', 'asset', 'token', 'state', 'codec', 'gateway', 'outbox', 'status', 'doctor', 'backup', 'restore'].map(first);
  assert.ok(order.every((i) => i > 0), `every command has a usage line: ${order}`);
  assert.deepEqual([...order].sort((a, b) => a - b), order);
  for (const verb of ['create', 'list', 'show', 'delete', 'token', 'codec', 'redecode', 'lorawan']) assert.ok(lines.some((l) => l.startsWith(`device ${verb} `)), `device ${verb}`);
  assert.deepEqual(cli(['--help']).stdout, help.stdout);
  const none = cli([]);
  assert.equal(none.code, 2);
  assert.equal(none.stdout, help.stdout);
});

test('--version prints the package version', () => {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) assert.deepEqual(cli([flag]), { code: 0, stdout: `${version}\n`, stderr: '' });
});

test('a wrong command line exits 2 with the reason and the usage on stderr; configuration errors come first', () => {
  const dataDir = tempDataDir();
  try {
    const expectUsage = (args: string[], reason: string) => {
      const r = cli([...args, '--data', dataDir]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.ok(r.stderr.startsWith(`outpost: ${reason}`), r.stderr);
      assert.ok(r.stderr.includes(`\n\n${USAGE_HEAD}`), r.stderr);
      assert.ok(r.stderr.endsWith(USAGE_TAIL));
    };
    expectUsage(['frob', 'x'], 'unknown command: frob x');
    // A word that is a property of every object is still just an unknown word.
    expectUsage(['toString', 'x'], 'unknown command: toString x');
    expectUsage(['device', 'frob'], 'unknown command: device frob');
    expectUsage(['device', 'constructor'], 'unknown command: device constructor');
    expectUsage(['gateway', 'frob'], 'unknown command: gateway frob');
    expectUsage(['device', 'show'], 'missing <DeviceID>');
    expectUsage(['asset', 'create', 'D1'], 'missing --profile');
    expectUsage(['device', 'list', '--frob'], "Unknown option '--frob'");
    expectUsage(['status', '--name', 'x'], "Unknown option '--name'");

    const missing = join(dataDir, 'no-such-config.json');
    for (const args of [['device', 'frob'], ['frob'], ['run']]) {
      const r = cli([...args, '--config', missing, '--data', dataDir]);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /^outpost: invalid configuration: config file .*no-such-config\.json: cannot be read/);
    }
    // `codec` answers its own usage errors, on stdout with its own usage text.
    const codec = cli(['codec', 'frob', 'file']);
    assert.equal(codec.code, 2);
    assert.match(codec.stdout, /^error: unknown subcommand "frob"\nusage:\n  outpost codec check FILE/);
  } finally {
    removeDir(dataDir);
  }
});

test('a refused request exits 1 with its message and code', () => {
  const dataDir = tempDataDir();
  try {
    const r = cli(['device', 'show', 'NoSuchDeviceAAAAAAAAAAAA', '--data', dataDir]);
    assert.deepEqual(r, { code: 1, stdout: '', stderr: 'outpost: device NoSuchDeviceAAAAAAAAAAAA not found (DEVICE_NOT_FOUND)\n' });
  } finally {
    removeDir(dataDir);
  }
});
