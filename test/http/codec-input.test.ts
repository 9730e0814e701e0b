// Codec settings as an attacker with an admin token (or an admin's mistake) would send them:
// `file` references that leave the allowed directories, special files, and scripts that exhaust
// the parser's stack. Against the compiled daemon.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, provision, removeDir, ROOT, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';

const ASSETS = [
  { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
  { name: 'humidity', is: 'sensor', profile: { type: 'number' } },
  { name: 'battery', is: 'sensor', profile: { type: 'number' } },
];
const SECRET = 'root:x:0:0:TOP-SECRET-MARKER';

describe('codec settings: file confinement and parser limits', () => {
  let d: RunningDaemon;
  let device: { id: string; token: string };
  let app: { id: string; token: string };
  let outsideDir: string;
  const setCodec = (uplink: Record<string, unknown>) => api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink } });

  before(async () => {
    d = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
    ({ device, app } = provision(d.dataDir, ASSETS));
    outsideDir = tempDataDir();
    writeFileSync(join(outsideDir, 'secret.json'), `{"${SECRET}": 1}`);
    writeFileSync(join(outsideDir, 'secret.js'), `${SECRET}\n`);
  });
  after(async () => {
    assert.equal(await d.stop(), 0, 'SIGTERM exits 0');
    removeDir(outsideDir);
    removeDir(d.dataDir);
  });

  test('absolute paths, .. and symlinks out of the data dir are refused without echoing any content', async () => {
    symlinkSync(join(outsideDir, 'secret.json'), join(d.dataDir, 'link.json'));
    symlinkSync(outsideDir, join(d.dataDir, 'linkdir'));
    const attempts = [
      { format: 'abcl', file: '/etc/passwd' },
      { format: 'abcl', file: join(outsideDir, 'secret.json') },
      { format: 'js', file: join(outsideDir, 'secret.js') },
      { format: 'abcl', file: `../${outsideDir.split('/').pop()}/secret.json` },
      { format: 'abcl', file: '../../../../../../../../etc/passwd' },
      { format: 'abcl', file: 'link.json' },
      { format: 'abcl', file: 'linkdir/secret.json' },
      { format: 'abcl', file: '/proc/self/environ' },
      { format: 'js', file: '/dev/zero' },
      { format: 'abcl', file: 'outpost.db' },
    ];
    for (const uplink of attempts) {
      const r = await setCodec(uplink);
      assert.equal(r.status, 422, `${uplink.file}: ${r.text}`);
      assert.equal(r.body.code, 'CODEC_INVALID');
      assert.ok(!r.text.includes('TOP-SECRET') && !r.text.includes('root:x'), `${uplink.file} leaks: ${r.text}`);
    }
    assert.equal((await api(d.url, 'GET', '/healthz')).status, 200, 'the daemon is alive');
  });

  test('a FIFO, a directory and an oversized file in the data dir are refused; the daemon keeps serving', async () => {
    mkdirSync(join(d.dataDir, 'dir.json'));
    writeFileSync(join(d.dataDir, 'big.json'), Buffer.alloc(2 * 1024 * 1024, 0x20));
    assert.equal(spawnSync('mkfifo', [join(d.dataDir, 'fifo.json')]).status, 0);
    for (const file of ['dir.json', 'big.json', 'fifo.json']) {
      const r = await setCodec({ format: 'abcl', file });
      assert.equal(r.status, 422, `${file}: ${r.text}`);
      assert.match(r.body.error, /regular file|more than the limit/);
    }
  });

  test('a codec file in the data dir that does not load is refused by count, its content never quoted', async () => {
    writeFileSync(join(d.dataDir, 'notabcl.json'), `{"${SECRET}": "x"}`);
    writeFileSync(join(d.dataDir, 'notjs.js'), `${SECRET} ((`);
    for (const uplink of [{ format: 'abcl', file: 'notabcl.json' }, { format: 'js', file: 'notjs.js' }]) {
      const r = await setCodec(uplink);
      assert.equal(r.status, 422, r.text);
      assert.ok(!r.text.includes('TOP-SECRET'), r.text);
      assert.match(JSON.stringify(r.body.errors), /outpost codec check/);
    }
  });

  test('a good file in the data dir loads; swapped for a symlink to /dev/zero, the next start disables that codec and starts', async () => {
    copyFileSync(join(ROOT, 'abcl', 'environment-sensor.abcl.json'), join(d.dataDir, 'env.abcl.json'));
    const r = await setCodec({ format: 'abcl', file: 'env.abcl.json' });
    assert.equal(r.status, 200, r.text);
    const state = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: new Uint8Array(Buffer.from('66085B100E', 'hex')), contentType: 'application/octet-stream' });
    assert.equal(state.status, 200, state.text);
    assert.equal(await d.stop(), 0);
    rmSync(join(d.dataDir, 'env.abcl.json'));
    symlinkSync('/dev/zero', join(d.dataDir, 'env.abcl.json'));
    d = await startDaemon({ dataDir: d.dataDir, env: { OUTPOST_RATE_LIMIT: '0' } });
    const warned = d.logs.find((line) => line.includes('stored codec settings do not load'));
    assert.ok(warned, d.logs.join('\n'));
    assert.match(warned!, new RegExp(device.id));
    assert.match(warned!, /resolves outside/);
    const refused = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: new Uint8Array(Buffer.from('66085B100E', 'hex')), contentType: 'application/octet-stream' });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.code, 'DECODE_FAILED');
    assert.match(refused.body.error, /stored codec settings do not load .*resolves outside/);
    const shown = await api(d.url, 'GET', `/device/${device.id}/codec`, { token: app.token });
    assert.match(shown.body.disabled, /stored codec settings do not load: .*resolves outside/);
    assert.equal((await api(d.url, 'GET', '/healthz')).status, 200);
  });

  test('a JS codec nested 30 000 parentheses deep is 422 CODEC_INVALID, and JS codecs keep working afterwards', async () => {
    for (const [open, close] of [['(', ')'], ['[', ']'], ['{a:', '}']]) {
      const depth = open.length === 1 ? 30_000 : 15_000;
      const script = `function decodeUplink(input) { return { data: { x: ${open.repeat(depth)}1${close.repeat(depth)} } }; }`;
      const r = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script } } });
      assert.equal(r.status, 422, r.text.slice(0, 300));
      assert.equal(r.body.code, 'CODEC_INVALID');
    }
    // Many times over: a stack overflow inside the shared sandbox module would corrupt every codec.
    for (let i = 0; i < 20; i++) {
      const script = `function decodeUplink(input) { return { data: { x: ${'('.repeat(3000)}1${')'.repeat(3000)} } }; }`;
      assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script } } })).status, 422);
    }
    const good = 'function decodeUplink(input) { function f(n) { return n === 0 ? 0 : 1 + f(n - 1); } return { data: { temperature: f(input.bytes[0]) } }; }';
    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script: good } } })).status, 200);
    const r = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: new Uint8Array([42]), contentType: 'application/octet-stream' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.states.temperature.value, 42);
  });
});
