// What the three packages hold (dpkg-deb -I and -c), that every binary in them is for their CPU, and
// that building a package again from the same sources gives the same bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { debFor, ROOT, targetOf, tool, unpack, VERSION, type Arch } from './helpers.js';

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : []));
}

function isElf(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(4);
    return readSync(fd, head, 0, 4, 0) === 4 && head.toString('latin1') === '\x7fELF';
  } finally {
    closeSync(fd);
  }
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

for (const arch of ['arm64', 'armhf', 'amd64'] as Arch[]) {
  test(`${arch} package: control fields, maintainer scripts, conffile and the files the service needs`, () => {
    const deb = debFor(arch);
    const info = tool('dpkg-deb', ['-I', deb]);
    assert.match(info, /^ Package: outpost$/m);
    assert.match(info, new RegExp(`^ Version: ${VERSION.replace(/\./g, '\\.')}$`, 'm'));
    assert.match(info, new RegExp(`^ Architecture: ${arch}$`, 'm'));
    const depends = /^ Depends: (.*)$/m.exec(info)?.[1] ?? '';
    assert.match(depends, /libc6 \(>= 2\.\d+\)/);
    assert.match(depends, /libstdc\+\+6/);
    if (arch === 'armhf') assert.match(depends, /libatomic1/, 'the armv7l runtime links libatomic');
    for (const script of ['postinst', 'prerm', 'postrm', 'conffiles', 'md5sums']) assert.match(info, new RegExp(` ${script} `), script);
    assert.equal(tool('sh', ['-c', `dpkg-deb -I '${deb}' conffiles`]).trim(), '/etc/outpost/config.json');

    const listing = tool('dpkg-deb', ['-c', deb]);
    const paths = new Set(listing.split('\n').filter(Boolean).map((l) => l.slice(l.indexOf('./') + 1).replace(/ -> .*$/, '')));
    for (const path of [
      '/usr/bin/outpost',
      '/lib/systemd/system/outpost.service',
      '/etc/outpost/config.json',
      '/usr/lib/outpost/node/bin/node',
      '/usr/lib/outpost/dist/cli/main.js',
      '/usr/lib/outpost/dist/core/config-schema.precompiled.cjs',
      '/usr/lib/outpost/package.json',
      '/usr/lib/outpost/abcl/environment-sensor.abcl.json',
      '/usr/lib/outpost/src/console/static/index.html',
      '/usr/lib/outpost/node_modules/better-sqlite3/build/Release/better_sqlite3.node',
      '/usr/lib/outpost/node_modules/uplot/package.json',
      '/usr/share/doc/outpost/copyright',
      '/usr/share/doc/outpost/operations.md',
    ]) {
      assert.ok(paths.has(path), `${path} is in the package`);
    }
    for (const path of paths) {
      assert.doesNotMatch(path, /\/node_modules\/(typescript|tsx|playwright-core|cbor-x|cbor-extract|esbuild)\//, 'no development dependency');
      assert.doesNotMatch(path, /^\/usr\/lib\/outpost\/dist\/.*\.map$|\/better-sqlite3\/(deps|src)\//, 'no source maps of the program, no SQLite sources');
    }
    // Every entry owned by root with a fixed time; the conffile not world-readable.
    assert.doesNotMatch(listing, /^\S+ (?!root\/root)/m);
    assert.equal(new Set(listing.split('\n').filter(Boolean).map((l) => l.split(/\s+/).slice(3, 5).join(' '))).size, 1, 'one time for every file');
    assert.match(listing, /^-rw-r----- root\/root .* \.\/etc\/outpost\/config\.json$/m);
    assert.match(listing, /^-rwxr-xr-x root\/root .* \.\/usr\/bin\/outpost$/m);
  });

  test(`${arch} package: every ELF file is for ${arch}`, () => {
    const pkg = unpack(arch);
    try {
      const elves = filesUnder(pkg.root).filter(isElf);
      assert.ok(elves.length >= 3, `node, better-sqlite3 and the serialport bindings at least (found ${elves.length})`);
      for (const elf of elves) assert.ok(tool('file', ['-b', elf]).includes(targetOf(arch).fileMachine), `${elf}: ${tool('file', ['-b', elf])}`);
    } finally {
      pkg.remove();
    }
  });
}

test('the same sources give the same package: arm64 built again is byte for byte the same', { timeout: 600_000 }, () => {
  const source = process.env.OUTPOST_PACKAGE_SOURCE ?? ROOT;
  const out = mkdtempSync(join(tmpdir(), 'outpost-pkg-again-'));
  try {
    const again = spawnSync(process.execPath, [join(source, 'scripts', 'package', 'package.mjs'), '--arch', 'arm64', '--out', out, ...(process.env.OUTPOST_PACKAGE_CACHE ? ['--cache', process.env.OUTPOST_PACKAGE_CACHE] : [])], {
      encoding: 'utf8',
    });
    assert.equal(again.status, 0, again.stderr);
    assert.equal(sha256(join(out, `outpost_${VERSION}_arm64.deb`)), sha256(debFor('arm64')));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
