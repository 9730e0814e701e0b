// A daemon either starts whole or exits with a message that names what to fix: bad settings
// (exit 2, naming the key), a data directory held by another daemon (exit 3), and never a
// half-started process that keeps serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, ROOT, api, cli, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';

/** `outpost run ARGS` that must end by itself: one that keeps running is killed at the timeout and reports no code. */
function runOnce(args: string[], env: Record<string, string> = {}): { code: number | null; stderr: string; stdout: string } {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', ...env };
  delete childEnv.NODE_EXTRA_CA_CERTS;
  delete childEnv.OUTPOST_CONFIG;
  const r = spawnSync(process.execPath, [CLI, 'run', ...args], { cwd: ROOT, env: childEnv, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

/** Runs the daemon with `config` on `<dir>/data` until it exits. */
function runUntilExit(dir: string, config: unknown, env: Record<string, string> = {}) {
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ version: 1, ...(config as object) }));
  return runOnce(['--config', file, '--data', join(dir, 'data')], env);
}

function listenOnFreePort(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '0.0.0.0', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

function makeCertificate(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-subj', '/CN=localhost', '-days', '1'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return { cert, key };
}

test('TLS misconfiguration exits 2 naming the key, before any port serves', () => {
  const dir = tempDataDir();
  try {
    const good = makeCertificate(dir, 'good');
    const other = makeCertificate(dir, 'other');
    const cases: Array<[unknown, RegExp]> = [
      [{ mqtt: { tls: { enabled: true, port: 0 } } }, /mqtt\.tls\.cert: required/],
      [{ mqtt: { tls: { enabled: true, port: 0, cert: good.cert } } }, /mqtt\.tls\.key: required/],
      [{ mqtt: { tls: { enabled: true, port: 0, cert: join(dir, 'missing.crt'), key: good.key } } }, /mqtt\.tls\.cert: cannot read .*missing\.crt \(ENOENT\)/],
      [{ mqtt: { tls: { enabled: true, port: 0, cert: good.cert, key: join(dir, 'missing.key') } } }, /mqtt\.tls\.key: cannot read .*missing\.key \(ENOENT\)/],
      [{ mqtt: { tls: { enabled: true, port: 0, cert: good.cert, key: dir } } }, /mqtt\.tls\.key: .* is not a regular file/],
      [{ mqtt: { tls: { enabled: true, port: 0, cert: good.key, key: good.key } } }, /mqtt\.tls\.cert: .* is not a usable PEM certificate/],
      [{ mqtt: { tls: { enabled: true, port: 0, cert: good.cert, key: other.key } } }, /mqtt\.tls\.key: .* does not belong to the certificate/],
    ];
    for (const [config, message] of cases) {
      const r = runUntilExit(dir, config);
      assert.equal(r.code, 2, `${JSON.stringify(config)}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
      assert.ok(!r.stdout.includes('"msg":"ready"'));
    }
  } finally {
    removeDir(dir);
  }
});

test('an upstream TLS file that cannot be read exits 2 naming the key', () => {
  const dir = tempDataDir();
  try {
    const upstream = { url: 'mqtts://127.0.0.1:1', gatewayId: 'GwGwGwGwGwGwGwGwGwGwGwGw', token: 'gateway:abcdefghijklmnopqrstuvwxyzABCDEFGH', ca: join(dir, 'missing-ca.pem') };
    const r = runUntilExit(dir, { upstream });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /config key upstream\.ca: cannot read .*missing-ca\.pem \(ENOENT\)/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
    assert.ok(!r.stdout.includes('"msg":"ready"'));
  } finally {
    removeDir(dir);
  }
});

test('a host that cannot be bound exits 2 naming http.host or mqtt.host', () => {
  const dir = tempDataDir();
  try {
    let r = runUntilExit(dir, { http: { host: '256.1.1.1' } });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /config key http\.host: "256\.1\.1\.1"/);
    r = runUntilExit(dir, { mqtt: { host: 'no-such-host.invalid' } });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /config key mqtt\.host: "no-such-host\.invalid"/);
    // An address of no interface of this machine (TEST-NET-1, RFC 5737).
    r = runUntilExit(dir, { http: { host: '192.0.2.1' } });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /config key http\.host: 192\.0\.2\.1 is not an address of this machine/);
  } finally {
    removeDir(dir);
  }
});

test('a port already in use exits 2 naming http.port or mqtt.port, and the HTTP door opened first is closed again', async () => {
  const dir = tempDataDir();
  const { server, port } = await listenOnFreePort();
  try {
    let r = runUntilExit(dir, {}, { OUTPOST_HTTP_PORT: String(port) });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`config key http\\.port: port ${port} .*already in use`));
    // MQTT opens after HTTP: the process must still exit rather than keep serving HTTP.
    r = runUntilExit(dir, {}, { OUTPOST_MQTT_PORT: String(port) });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`config key mqtt\\.port: port ${port} .*already in use`));
    r = runUntilExit(dir, { mqtt: { tls: { enabled: true, port } } });
    assert.equal(r.code, 2, 'TLS needs cert and key first');
    // Two listeners on one port are caught before binding.
    r = runUntilExit(dir, { http: { port: 18080 }, mqtt: { port: 18080 } }, { OUTPOST_HTTP_PORT: '', OUTPOST_MQTT_PORT: '' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /config key mqtt\.port: port 18080 is already taken by http\.port/);
  } finally {
    server.close();
    removeDir(dir);
  }
});

test('a failed start leaves nothing serving: the lock is released and the next start succeeds', async () => {
  const dir = tempDataDir();
  const { server, port } = await listenOnFreePort();
  try {
    const r = runUntilExit(dir, {}, { OUTPOST_MQTT_PORT: String(port) });
    assert.equal(r.code, 2);
    server.close();
    const d = await startDaemon({ dataDir: join(dir, 'data') });
    try {
      assert.equal((await api(d.url, 'GET', '/healthz')).status, 200);
    } finally {
      assert.equal(await d.stop(), 0);
    }
  } finally {
    server.close();
    removeDir(dir);
  }
});

test('a second daemon on the same data directory refuses to start (exit 3, naming the directory); the CLI works beside the first', async () => {
  const first = await startDaemon();
  try {
    assert.equal(readFileSync(join(first.dataDir, 'outpost.pid'), 'utf8').trim(), String(first.proc.pid));
    const second = runOnce(['--data', first.dataDir]);
    assert.equal(second.code, 3, second.stderr);
    assert.ok(second.stderr.includes(`data directory ${first.dataDir} is in use by another outpost daemon (pid ${first.proc.pid})`), second.stderr);
    const { device } = provision(first.dataDir, [{ name: 't', is: 'sensor', profile: { type: 'number' } }]);
    assert.equal((await api(first.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 1 } })).status, 200);
    const state = cli(['state', 'get', device.id, 't', '--json', '--data', first.dataDir]);
    assert.equal(state.code, 0, state.stderr);
    assert.equal(JSON.parse(state.stdout).state.value, 1);
  } finally {
    assert.equal(await first.stop(), 0);
  }
  const pidFile = join(first.dataDir, 'outpost.pid');
  assert.throws(() => statSync(pidFile), 'a clean stop removes the pid file');
  removeDir(first.dataDir);
});

test('after kill -9 the next daemon starts on the same directory and keeps the acknowledged states', async () => {
  const first = await startDaemon();
  const { device, app } = provision(first.dataDir, [{ name: 't', is: 'sensor', profile: { type: 'number' } }]);
  assert.equal((await api(first.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 42 } })).status, 200);
  await first.stop('SIGKILL');
  // The stale pid file names a dead process; the OS lock went with it.
  assert.equal(readFileSync(join(first.dataDir, 'outpost.pid'), 'utf8').trim(), String(first.proc.pid));
  const second = await startDaemon({ dataDir: first.dataDir });
  try {
    assert.equal(readFileSync(join(first.dataDir, 'outpost.pid'), 'utf8').trim(), String(second.proc.pid));
    const got = await api(second.url, 'GET', `/device/${device.id}/asset/t/state`, { token: app.token });
    assert.equal(got.body.state.value, 42);
    const third = runOnce(['--data', first.dataDir]);
    assert.equal(third.code, 3, 'the new daemon holds the lock again');
  } finally {
    assert.equal(await second.stop(), 0);
    removeDir(first.dataDir);
  }
});

test('the data directory is created 0700 and the database files 0600; an existing world-readable file is tightened', async () => {
  const parent = tempDataDir();
  const dataDir = join(parent, 'fresh', 'data');
  const d = await startDaemon({ dataDir });
  try {
    const { device } = provision(dataDir, [{ name: 't', is: 'sensor', profile: { type: 'number' } }]);
    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/asset/t/state`, { token: device.token, json: { value: 1 } })).status, 200);
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
    for (const name of ['outpost.db', 'outpost.db-wal', 'outpost.db-shm', 'outpost.lock', 'outpost.pid']) {
      assert.equal(statSync(join(dataDir, name)).mode & 0o777, 0o600, name);
    }
  } finally {
    assert.equal(await d.stop(), 0);
  }
  // A database written by an older version (0644) loses its world bits at the next open, even by the CLI.
  const { chmodSync } = await import('node:fs');
  chmodSync(join(dataDir, 'outpost.db'), 0o644);
  chmodSync(dataDir, 0o755);
  assert.equal(cli(['device', 'list', '--data', dataDir]).code, 0);
  assert.equal(statSync(join(dataDir, 'outpost.db')).mode & 0o777, 0o640);
  assert.equal(statSync(dataDir).mode & 0o777, 0o750);
  removeDir(parent);
});

