// `npm run test:arm`: builds the arm64, armhf and amd64 packages and runs the package tests on them:
// the QEMU proof of both ARM packages, the amd64 package installed with dpkg, the upgrade to it from
// the same tree built as an older version (PREVIOUS_VERSION), and the check that a second build gives
// the same bytes. Usage: node test/package/run.mjs [substring filter...]
//
// The packages are built from the last commit (git archive HEAD, as a clean clone would have it), so
// they are what a release of that commit holds, whatever is being edited in the checkout meanwhile;
// the tests themselves run from the checkout. Commit before running it on changed sources, or name
// another commit or tag with OUTPOST_PACKAGE_REF.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const filters = process.argv.slice(2);
const ARCHES = ['arm64', 'armhf', 'amd64'];
/** The version the upgrade test starts from: dpkg orders `~` before anything, so it is older. */
const PREVIOUS_VERSION = `${JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version}~previous`;

// Debian packages the build and the proof need; say which are missing rather than fail obscurely.
const TOOLS = {
  'qemu-aarch64-static': 'qemu-user-static',
  'qemu-arm-static': 'qemu-user-static',
  'aarch64-linux-gnu-g++': 'g++-aarch64-linux-gnu',
  'arm-linux-gnueabihf-g++': 'g++-arm-linux-gnueabihf',
  'x86_64-linux-gnu-g++': 'g++',
  'dpkg-deb': 'dpkg',
  file: 'file',
  readelf: 'binutils',
};
const SYSROOT_FILES = {
  '/usr/aarch64-linux-gnu/lib/libstdc++.so.6': 'libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross',
  '/usr/arm-linux-gnueabihf/lib/libstdc++.so.6': 'libc6-armhf-cross libstdc++6-armhf-cross libgcc-s1-armhf-cross',
  '/usr/arm-linux-gnueabihf/lib/libatomic.so.1': 'libatomic1-armhf-cross',
};
const missing = new Set();
for (const [tool, pkg] of Object.entries(TOOLS)) {
  if (spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0) missing.add(pkg);
}
for (const [file, pkgs] of Object.entries(SYSROOT_FILES)) if (!existsSync(file)) pkgs.split(' ').forEach((p) => missing.add(p));
if (missing.size > 0) {
  console.error(`missing Debian packages for the package tests: apt-get install -y ${[...missing].join(' ')}`);
  process.exit(1);
}

const epoch = process.env.SOURCE_DATE_EPOCH ?? spawnSync('git', ['log', '-1', '--format=%ct', process.env.OUTPOST_PACKAGE_REF ?? 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim();
const out = join(root, 'dist-pkg');
const cache = process.env.OUTPOST_PACKAGE_CACHE ?? join(out, '.cache');
const source = snapshot();
const timings = {};
try {
  // Two builds at a time: most of a cold build is compiling SQLite's single C file, which keeps one
  // core busy, so two side by side use both cores of a small CI machine.
  // The older amd64 package waits for the amd64 one: built after it, it finds the native module and
  // the runtime in the cache (a few seconds), and the two never compile into the cache at once.
  const started = Date.now();
  const jobs = [
    ...ARCHES.map((arch) => ({ name: arch, arch, args: [] })),
    { name: `amd64 ${PREVIOUS_VERSION}`, arch: 'amd64', args: ['--version', PREVIOUS_VERSION], after: 'amd64' },
  ];
  const done = new Map(jobs.map((job) => {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    return [job.name, { promise, resolve }];
  }));
  const queue = [...jobs];
  await Promise.all([0, 1].map(async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
      if (job.after) await done.get(job.after).promise;
      job.build = await buildPackage(job.arch, job.args);
      done.get(job.name).resolve();
    }
  }));
  timings['packages (two at a time)'] = Date.now() - started;
  for (const job of jobs) {
    timings[`package ${job.name}`] = job.build.ms;
    if (job.build.code !== 0) fail(`building the ${job.name} package failed (exit ${job.build.code})`);
  }

  const files = readdirSync(join(root, 'test', 'package'))
    .filter((f) => f.endsWith('.package-test.ts'))
    .sort()
    .map((f) => join('test', 'package', f))
    .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)));
  if (files.length === 0) fail('no package test files matched');
  const testsStarted = Date.now();
  // One at a time: the emulated runs are measured, and each takes both cores.
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, SOURCE_DATE_EPOCH: epoch, OUTPOST_PACKAGE_DIR: out, OUTPOST_PACKAGE_CACHE: cache, OUTPOST_PACKAGE_SOURCE: source, OUTPOST_PACKAGE_PREVIOUS_VERSION: PREVIOUS_VERSION },
  });
  timings.tests = Date.now() - testsStarted;
  mkdirSync(join(root, 'test', 'artifacts'), { recursive: true });
  writeFileSync(join(root, 'test', 'artifacts', 'package-timings.json'), `${JSON.stringify(timings, null, 2)}\n`);
  console.log(`# package timings (ms): ${JSON.stringify(timings)}`);
  process.exitCode = result.status ?? 1;
} finally {
  rmSync(source, { recursive: true, force: true });
}

function fail(message) {
  console.error(message);
  rmSync(source, { recursive: true, force: true });
  process.exit(1);
}

function buildPackage(arch, args) {
  const started = Date.now();
  const child = spawn(process.execPath, [join(source, 'scripts', 'package', 'package.mjs'), '--arch', arch, '--out', out, '--cache', cache, ...args], {
    stdio: 'inherit',
    env: { ...process.env, SOURCE_DATE_EPOCH: epoch },
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, ms: Date.now() - started })));
}

/** The last commit's files (what a clean clone has), with the checkout's node_modules linked. */
function snapshot() {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-pkg-src-'));
  const ref = process.env.OUTPOST_PACKAGE_REF ?? 'HEAD';
  const archive = spawnSync('sh', ['-c', `git archive --format=tar '${ref}' | tar -x -C '${dir}'`], { cwd: root, encoding: 'utf8' });
  if (archive.status !== 0) throw new Error(`git archive ${ref} failed: ${archive.stderr}`);
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}
