// The systemd unit, the install script (against a scratch root: CI has no systemd) and the
// daemon's readiness/watchdog notifications, observed on a real unix datagram socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';

const INSTALL = join(ROOT, 'systemd', 'install.sh');
const have = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
const mode = (path: string) => statSync(path).mode & 0o777;
const install = (root: string, ...args: string[]) => spawnSync('bash', [INSTALL, '--root', root, ...args], { encoding: 'utf8', env: { ...process.env, npm_config_loglevel: 'error' } });

test('install.sh lays out a release under a scratch root, never overwrites a config, and uninstalls keeping data', () => {
  const root = tempDataDir();
  try {
    const first = install(root);
    assert.equal(first.status, 0, first.stderr + first.stdout);
    const prefix = join(root, 'opt/outpost');
    assert.ok(existsSync(join(prefix, 'dist/cli/main.js')), 'the compiled program is installed');
    assert.ok(existsSync(join(prefix, 'node_modules/better-sqlite3')), 'runtime dependencies are installed');
    assert.ok(!existsSync(join(prefix, 'node_modules/typescript')), 'development dependencies are pruned');
    const sources = readdirSync(join(prefix, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    assert.deepEqual(sources, [], 'no TypeScript sources: a built release');
    assert.ok(existsSync(join(prefix, 'src/console/static/index.html')), 'the console files the daemon serves are installed');
    assert.ok(existsSync(join(prefix, 'abcl/dimmer.abcl.json')), 'the shipped codec documents are installed');
    assert.equal(mode(prefix) & 0o022, 0, '/opt/outpost is not writable by group or others');

    const unit = join(root, 'etc/systemd/system/outpost.service');
    assert.equal(mode(unit), 0o644);
    assert.match(readFileSync(unit, 'utf8'), new RegExp(`^ExecStart=${process.execPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} /opt/outpost/dist/cli/main.js run`, 'm'), 'the unit runs the node found at install time');

    const config = join(root, 'etc/outpost/config.json');
    assert.equal(mode(join(root, 'etc/outpost')), 0o750);
    assert.equal(mode(config), 0o640, 'the config may hold tokens: not world-readable');
    assert.equal(readFileSync(config, 'utf8'), readFileSync(join(ROOT, 'config/example.jsonc'), 'utf8'), 'the config starts as the documented example');
    assert.equal(mode(join(root, 'var/lib/outpost')), 0o700);
    // The installed program accepts the installed config as it is (comments and all).
    const check = spawnSync(process.execPath, [join(prefix, 'dist/cli/main.js'), 'doctor', '--json', '--config', config, '--data', join(root, 'var/lib/outpost')], { encoding: 'utf8' });
    const report = JSON.parse(check.stdout);
    assert.equal(report.findings.find((f: { check: string }) => f.check === 'config').ok, true, check.stdout);

    // An edited config survives an upgrade; the previous release is kept for a rollback.
    writeFileSync(config, '{ "version": 1, "http": { "port": 9999 } }\n');
    writeFileSync(join(root, 'var/lib/outpost/outpost.db'), 'data');
    const again = install(root);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /kept the existing/);
    assert.equal(readFileSync(config, 'utf8'), '{ "version": 1, "http": { "port": 9999 } }\n', 'never overwrites a config');
    assert.ok(existsSync(join(root, 'opt/outpost.previous/dist/cli/main.js')));

    const removed = install(root, '--uninstall');
    assert.equal(removed.status, 0, removed.stderr);
    assert.ok(!existsSync(prefix) && !existsSync(unit), 'program and unit are gone');
    assert.equal(readFileSync(join(root, 'var/lib/outpost/outpost.db'), 'utf8'), 'data', 'data is kept');
    assert.ok(existsSync(config), 'config is kept');

    const purged = install(root, '--uninstall', '--purge');
    assert.equal(purged.status, 0, purged.stderr);
    assert.ok(!existsSync(join(root, 'var/lib/outpost')) && !existsSync(join(root, 'etc/outpost')), '--purge deletes data and config');

    assert.equal(install(root, '--bogus').status, 2, 'unknown options are refused');
  } finally {
    removeDir(root);
  }
});

test('the installed release starts as the unit runs it, serves /healthz and /console/, and doctor checks the release is complete', async () => {
  const root = tempDataDir();
  try {
    const installed = install(root);
    assert.equal(installed.status, 0, installed.stderr + installed.stdout);
    const prefix = join(root, 'opt/outpost');
    const program = join(prefix, 'dist/cli/main.js');
    const config = join(root, 'etc/outpost/config.json');
    const data = join(root, 'var/lib/outpost');
    // As the unit does (ExecStart, WorkingDirectory), on free ports instead of 8080/1883/1700.
    const daemon = await startDaemon({ program, cwd: prefix, dataDir: data, args: ['--config', config] });
    try {
      const health = await fetch(`${daemon.url}/healthz`);
      assert.equal(health.status, 200, await health.text());
      const page = await fetch(`${daemon.url}/console/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<html/i);
      const script = await fetch(`${daemon.url}/console/app.js`);
      assert.equal(script.status, 200, 'the console scripts are served from the installed release');
    } finally {
      assert.equal(await daemon.stop(), 0);
    }

    const doctor = (args: string[] = []) => {
      const r = spawnSync(process.execPath, [program, 'doctor', '--json', '--config', config, '--data', data, ...args], {
        encoding: 'utf8',
        env: { ...process.env, OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' },
      });
      return (JSON.parse(r.stdout) as { findings: Array<{ check: string; ok: boolean; message: string }> }).findings.find((f) => f.check === 'release')!;
    };
    const complete = doctor();
    assert.equal(complete.ok, true, complete.message);
    assert.match(complete.message, /complete/);
    // A release copied without the console (what the installer once did): doctor says so and names the path.
    renameSync(join(prefix, 'src/console/static'), join(prefix, 'src/console/static.gone'));
    const incomplete = doctor();
    assert.equal(incomplete.ok, false);
    assert.match(incomplete.message, /src\/console\/static.*missing/);
  } finally {
    removeDir(root);
  }
});

test('install.sh --help prints the usage and nothing of the script', () => {
  const r = spawnSync('bash', [INSTALL, '--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /--uninstall/);
  assert.doesNotMatch(r.stdout, /set -euo pipefail|^#/m);
});

test('systemd-analyze verify accepts the unit as installed', (t) => {
  if (!have('systemd-analyze')) {
    t.skip('systemd-analyze not installed (apt-get install systemd); .ci/run installs it');
    return;
  }
  const root = tempDataDir();
  try {
    assert.equal(install(root).status, 0);
    const unit = join(root, 'etc/systemd/system/outpost.service');
    const text = readFileSync(unit, 'utf8');
    for (const directive of [
      'Type=notify',
      'WatchdogSec=',
      'NotifyAccess=all',
      'Restart=on-failure',
      'User=outpost',
      'StateDirectory=outpost',
      'ConfigurationDirectory=outpost',
      'ProtectSystem=strict',
      'ProtectHome=yes',
      'PrivateTmp=yes',
      'NoNewPrivileges=yes',
      'SupplementaryGroups=dialout',
      'CapabilityBoundingSet=\n',
      'ExecReload=',
    ]) {
      assert.ok(text.includes(directive), `the unit has ${directive.trim()}`);
    }
    // verify exits 0 on unknown keys (it only warns), so its output must be free of remarks on our unit.
    const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    const remarks = (r.stdout + r.stderr).split('\n').filter((l) => l.includes('outpost'));
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.deepEqual(remarks, [], 'systemd-analyze verify has no remarks on outpost.service');
    // And it does catch a mistake: the check is not vacuous.
    const broken = join(root, 'broken.service');
    writeFileSync(broken, text.replace('WatchdogSec=', 'WatchdgSec='));
    const b = spawnSync('systemd-analyze', ['verify', broken], { encoding: 'utf8' });
    assert.match(b.stdout + b.stderr, /Unknown key/);
  } finally {
    removeDir(root);
  }
});

/** A notify socket like systemd's: a unix datagram socket that reads each message (perl is in every Debian). */
async function notifySocket(dir: string) {
  const path = join(dir, 'notify.sock');
  const script = [
    'use IO::Socket::UNIX; use Socket; $| = 1;',
    'my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0]) or die "socket: $!";',
    'print "listening\\n";',
    // recv without a control buffer: the barrier descriptor systemd-notify passes is closed, as systemd does.
    'while (1) { my $m; defined($s->recv($m, 4096)) or die "recv: $!"; $m =~ s/\\n/ /g; print "$m\\n"; }',
  ].join('\n');
  const proc = spawn('perl', ['-e', script, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  const messages: string[] = [];
  let buffer = '';
  await new Promise<void>((resolve, reject) => {
    proc.once('error', reject);
    proc.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line === 'listening') resolve();
        else messages.push(line);
      }
    });
  });
  return {
    path,
    messages,
    async waitFor(pred: (m: string) => boolean, what: string, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!messages.some(pred)) {
        if (Date.now() > deadline) throw new Error(`no ${what} on the notify socket; got ${JSON.stringify(messages)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop: () => proc.kill(),
  };
}

test('the daemon sends READY, WATCHDOG, RELOADING and STOPPING to NOTIFY_SOCKET', async (t) => {
  if (!have('systemd-notify') || !have('perl')) {
    t.skip('systemd-notify or perl missing (apt-get install systemd); .ci/run installs it');
    return;
  }
  const dir = tempDataDir();
  mkdirSync(join(dir, 'data'));
  const socket = await notifySocket(dir);
  try {
    // WATCHDOG_USEC of 0.6 s: a ping every 0.3 s.
    const daemon = await startDaemon({ dataDir: join(dir, 'data'), env: { NOTIFY_SOCKET: socket.path, WATCHDOG_USEC: '600000' } });
    await socket.waitFor((m) => m.startsWith('READY=1') && m.includes('STATUS=serving http'), 'READY=1');
    const readyAt = socket.messages.findIndex((m) => m.startsWith('READY=1'));
    await socket.waitFor((m) => socket.messages.indexOf(m) > readyAt && m === 'WATCHDOG=1', 'WATCHDOG=1');
    const pings = () => socket.messages.filter((m) => m === 'WATCHDOG=1').length;
    const before = pings();
    await socket.waitFor(() => pings() >= before + 3, 'three more watchdog pings');
    daemon.proc.kill('SIGHUP');
    await socket.waitFor((m) => m === 'RELOADING=1', 'RELOADING=1');
    assert.equal(await daemon.stop(), 0);
    await socket.waitFor((m) => m === 'STOPPING=1', 'STOPPING=1');
    assert.ok(!daemon.logs.some((l) => l.includes('systemd notification failed')), 'every notification was delivered');
  } finally {
    socket.stop();
    removeDir(dir);
  }
});

test('without a watchdog period the daemon only says READY; a WATCHDOG_PID of another process is ignored', async (t) => {
  if (!have('systemd-notify') || !have('perl')) {
    t.skip('systemd-notify or perl missing');
    return;
  }
  const dir = tempDataDir();
  const socket = await notifySocket(dir);
  try {
    const daemon = await startDaemon({ dataDir: join(dir, 'data'), env: { NOTIFY_SOCKET: socket.path, WATCHDOG_USEC: '200000', WATCHDOG_PID: '1' } });
    await socket.waitFor((m) => m.startsWith('READY=1'), 'READY=1');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(socket.messages.filter((m) => m === 'WATCHDOG=1').length, 0, 'the watchdog is meant for another process');
    assert.equal(await daemon.stop(), 0);
  } finally {
    socket.stop();
    removeDir(dir);
  }
});
