// The amd64 package installed for real with dpkg on this machine, which runs no systemd (a container):
// the maintainer scripts create the user, the directories and the conffile and do not fail; the
// service started by hand answers `outpost status`; a reinstall keeps an edited configuration;
// `dpkg -r` keeps the configuration and data, `dpkg --purge` removes them and the user.
// It needs root, and refuses to run where an outpost package or user already exists.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { debFor, tool } from './helpers.js';
import { assertMachineIsFree, dpkgStatus, modeOf, outpostAsService, ownerOf, startInstalledService, userExists } from './installed.js';

test('amd64 package: dpkg -i without systemd, outpost run by hand answers outpost status, remove keeps data, purge removes it', { timeout: 300_000 }, async () => {
  assert.equal(assertMachineIsFree(), undefined);
  assert.ok(!existsSync('/run/systemd/system'), 'this test is for a machine without systemd running');
  const deb = debFor('amd64');
  try {
    const install = spawnSync('dpkg', ['-i', deb], { encoding: 'utf8' });
    assert.equal(install.status, 0, `dpkg -i failed:\n${install.stdout}\n${install.stderr}`);
    assert.match(dpkgStatus(), /install ok installed/);

    assert.ok(userExists(), 'the outpost user');
    assert.match(tool('getent', ['passwd', 'outpost']), /:\/var\/lib\/outpost:\/usr\/sbin\/nologin$/m);
    assert.equal(modeOf('/var/lib/outpost'), '700');
    assert.equal(ownerOf('/var/lib/outpost'), 'outpost:outpost');
    assert.equal(modeOf('/etc/outpost'), '750');
    assert.equal(modeOf('/etc/outpost/config.json'), '640');
    assert.equal(ownerOf('/etc/outpost/config.json'), 'root:outpost');
    assert.match(readFileSync('/etc/outpost/config.json', 'utf8'), /"dataDir": "\/var\/lib\/outpost"/);
    assert.match(tool('dpkg-query', ['-W', '-f', '${Conffiles}', 'outpost']), /\/etc\/outpost\/config\.json [0-9a-f]{32}/);
    assert.match(readFileSync('/lib/systemd/system/outpost.service', 'utf8'), /^ExecStart=\/usr\/lib\/outpost\/node\/bin\/node \/usr\/lib\/outpost\/dist\/cli\/main\.js run /m);
    // The packaged unit, with the package's paths, passes systemd's own check.
    const verify = spawnSync('systemd-analyze', ['verify', '/lib/systemd/system/outpost.service'], { encoding: 'utf8' });
    assert.equal(verify.status, 0, verify.stdout + verify.stderr);
    assert.deepEqual((verify.stdout + verify.stderr).split('\n').filter((l) => l.includes('outpost')), [], 'no remarks on outpost.service');
    // Enabled for the next boot with systemd, although systemd does not run now.
    assert.ok(existsSync('/etc/systemd/system/multi-user.target.wants/outpost.service'), 'the unit is enabled');

    // The service started by hand as its user (sudo -u outpost outpost run), on the package's
    // configuration and data directory; the command line asked the same way.
    const service = await startInstalledService();
    let stopped: number | null;
    try {
      // No flags: the command finds the service's configuration, and through it the data directory.
      const asked = outpostAsService(['status', '--json']);
      assert.equal(asked.status, 0, asked.stderr);
      const status = JSON.parse(asked.stdout) as { dataDir: string; version: string };
      assert.equal(status.dataDir, '/var/lib/outpost');
      assert.equal(status.version, JSON.parse(readFileSync('/usr/lib/outpost/package.json', 'utf8')).version);
    } finally {
      stopped = await service.stop();
    }
    assert.equal(stopped, 0, 'clean stop');
    assert.equal(ownerOf('/var/lib/outpost/outpost.db'), 'outpost:outpost', 'the database is in /var/lib/outpost, owned by the service user');

    // An edited configuration survives reinstalling the package.
    appendFileSync('/etc/outpost/config.json', '// edited by the admin\n');
    const again = spawnSync('dpkg', ['-i', deb], { encoding: 'utf8' });
    assert.equal(again.status, 0, again.stderr);
    assert.match(readFileSync('/etc/outpost/config.json', 'utf8'), /edited by the admin/);
    // A configuration the admin deleted stays deleted (dpkg's rule for conffiles), and the
    // maintainer script copes with its absence.
    const edited = readFileSync('/etc/outpost/config.json');
    rmSync('/etc/outpost/config.json');
    const withoutConfig = spawnSync('dpkg', ['-i', deb], { encoding: 'utf8' });
    assert.equal(withoutConfig.status, 0, withoutConfig.stdout + withoutConfig.stderr);
    assert.ok(!existsSync('/etc/outpost/config.json'), 'dpkg does not bring back a deleted conffile');
    writeFileSync('/etc/outpost/config.json', edited, { mode: 0o640 });

    // Remove: program gone, configuration and data kept.
    const remove = spawnSync('dpkg', ['-r', 'outpost'], { encoding: 'utf8' });
    assert.equal(remove.status, 0, remove.stderr);
    assert.ok(!existsSync('/usr/bin/outpost') && !existsSync('/usr/lib/outpost'), 'the program is removed');
    assert.match(readFileSync('/etc/outpost/config.json', 'utf8'), /edited by the admin/);
    assert.ok(existsSync('/var/lib/outpost/outpost.db'), 'the data is kept');

    // Purge: configuration, data and user gone.
    const purge = spawnSync('dpkg', ['--purge', 'outpost'], { encoding: 'utf8' });
    assert.equal(purge.status, 0, purge.stderr);
    assert.ok(!existsSync('/etc/outpost') && !existsSync('/var/lib/outpost'), 'configuration and data are deleted');
    assert.ok(!userExists(), 'the outpost user is deleted');
    assert.equal(dpkgStatus(), '', 'dpkg no longer knows the package');
  } finally {
    spawnSync('dpkg', ['--purge', 'outpost'], { stdio: 'ignore' });
  }
});
