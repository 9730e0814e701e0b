// Turns a staged file tree into a reproducible .deb: fixed modes and times, the control file with
// the installed size and dependencies worked out from the tree, md5sums, and dpkg-deb with gzip
// (xz takes minutes for the Node.js runtime on a small machine; gzip seconds).
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, lutimesSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { run } from './run.mjs';

/** Every path under root (files, directories, links), sorted so the walk is the same every time. */
export function walk(root) {
  const found = [];
  const visit = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const stat = lstatSync(path);
      found.push({ path, rel: relative(root, path), stat });
      if (stat.isDirectory()) visit(path);
    }
  };
  visit(root);
  return found;
}

/**
 * Modes that do not depend on the build machine's umask or the npm tarballs: directories 0755,
 * executables 0755, other files 0644, with the exceptions given (path relative to the root → mode).
 */
export function normalizeModes(root, exceptions = {}) {
  for (const entry of walk(root)) {
    if (entry.rel.startsWith('DEBIAN')) continue;
    if (entry.stat.isSymbolicLink()) throw new Error(`${entry.rel}: symbolic links are not expected in the package`);
    let mode = entry.stat.isDirectory() || entry.stat.mode & 0o100 ? 0o755 : 0o644;
    if (entry.rel in exceptions) mode = exceptions[entry.rel];
    chmodSync(entry.path, mode);
  }
}

/** Sets every time in the tree to the given epoch (seconds), as SOURCE_DATE_EPOCH asks. */
export function fixTimes(root, epoch) {
  for (const entry of walk(root).reverse()) lutimesSync(entry.path, epoch, epoch);
  lutimesSync(root, epoch, epoch);
}

/** dpkg's Installed-Size: KiB, each file rounded up, one per directory. */
export function installedSize(root) {
  let kib = 0;
  for (const entry of walk(root)) {
    if (entry.rel.startsWith('DEBIAN')) continue;
    kib += entry.stat.isDirectory() ? 1 : Math.ceil(entry.stat.size / 1024);
  }
  return kib;
}

export function writeMd5sums(root) {
  const lines = [];
  for (const entry of walk(root)) {
    if (entry.rel.startsWith('DEBIAN') || !entry.stat.isFile()) continue;
    lines.push(`${createHash('md5').update(readFileSync(entry.path)).digest('hex')}  ${entry.rel}`);
  }
  writeFileSync(join(root, 'DEBIAN', 'md5sums'), `${lines.join('\n')}\n`);
}

export function writeControl(root, fields) {
  const lines = [];
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    lines.push(`${key}: ${value}`);
  }
  writeFileSync(join(root, 'DEBIAN', 'control'), `${lines.join('\n')}\n`);
}

/** Builds the package; the archive members' times and the tar entries follow SOURCE_DATE_EPOCH. */
export function buildDeb(root, output, epoch) {
  run('dpkg-deb', ['--root-owner-group', '-Zgzip', '--build', root, output], {
    env: { ...process.env, SOURCE_DATE_EPOCH: String(epoch) },
    what: `building ${output}`,
  });
}
