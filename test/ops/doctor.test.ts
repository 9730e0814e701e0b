// `outpost doctor`: each finding provoked for real (a taken port, an unwritable data dir, a corrupt
// database file, a missing serial device, states received while the clock said 1970).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, openSync, statSync, writeSync, closeSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CLI, ROOT, cli, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { checkSerial, checkUpstream, runDoctor, type DoctorReport, type Finding } from '../../src/ops/doctor.js';
import { DEFAULT_CONFIG, configKeyPaths, type OutpostConfig } from '../../src/core/config.js';

// Fixed ports (8080, 1883, 1700) may be in use by other programs on a shared machine.
const FREE_PORTS = { OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' };

function doctor(args: string[], env: Record<string, string | undefined> = {}): { code: number | null; report: DoctorReport; stderr: string } {
  const r = cli(['doctor', '--json', ...args], { ...FREE_PORTS, ...env });
  try {
    return { code: r.code, report: JSON.parse(r.stdout) as DoctorReport, stderr: r.stderr };
  } catch {
    throw new Error(`doctor printed no JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
}
const failing = (report: DoctorReport, check: string): Finding[] => report.findings.filter((f) => f.check === check && !f.ok);

test('a healthy data dir: every check passes, exit 0, and each finding has the documented shape', () => {
  const dir = tempDataDir();
  try {
    provision(dir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const { code, report } = doctor(['--data', dir]);
    assert.equal(code, 0, JSON.stringify(report, null, 2));
    assert.equal(report.ok, true);
    const checks = new Set(report.findings.map((f) => f.check));
    for (const check of ['config', 'daemon', 'release', 'ports', 'dataDir', 'database', 'disk', 'serial', 'upstream', 'clock']) assert.ok(checks.has(check), check);
    for (const f of report.findings) assert.deepEqual(Object.keys(f).sort(), ['check', 'fix', 'message', 'ok']);
    const human = cli(['doctor', '--data', dir], FREE_PORTS);
    assert.equal(human.code, 0);
    assert.match(human.stdout, /nothing needs attention/);
  } finally {
    removeDir(dir);
  }
});

test('a port taken by another program is a finding; ports held by this data dir\'s own daemon are fine', async () => {
  const dir = tempDataDir();
  const squatter = createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '0.0.0.0', resolve));
  const taken = (squatter.address() as AddressInfo).port;
  const daemon = await startDaemon();
  try {
    const { code, report } = doctor(['--data', dir], { OUTPOST_HTTP_PORT: String(taken) });
    assert.equal(code, 1);
    const [finding] = failing(report, 'ports');
    assert.ok(finding, JSON.stringify(report.findings));
    assert.match(finding.message, new RegExp(`http\\.port TCP 0\\.0\\.0\\.0:${taken}: in use by another program`));
    assert.match(finding.fix!, /ss -ltnp/);

    const own = doctor(['--data', daemon.dataDir], { OUTPOST_HTTP_PORT: String(daemon.httpPort), OUTPOST_MQTT_PORT: String(daemon.mqttPort), OUTPOST_GWMP_PORT: String(daemon.gwmpPort), OUTPOST_BS_PORT: String(daemon.basicStationPort) });
    assert.deepEqual(failing(own.report, 'ports'), []);
    const ports = own.report.findings.filter((f) => f.check === 'ports' && !/0 means any free port/.test(f.message));
    assert.equal(ports.length, 4);
    for (const f of ports) assert.match(f.message, /held by this data dir's daemon/);
    assert.match(own.report.findings.find((f) => f.check === 'daemon')!.message, /a daemon runs on/);
    assert.equal(own.code, 0, JSON.stringify(own.report.findings.filter((f) => !f.ok)));
  } finally {
    squatter.close();
    await daemon.stop();
    removeDir(dir);
    removeDir(daemon.dataDir);
  }
});

test('an unwritable data dir is a finding', () => {
  const dir = tempDataDir();
  try {
    const data = join(dir, 'data');
    mkdirSync(data);
    chmodSync(dir, 0o755);
    chmodSync(data, 0o555);
    // root writes anywhere: as root, run doctor as nobody so the permission applies as in production.
    const asRoot = process.getuid?.() === 0;
    const r = spawnSync(process.execPath, [CLI, 'doctor', '--json', '--data', data], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH, ...FREE_PORTS },
      ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
    });
    const report = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(r.status, 1);
    const [finding] = failing(report, 'dataDir');
    assert.ok(finding, r.stdout);
    assert.match(finding.message, /is not writable \(EACCES\)/);
    assert.match(finding.fix!, /chown -R outpost:outpost/);
  } finally {
    removeDir(dir);
  }
});

test('a corrupt database file is a finding that says to restore a backup', () => {
  const dir = tempDataDir();
  try {
    provision(dir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const db = new BetterSqlite3(join(dir, 'outpost.db'));
    db.pragma('wal_checkpoint(TRUNCATE)');
    const pages = db.pragma('page_count', { simple: true }) as number;
    db.close();
    assert.ok(pages > 3);
    // Garbage over every page after the first: the header still says SQLite, the b-trees are broken.
    const fd = openSync(join(dir, 'outpost.db'), 'r+');
    const size = statSync(join(dir, 'outpost.db')).size;
    writeSync(fd, Buffer.alloc(size - 4096, 0xa5), 0, size - 4096, 4096);
    closeSync(fd);
    const { code, report } = doctor(['--data', dir]);
    assert.equal(code, 1);
    const [finding] = failing(report, 'database');
    assert.ok(finding, JSON.stringify(report.findings));
    assert.match(finding.message, /outpost\.db/);
    assert.match(finding.fix!, /outpost restore FILE/);
  } finally {
    removeDir(dir);
  }
});

test('an invalid config is a finding naming the key; the other checks still run', () => {
  const dir = tempDataDir();
  try {
    writeFileSync(join(dir, 'config.json'), '{ "version": 1, "limits": { "rate": -3 } }');
    const { code, report } = doctor(['--data', dir, '--config', join(dir, 'config.json')]);
    assert.equal(code, 1);
    assert.match(failing(report, 'config')[0]!.message, /limits\.rate/);
    assert.ok(report.findings.some((f) => f.check === 'database'));
  } finally {
    removeDir(dir);
  }
});

test('states received while the clock was wrong, and a clock in 1970, are findings', async () => {
  const dir = tempDataDir();
  try {
    const { device } = provision(dir, [{ name: 'level', is: 'sensor', profile: { type: 'number' } }]);
    const db = new BetterSqlite3(join(dir, 'outpost.db'));
    const asset = db.prepare('SELECT id FROM assets WHERE device_id = ?').pluck().get(device.id) as string;
    // What a Pi without RTC stores before time sync: received "in 1970".
    db.prepare('INSERT INTO states (asset_id, at, value, received_at) VALUES (?, ?, ?, ?)').run(asset, 5000, '1', 5000);
    db.close();
    const sources = { dataDir: dir, env: FREE_PORTS };
    const stored = await runDoctor({ sources });
    const [finding] = failing(stored, 'clock');
    assert.ok(finding, JSON.stringify(stored.findings));
    assert.match(finding.message, /1 received before 2024-01-01/);
    assert.match(finding.fix!, /timedatectl set-ntp true/);

    const unset = await runDoctor({ sources, now: () => 86_400_000 });
    assert.match(failing(unset, 'clock')[0]!.message, /1970-01-02.*not been set/);
  } finally {
    removeDir(dir);
  }
});

test('a store bound larger than the free disk is a finding', () => {
  const dir = tempDataDir();
  try {
    const free = Number(spawnSync('df', ['--output=avail', '-B1', dir], { encoding: 'utf8' }).stdout.split('\n')[1]);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ version: 1, store: { maxBytes: free * 4 } }));
    const { code, report } = doctor(['--data', dir, '--config', join(dir, 'config.json')]);
    assert.equal(code, 1);
    assert.match(failing(report, 'disk')[0]!.message, /store\.maxBytes.*less than the .* MiB needed/);
  } finally {
    removeDir(dir);
  }
});

const radioKnown = configKeyPaths().includes('radio.serial[].path');
// The packet forwarder is off in these configs where the config knows it, so no UDP port is involved.
const gwmpOff = configKeyPaths().some((k) => k.startsWith('radio.gwmp')) ? { gwmp: false } : {};

test('a configured serial device that is missing is a finding; a present one (socat pty) is not', { skip: radioKnown ? false : 'the config has no radio key yet (radio sources not merged): serial check not testable' }, async () => {
  const dir = tempDataDir();
  const link = join(dir, 'modem');
  const socat = spawn('socat', ['-d', `pty,raw,echo=0,link=${link}`, `pty,raw,echo=0,link=${join(dir, 'other')}`], { stdio: 'ignore' });
  try {
    const deadline = Date.now() + 10_000;
    while (!existsSync(link) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const missing = '/dev/serial/by-id/usb-Outpost_Test_Modem_does-not-exist-if00';
    const serial = (path: string) => [{ path, modem: 'rn2483', baudRate: 57600, frequency: 868100000, spreadingFactor: 7, bandwidth: 125 }];
    writeFileSync(join(dir, 'missing.json'), JSON.stringify({ version: 1, radio: { ...gwmpOff, serial: serial(missing) } }));
    const r = doctor(['--data', join(dir, 'data'), '--config', join(dir, 'missing.json')]);
    assert.equal(r.code, 1);
    const [finding] = failing(r.report, 'serial');
    assert.ok(finding, JSON.stringify(r.report.findings));
    assert.match(finding.message, /radio\.serial\[0\]\.path.*no such device/);
    assert.match(finding.fix!, /plug the modem in/);

    writeFileSync(join(dir, 'present.json'), JSON.stringify({ version: 1, radio: { ...gwmpOff, serial: serial(link) } }));
    const ok = doctor(['--data', join(dir, 'data'), '--config', join(dir, 'present.json')]);
    assert.deepEqual(failing(ok.report, 'serial'), []);
    assert.match(ok.report.findings.find((f) => f.check === 'serial')!.message, /present/);
  } finally {
    socat.kill();
    removeDir(dir);
  }
});

test('the serial check on the radio section: a missing device is a finding, a socat pty is present', async () => {
  const dir = tempDataDir();
  const link = join(dir, 'modem');
  const socat = spawn('socat', [`pty,raw,echo=0,link=${link}`, `pty,raw,echo=0,link=${join(dir, 'other')}`], { stdio: 'ignore' });
  try {
    const deadline = Date.now() + 10_000;
    while (!existsSync(link) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const withSerial = (...paths: string[]) => ({ ...DEFAULT_CONFIG, radio: { serial: paths.map((path) => ({ path, modem: 'rn2483' })) } }) as unknown as OutpostConfig;
    const [missing, present] = checkSerial(withSerial('/dev/serial/by-id/usb-none-if00', link));
    assert.equal(missing!.ok, false);
    assert.match(missing!.message, /radio\.serial\[0\]\.path "\/dev\/serial\/by-id\/usb-none-if00": no such device/);
    assert.match(missing!.fix!, /plug the modem in or correct radio\.serial\[0\]\.path/);
    assert.equal(present!.ok, true, present!.message);
    assert.match(present!.message, /radio\.serial\[1\]\.path .*present.*by-id/);
    const notDevice = checkSerial(withSerial(join(dir)))[0]!;
    assert.match(notDevice.message, /not a serial device/);
  } finally {
    socat.kill();
    removeDir(dir);
  }
});

test('the upstream check connects with the configured credentials: unreachable, refused, accepted', async () => {
  const daemon = await startDaemon();
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const closedPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  try {
    const { device } = provision(daemon.dataDir);
    const withUpstream = (upstream: Record<string, unknown>) => ({ ...DEFAULT_CONFIG, upstream }) as unknown as OutpostConfig;
    const unreachable = await checkUpstream(withUpstream({ url: `mqtt://127.0.0.1:${closedPort}`, token: 'gateway:x' }), 3000);
    assert.equal(unreachable.ok, false);
    assert.match(unreachable.message, /unreachable.*ECONNREFUSED/);
    assert.match(unreachable.fix!, /firewall/);

    // This gateway's own MQTT door stands in for a central: it refuses an unknown token at CONNECT.
    const refused = await checkUpstream(withUpstream({ url: `mqtt://127.0.0.1:${daemon.mqttPort}`, token: 'gateway:not-a-token' }), 5000);
    assert.equal(refused.ok, false, refused.message);
    assert.match(refused.message, /refused the credentials/);
    assert.match(refused.fix!, /upstream\.token/);

    const accepted = await checkUpstream(withUpstream({ url: `mqtt://127.0.0.1:${daemon.mqttPort}`, devices: { [device.id]: { id: device.id, token: device.token } } }), 5000);
    assert.equal(accepted.ok, true, accepted.message);
    assert.match(accepted.message, /connected and authenticated/);

    assert.equal((await checkUpstream(DEFAULT_CONFIG, 1000)).ok, true, 'no upstream: nothing to check');
  } finally {
    await daemon.stop();
    removeDir(daemon.dataDir);
  }
});
