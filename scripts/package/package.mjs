// `npm run package -- --arch arm64|armhf|amd64`: builds dist-pkg/outpost_<version>_<arch>.deb, a
// package that installs Outpost on a Debian 12 / Raspberry Pi OS machine with no network and no
// compiler: its own Node.js runtime, the compiled program, the production dependencies with native
// modules built for the target, the systemd unit and the maintainer scripts (docs/operations.md,
// "Install on a Raspberry Pi"). It compiles the program itself; development dependencies (TypeScript)
// must be installed (npm ci).
//
// Options: --out DIR (default dist-pkg), --cache DIR (default <out>/.cache, or OUTPOST_PACKAGE_CACHE):
// the fetched runtimes and compiled native modules are kept there, so a second run takes seconds.
// The same sources give the same bytes: every time in the package is SOURCE_DATE_EPOCH (default: the
// time of the last git commit), modes are fixed and files are archived in sorted order.
// --version V builds the same sources as version V instead of package.json's (the package test of an
// upgrade builds the tree a second time as an older version); releases leave it out.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkBinaries } from './binaries.mjs';
import { buildDeb, fixTimes, installedSize, normalizeModes, walk, writeControl, writeMd5sums } from './deb.mjs';
import { provideBetterSqlite3, pruneSerialportPrebuilds } from './native.mjs';
import { run } from './run.mjs';
import { fetchRuntime } from './runtime.mjs';
import { targetFor } from './targets.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const HERE = fileURLToPath(new URL('.', import.meta.url));
/** Where the program lives on the gateway; the unit, the wrapper and the docs use this path. */
const PREFIX = 'usr/lib/outpost';
const MAINTAINER_SCRIPTS = ['postinst', 'prerm', 'postrm'];

