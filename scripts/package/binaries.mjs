// Checks every ELF file that goes into a package: built for the target CPU (as `file` reports it), and
// needing no newer C or C++ library than the oldest Debian release the package supports (BASELINE).
// The newest versions found become the package's library dependencies.
import { closeSync, openSync, readSync } from 'node:fs';
import { BASELINE } from './targets.mjs';
import { walk } from './deb.mjs';
import { run } from './run.mjs';

/** libstdc++'s symbol versions and the GCC release (Debian package version) that brought each. */
const GLIBCXX_GCC = [
  ['3.4.21', '5'], ['3.4.22', '6'], ['3.4.23', '7'], ['3.4.24', '7'], ['3.4.25', '8'],
  ['3.4.26', '9'], ['3.4.27', '10'], ['3.4.28', '10'], ['3.4.29', '11'], ['3.4.30', '12'],
];

export function isElf(path) {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(4);
    return readSync(fd, head, 0, 4, 0) === 4 && head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    closeSync(fd);
  }
}

/** Returns [{rel, file}] for every ELF file, and the Depends entries they need. Throws on a mismatch. */
export function checkBinaries(root, target) {
  const binaries = [];
  const newest = { GLIBC: '0', GLIBCXX: '0', CXXABI: '0', GCC: '0' };
  const problems = [];
  for (const entry of walk(root)) {
    if (!entry.stat.isFile() || !isElf(entry.path)) continue;
    const description = run('file', ['-b', entry.path], { what: `describing ${entry.rel}` }).trim();
    binaries.push({ rel: entry.rel, file: description });
    if (!description.includes(target.fileMachine)) problems.push(`${entry.rel} is not built for ${target.debArch}: ${description}`);
    // readelf reads any architecture's ELF; the needed versions are in .gnu.version_r.
    const versions = run('readelf', ['--version-info', '--wide', entry.path], { what: `reading ${entry.rel}` });
    for (const [, lib, version] of versions.matchAll(/Name: (GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)/g)) {
      if (compareVersions(version, BASELINE[lib]) > 0) problems.push(`${entry.rel} needs ${lib}_${version}, newer than Debian 12's ${BASELINE[lib]}`);
      if (compareVersions(version, newest[lib]) > 0) newest[lib] = version;
    }
  }
  if (binaries.length === 0) problems.push('no binaries found: the runtime is missing');
  if (problems.length > 0) throw new Error(`the ${target.debArch} package would not run on its target:\n  ${problems.join('\n  ')}`);
  const depends = [`libc6 (>= ${newest.GLIBC})`, 'libgcc-s1'];
  const gcc = GLIBCXX_GCC.filter(([v]) => compareVersions(newest.GLIBCXX, v) >= 0).pop();
  depends.push(gcc ? `libstdc++6 (>= ${gcc[1]})` : 'libstdc++6');
  return { binaries, depends };
}

function compareVersions(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}