test('a daemon that is killed while starting leaves no lock behind', async () => {
  const dir = tempDataDir();
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0' };
    delete env.OUTPOST_CONFIG;
    const proc = spawn(process.execPath, [CLI, 'run', '--data', dir], { cwd: ROOT, env, stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 150));
    proc.kill('SIGKILL');
    await new Promise((r) => proc.once('exit', r));
    const d = await startDaemon({ dataDir: dir });
    assert.equal(await d.stop(), 0);
  } finally {
    removeDir(dir);
  }
});

test('a data directory that cannot be created exits 2 naming dataDir', () => {
  const dir = tempDataDir();
  try {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'not a directory');
    const r = runOnce(['--data', join(file, 'data')]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /config key dataDir: cannot use .*a-file\/data as the data directory \(ENOTDIR/);
  } finally {
    removeDir(dir);
  }
});

test('a database already larger than a lowered store.maxBytes: /healthz is degraded from the start and says so', async () => {
  const dir = tempDataDir();
  const dataDir = join(dir, 'data');
  const { device } = provision(dataDir, [{ name: 'log', is: 'sensor', profile: { type: 'string' } }]);
  const first = await startDaemon({ dataDir, env: { OUTPOST_RATE_LIMIT: '0' } });
  for (let i = 0; i < 60; i++) {
    assert.equal((await api(first.url, 'PUT', `/device/${device.id}/asset/log/state`, { token: device.token, json: { value: 'x'.repeat(4000) } })).status, 200);
  }
  assert.equal(await first.stop(), 0);
  const size = statSync(join(dataDir, 'outpost.db')).size;
  const configFile = join(dir, 'small.json');
  writeFileSync(configFile, JSON.stringify({ version: 1, store: { maxBytes: Math.floor(size / 2) } }));
  const d = await startDaemon({ dataDir, args: ['--config', configFile] });
  try {
    const health = await api(d.url, 'GET', '/healthz');
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'degraded');
    assert.match(health.body.reason, /over store\.maxBytes/);
    assert.ok(d.logs.some((l) => l.includes('"level":40') && l.includes('over store.maxBytes')), 'warned at start');
  } finally {
    assert.equal(await d.stop(), 0);
    removeDir(dir);
  }
});