function main() {
  const { values } = parseArgs({
    options: { arch: { type: 'string' }, out: { type: 'string' }, cache: { type: 'string' }, version: { type: 'string' } },
    strict: true,
  });
  const target = targetFor(values.arch);
  const out = resolve(values.out ?? join(REPO, 'dist-pkg'));
  const cache = resolve(values.cache ?? process.env.OUTPOST_PACKAGE_CACHE ?? join(out, '.cache'));
  const started = Date.now();
  const log = (msg) => console.log(`package ${target.debArch}: ${msg}`);
  const deb = buildPackage({ target, out, cache, log, version: values.version });
  const bytes = statSync(deb).size;
  const sha256 = createHash('sha256').update(readFileSync(deb)).digest('hex');
  log(`${deb} (${(bytes / 1048576).toFixed(1)} MiB, sha256 ${sha256}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

export function buildPackage({ target, out, cache, log, version: versionOverride }) {
  for (const need of ['package-lock.json', 'abcl', 'config/example.jsonc', 'src/console/static', 'systemd/outpost.service']) {
    if (!existsSync(join(REPO, need))) throw new Error(`${need} is missing from ${REPO}`);
  }
  const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
  if (versionOverride !== undefined) pkg.version = debianVersion(versionOverride);
  const epoch = sourceDateEpoch();
  // One staging directory per version: two versions of one architecture may be built side by side.
  const stage = join(cache, 'stage', `${target.debArch}_${pkg.version}`);
  rmSync(stage, { recursive: true, force: true });
  const root = join(stage, 'root');
  const app = join(root, PREFIX);
  mkdirSync(app, { recursive: true });

  log('production dependencies');
  installDependencies({ app, stage });
  log('program');
  compileProgram(app);
  copyProgramFiles(app, pkg);
  const runtimeDir = fetchRuntime(target.runtime, cache);
  log(`Node.js runtime ${target.runtime.name}@${target.runtime.version}`);
  mkdirSync(join(app, 'node', 'bin'), { recursive: true });
  copyFileSync(join(runtimeDir, 'bin', 'node'), join(app, 'node', 'bin', 'node'));
  copyFileSync(join(runtimeDir, 'LICENSE'), join(app, 'node', 'LICENSE'));
  const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8'));
  provideBetterSqlite3({
    moduleDir: join(app, 'node_modules', 'better-sqlite3'),
    target,
    runtimeDir,
    cacheDir: cache,
    lockIntegrity: lock.packages['node_modules/better-sqlite3']?.integrity,
    log,
  });
  pruneSerialportPrebuilds({ moduleDir: join(app, 'node_modules', '@serialport', 'bindings-cpp'), target });

  log('system files');
  installSystemFiles(root);

  const { binaries, depends } = checkBinaries(root, target);
  for (const b of binaries) log(`  ${b.rel}: ${b.file}`);
  normalizeModes(root, { 'etc/outpost': 0o750, 'etc/outpost/config.json': 0o640 });
  mkdirSync(join(root, 'DEBIAN'));
  for (const script of MAINTAINER_SCRIPTS) copyFileSync(join(HERE, 'debian', script), join(root, 'DEBIAN', script));
  writeFileSync(join(root, 'DEBIAN', 'conffiles'), '/etc/outpost/config.json\n');
  writeControl(root, {
    Package: 'outpost',
    Version: pkg.version,
    Architecture: target.debArch,
    Maintainer: 'Outpost contributors <outpost@localhost>',
    'Installed-Size': installedSize(root),
    Depends: [...depends, ...target.extraDepends, 'passwd'].join(', '),
    Section: 'net',
    Priority: 'optional',
    Description: `${pkg.description}\n LoRaWAN network server, HTTP and MQTT device messaging, SQLite store-and-forward\n and sync to a central, for gateways. Bundles its own Node.js ${target.runtime.version}\n runtime and native modules built for ${target.debArch}, so it needs no network,\n compiler or Node.js on the machine. Runs as the systemd service outpost.`,
  });
  writeMd5sums(root);
  chmodSync(join(root, 'DEBIAN'), 0o755);
  for (const file of readdirSync(join(root, 'DEBIAN'))) chmodSync(join(root, 'DEBIAN', file), MAINTAINER_SCRIPTS.includes(file) ? 0o755 : 0o644);
  fixTimes(root, epoch);

  mkdirSync(out, { recursive: true });
  const deb = join(out, `outpost_${pkg.version}_${target.debArch}.deb`);
  const partial = `${deb}.partial`;
  buildDeb(root, partial, epoch);
  renameSync(partial, deb);
  rmSync(stage, { recursive: true, force: true });
  return deb;
}

/**
 * Compiles src/ into the package (not a copy of dist/, which may hold files of deleted sources or be
 * rebuilt while this runs), then writes the precompiled config validator next to it the way
 * `npm run build` does: its script runs from inside the staged program, against its dependencies.
 */
function compileProgram(app) {
  const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!existsSync(tsc)) throw new Error('TypeScript is missing: run npm ci first (the package is built from the sources)');
  run(process.execPath, [tsc, '-p', join(REPO, 'tsconfig.build.json'), '--outDir', join(app, 'dist'), '--sourceMap', 'false'], {
    cwd: REPO,
    what: 'compiling the program (tsc)',
  });
  const scripts = join(app, 'scripts');
  mkdirSync(scripts);
  copyFileSync(join(REPO, 'scripts', 'precompile-config-schema.mjs'), join(scripts, 'precompile-config-schema.mjs'));
  run(process.execPath, [join(scripts, 'precompile-config-schema.mjs')], { cwd: app, what: 'precompiling the config schema' });
  rmSync(scripts, { recursive: true });
}

/**
 * What the daemon reads at run time besides its code: its version (the package's, so `outpost status`
 * names the installed version), shipped codecs, the console.
 */
function copyProgramFiles(app, pkg) {
  const packageJson = readFileSync(join(REPO, 'package.json'), 'utf8');
  // Byte for byte the repository's file unless the version was overridden.
  writeFileSync(join(app, 'package.json'), JSON.parse(packageJson).version === pkg.version ? packageJson : `${JSON.stringify(pkg, null, 2)}\n`);
  cpSync(join(REPO, 'abcl'), join(app, 'abcl'), { recursive: true });
  cpSync(join(REPO, 'config'), join(app, 'config'), { recursive: true });
  cpSync(join(REPO, 'src', 'console', 'static'), join(app, 'src', 'console', 'static'), { recursive: true });
}

/**
 * The production dependencies exactly as package-lock.json pins them, without install scripts (they
 * would build for this machine, not the target); native modules are provided afterwards.
 */
function installDependencies({ app, stage }) {
  const deps = join(stage, 'deps');
  mkdirSync(deps, { recursive: true });
  copyFileSync(join(REPO, 'package.json'), join(deps, 'package.json'));
  copyFileSync(join(REPO, 'package-lock.json'), join(deps, 'package-lock.json'));
  run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: deps,
    what: 'installing the production dependencies',
    env: { ...process.env, npm_config_arch: undefined, NODE_ENV: 'production' },
  });
  renameSync(join(deps, 'node_modules'), join(app, 'node_modules'));
  // npm's bookkeeping and command links are not needed to run, and links do not belong in the package.
  rmSync(join(app, 'node_modules', '.package-lock.json'), { force: true });
  for (const entry of walk(join(app, 'node_modules'))) {
    if (entry.stat.isDirectory() && entry.rel.endsWith('.bin') && entry.rel.split('/').at(-1) === '.bin') rmSync(entry.path, { recursive: true, force: true });
  }
}

function installSystemFiles(root) {
  const put = (rel, content, mode) => {
    const path = join(root, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content, { mode });
  };
  put('usr/bin/outpost', readFileSync(join(HERE, 'debian', 'outpost')), 0o755);
  put('lib/systemd/system/outpost.service', packagedUnit(), 0o644);
  put('etc/outpost/config.json', packagedConfig(), 0o640);
  put('usr/share/doc/outpost/copyright', readFileSync(join(HERE, 'debian', 'copyright')), 0o644);
  for (const doc of readdirSync(join(REPO, 'docs')).filter((f) => f.endsWith('.md')).sort()) {
    put(`usr/share/doc/outpost/${doc}`, readFileSync(join(REPO, 'docs', doc)), 0o644);
  }
  put('usr/share/doc/outpost/README.md', readFileSync(join(REPO, 'README.md')), 0o644);
}

/** The repository's unit with the package's paths: the bundled runtime instead of the machine's node. */
function packagedUnit() {
  return replaceExactly(readFileSync(join(REPO, 'systemd', 'outpost.service'), 'utf8'), 'systemd/outpost.service', [
    [/^Documentation=.*$/m, 'Documentation=file:///usr/share/doc/outpost/operations.md'],
    [/^WorkingDirectory=.*$/m, `WorkingDirectory=/${PREFIX}`],
    [/^ExecStart=\S+ \S+ /m, `ExecStart=/${PREFIX}/node/bin/node /${PREFIX}/dist/cli/main.js `],
  ]);
}

/** The documented example configuration, with the package's data directory. */
function packagedConfig() {
  return replaceExactly(readFileSync(join(REPO, 'config', 'example.jsonc'), 'utf8'), 'config/example.jsonc', [
    [/^(\s*)"dataDir": "\.\/data",$/m, '$1"dataDir": "/var/lib/outpost",'],
  ]);
}

/** Each pattern must match once: a changed source file fails the build instead of a wrong package. */
function replaceExactly(text, name, replacements) {
  for (const [pattern, replacement] of replacements) {
    if (!pattern.test(text)) throw new Error(`${name} no longer has a line matching ${pattern}; update scripts/package/package.mjs`);
    text = text.replace(pattern, replacement);
  }
  return text;
}

/** A version dpkg accepts (Debian policy 5.6.12, without an epoch: it goes into the file name). */
function debianVersion(version) {
  if (!/^[0-9][A-Za-z0-9.+~]*(-[A-Za-z0-9.+~]+)?$/.test(version)) {
    throw new Error(`--version ${JSON.stringify(version)} is not a Debian version: a digit first, then letters, digits and . + ~ (an optional -revision after)`);
  }
  return version;
}

function sourceDateEpoch() {
  if (process.env.SOURCE_DATE_EPOCH) {
    const epoch = Number(process.env.SOURCE_DATE_EPOCH);
    if (!Number.isInteger(epoch) || epoch < 0) throw new Error(`SOURCE_DATE_EPOCH must be whole seconds, got ${process.env.SOURCE_DATE_EPOCH}`);
    return epoch;
  }
  const git = spawnSync('git', ['log', '-1', '--format=%ct'], { cwd: REPO, encoding: 'utf8' });
  const epoch = Number(git.stdout?.trim());
  if (git.status !== 0 || !Number.isInteger(epoch)) throw new Error('set SOURCE_DATE_EPOCH (no git history to take the time of the last commit from)');
  return epoch;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (err) {
    console.error(`npm run package: ${err.message}`);
    process.exit(1);
  }
}
