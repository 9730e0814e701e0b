// The upgrade every user of the package makes: the same tree built as an older version
// (PREVIOUS_VERSION) installed with dpkg and used (a device, states, an edited configuration), then
// the new package installed over it. The maintainer scripts keep the user, the directories, the
// edited conffile and the data, and the new program serves the old data. Then the way back: a
// downgrade keeps everything too, and the older program serves the data when it knows its schema,
// and refuses to start, saying why, when the database was written by a newer schema (simulated
// here, since both builds share one schema). Last, purge. Needs root, like install.package-test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { debFor, PREVIOUS_VERSION, tool, VERSION } from './helpers.js';
import { assertMachineIsFree, dpkg, dpkgStatus, dpkgVersion, modeOf, outpostAsService, ownerOf, startInstalledService, userExists, type InstalledService } from './installed.js';

const DB = '/var/lib/outpost/outpost.db';
const CONFIG = '/etc/outpost/config.json';
const STATES = [
  { value: 21.5, at: '2026-01-01T10:00:00.000Z' },
  { value: 22.25, at: '2026-01-01T11:00:00.000Z' },
];

async function call(service: InstalledService, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${service.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** Starts the installed service, runs `use` against it, stops it and checks the stop was clean. */
async function withService(use: (service: InstalledService) => Promise<void>): Promise<void> {
  const service = await startInstalledService();
  let stopped: number | null;
  try {
    await use(service);
  } finally {
    stopped = await service.stop();
  }
  assert.equal(stopped, 0, `clean stop\n${service.logs.join('\n')}`);
}

/** What the installed program answers about the device: its name and its history, oldest first. */
async function deviceAndHistory(service: InstalledService, admin: string, deviceId: string): Promise<{ name: string; history: unknown[] }> {
  const device = await call(service, admin, 'GET', `/device/${deviceId}`);
  assert.equal(device.status, 200, JSON.stringify(device.json));
  const states = await call(service, admin, 'GET', `/device/${deviceId}/asset/temperature/states`);
  assert.equal(states.status, 200, JSON.stringify(states.json));
  return { name: device.json.name, history: [...states.json.data].reverse() };
}

function statusJson(): { version: string; dataDir: string } {
  const asked = outpostAsService(['status', '--json']);
  assert.equal(asked.status, 0, asked.stderr);
  return JSON.parse(asked.stdout);
}

/** The database's schema version, read and written as the service user with the package's own runtime. */
function userVersion(set?: number): number {
  const script = `const db = new (require('/usr/lib/outpost/node_modules/better-sqlite3'))(${JSON.stringify(DB)});
${set === undefined ? '' : `db.pragma('user_version = ${set}');`}
process.stdout.write(String(db.pragma('user_version', { simple: true }))); db.close();`;
  const r = spawnSync('/usr/lib/outpost/node/bin/node', ['-e', script], {
    uid: Number(tool('id', ['-u', 'outpost'])),
    gid: Number(tool('id', ['-g', 'outpost'])),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout);
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** What an upgrade or downgrade must leave as it was. */
function assertKept(uid: string, what: string): void {
  assert.match(dpkgStatus(), /install ok installed/, what);
  assert.ok(userExists(), `${what}: the outpost user is kept`);
  assert.equal(tool('id', ['-u', 'outpost']).trim(), uid, `${what}: the same user id, so the data stays its own`);
  assert.equal(modeOf('/var/lib/outpost'), '700', what);
  assert.equal(ownerOf('/var/lib/outpost'), 'outpost:outpost', what);
  assert.equal(modeOf('/etc/outpost'), '750', what);
  assert.equal(modeOf(CONFIG), '640', what);
  assert.equal(ownerOf(CONFIG), 'root:outpost', what);
  assert.match(readFileSync(CONFIG, 'utf8'), /edited by the admin before the upgrade/, `${what}: the edited conffile is kept`);
  assert.ok(!existsSync(`${CONFIG}.dpkg-dist`) && !existsSync(`${CONFIG}.dpkg-new`), `${what}: the packaged conffile did not change, so dpkg neither asks nor leaves a copy`);
  assert.ok(existsSync(DB), `${what}: the database is kept`);
  assert.equal(ownerOf(DB), 'outpost:outpost', `${what}: the database stays the service user's`);
  assert.ok(existsSync('/etc/systemd/system/multi-user.target.wants/outpost.service'), `${what}: the unit stays enabled`);
}

test(`amd64 package: upgrade from ${PREVIOUS_VERSION} to ${VERSION} keeps the user, the edited conffile and the data; a downgrade keeps them too`, { timeout: 300_000 }, async () => {
  assert.equal(assertMachineIsFree(), undefined);
  assert.ok(!existsSync('/run/systemd/system'), 'this test is for a machine without systemd running');
  const previous = debFor('amd64', PREVIOUS_VERSION);
  const current = debFor('amd64');
  assert.equal(spawnSync('dpkg', ['--compare-versions', PREVIOUS_VERSION, 'lt', VERSION]).status, 0, `${PREVIOUS_VERSION} is older than ${VERSION} for dpkg`);
  try {
    // The previous version, installed and used.
    const installed = dpkg(['-i', previous]);
    assert.equal(installed.status, 0, installed.output);
    assert.equal(dpkgVersion(), PREVIOUS_VERSION);
    const uid = tool('id', ['-u', 'outpost']).trim();
    const created = outpostAsService(['token', 'create', '--name', 'admin', '--scopes', 'read,command,admin', '--json']);
    assert.equal(created.status, 0, created.stderr);
    const admin = (JSON.parse(created.stdout) as { token: string }).token;
    let deviceId = '';
    await withService(async (service) => {
      assert.equal(statusJson().version, PREVIOUS_VERSION);
      const device = await call(service, admin, 'POST', '/devices', { name: 'upgrade-probe' });
      assert.equal(device.status, 201, JSON.stringify(device.json));
      deviceId = device.json.id;
      const asset = await call(service, device.json.token, 'PUT', `/device/${deviceId}/asset/temperature`, { is: 'sensor', profile: { type: 'number' } });
      assert.equal(asset.status, 201, JSON.stringify(asset.json));
      for (const state of STATES) {
        const put = await call(service, device.json.token, 'PUT', `/device/${deviceId}/asset/temperature/state`, state);
        assert.equal(put.status, 200, JSON.stringify(put.json));
      }
      assert.deepEqual(await deviceAndHistory(service, admin, deviceId), { name: 'upgrade-probe', history: STATES });
    });
    appendFileSync(CONFIG, '// edited by the admin before the upgrade\n');

    // The upgrade.
    const upgraded = dpkg(['-i', current]);
    assert.equal(upgraded.status, 0, upgraded.output);
    assert.match(upgraded.output, new RegExp(`Preparing to unpack .*outpost_${VERSION}_amd64\\.deb`));
    assert.match(upgraded.output, new RegExp(`Unpacking outpost \\(${VERSION}\\) over \\(${PREVIOUS_VERSION.replace(/[.+]/g, '\\$&')}\\)`));
    assert.equal(dpkgVersion(), VERSION);
    assertKept(uid, 'after the upgrade');
    const schema = userVersion();
    assert.ok(schema >= 1, `a migrated database (schema ${schema})`);
    await withService(async (service) => {
      const status = statusJson();
      assert.equal(status.version, VERSION, '`outpost status` reports the new version');
      assert.equal(status.dataDir, '/var/lib/outpost');
      assert.deepEqual(await deviceAndHistory(service, admin, deviceId), { name: 'upgrade-probe', history: STATES }, 'the old device and its history answer from the new version');
    });

    // The way back: dpkg allows a downgrade with a warning; the scripts keep everything.
    const downgraded = dpkg(['-i', previous]);
    assert.equal(downgraded.status, 0, downgraded.output);
    assert.match(downgraded.output, new RegExp(`warning: downgrading outpost from ${VERSION.replace(/\./g, '\\.')} to`));
    assert.equal(dpkgVersion(), PREVIOUS_VERSION);
    assertKept(uid, 'after the downgrade');

    // A database a newer schema wrote: the older program refuses to start and says why, and
    // leaves the file as it was (no migration backwards, no fresh database in its place).
    userVersion(schema + 1);
    const before = sha256(DB);
    await assert.rejects(startInstalledService(), new RegExp(`database schema version ${schema + 1} is newer than this Outpost supports \\(${schema}\\); upgrade Outpost`));
    assert.equal(sha256(DB), before, 'the refused database is untouched');
    userVersion(schema);

    // With a schema it knows, the older program serves the same data.
    await withService(async (service) => {
      assert.equal(statusJson().version, PREVIOUS_VERSION);
      assert.deepEqual(await deviceAndHistory(service, admin, deviceId), { name: 'upgrade-probe', history: STATES });
    });

    const purged = dpkg(['--purge', 'outpost']);
    assert.equal(purged.status, 0, purged.output);
    assert.ok(!existsSync('/etc/outpost') && !existsSync('/var/lib/outpost') && !existsSync('/usr/lib/outpost'), 'configuration, data and program are deleted');
    assert.ok(!userExists(), 'the outpost user is deleted');
    assert.equal(dpkgStatus(), '', 'dpkg no longer knows the package');
  } finally {
    spawnSync('dpkg', ['--purge', 'outpost'], { stdio: 'ignore' });
  }
});
