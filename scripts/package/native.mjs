// Native modules for the target CPU.
//
// better-sqlite3 publishes prebuilt binaries on a host gateways and build machines often cannot
// reach, so it is compiled here: with Debian's cross toolchain for ARM (g++-aarch64-linux-gnu,
// g++-arm-linux-gnueabihf) or the native one for amd64, against the headers of the exact Node.js
// runtime that goes into the package (same module ABI). A compile takes about a minute per target on
// two cores, so the result is cached under a key of everything that goes into it.
//
// The serialport bindings ship prebuilt binaries for Linux on arm, arm64 and x64 inside their npm
// package; only the target's are kept.
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { run } from './run.mjs';

/** Bump when the way the module is compiled changes, so cached binaries are rebuilt. */
const RECIPE = 1;

/** Puts build/Release/better_sqlite3.node for the target into the staged better-sqlite3 package. */
export function provideBetterSqlite3({ moduleDir, target, runtimeDir, cacheDir, lockIntegrity, log }) {
  const version = JSON.parse(readFileSync(join(moduleDir, 'package.json'), 'utf8')).version;
  const compiler = `${target.toolchain}-g++`;
  const compilerVersion = run(compiler, ['--version'], { what: `checking the compiler for ${target.debArch} (Debian package g++-${target.toolchain.replace(/_/g, '-')})` }).split('\n')[0];
  const key = createHash('sha256')
    .update(JSON.stringify({ RECIPE, version, lockIntegrity, target: target.toolchain, runtime: target.runtime, compilerVersion }))
    .digest('hex')
    .slice(0, 16);
  const cached = join(cacheDir, 'native', `better-sqlite3-${version}-${target.debArch}-${key}`, 'better_sqlite3.node');
  const release = join(moduleDir, 'build', 'Release');
  if (existsSync(cached)) {
    log(`better-sqlite3 ${version} for ${target.debArch}: cached (${cached})`);
  } else {
    log(`better-sqlite3 ${version} for ${target.debArch}: compiling with ${compilerVersion} (about a minute)`);
    compile({ moduleDir, target, runtimeDir, cacheDir, output: cached });
  }
  rmSync(join(moduleDir, 'build'), { recursive: true, force: true });
  mkdirSync(release, { recursive: true });
  copyFileSync(cached, join(release, 'better_sqlite3.node'));
  // The SQLite amalgamation and the C++ sources are only compile inputs (10 MB).
  rmSync(join(moduleDir, 'deps'), { recursive: true, force: true });
  rmSync(join(moduleDir, 'src'), { recursive: true, force: true });
}

function compile({ moduleDir, target, runtimeDir, cacheDir, output }) {
  const buildDir = join(cacheDir, 'build', `better-sqlite3-${target.debArch}`);
  rmSync(buildDir, { recursive: true, force: true });
  mkdirSync(dirname(buildDir), { recursive: true });
  cpSync(moduleDir, buildDir, { recursive: true });
  const tool = (name) => `${target.toolchain}-${name}`;
  // The build directory's path must not end up in the binary: the same sources give the same bytes.
  const prefixMap = `-ffile-prefix-map=${buildDir}=/build/better-sqlite3`;
  const env = {
    ...process.env,
    CC: tool('gcc'),
    CXX: tool('g++'),
    LINK: tool('g++'),
    AR: tool('ar'),
    CFLAGS: prefixMap,
    CXXFLAGS: prefixMap,
    // node-gyp reads npm_config_* as its own options when npm runs this script; none may leak in.
    npm_config_arch: undefined,
    npm_config_nodedir: undefined,
  };
  run(process.execPath, [nodeGyp(), 'rebuild', '--release', `--arch=${target.nodeArch}`, `--nodedir=${runtimeDir}`, '--jobs=2'], {
    cwd: buildDir,
    env,
    what: `compiling better-sqlite3 for ${target.debArch}`,
  });
  const built = join(buildDir, 'build', 'Release', 'better_sqlite3.node');
  // Symbols are not needed to run the module (stripping makes it about a third smaller).
  run(tool('strip'), ['--strip-unneeded', built], { what: `stripping ${built}` });
  const partial = `${dirname(output)}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  copyFileSync(built, join(partial, 'better_sqlite3.node'));
  renameSync(partial, dirname(output));
  rmSync(buildDir, { recursive: true, force: true });
}

/** npm's own node-gyp (every npm ships one), so the build needs nothing beyond Node.js and npm. */
function nodeGyp() {
  const npmCli = process.env.npm_execpath ?? realpathSync(run('sh', ['-c', 'command -v npm'], { what: 'finding npm' }).trim());
  let dir = dirname(npmCli);
  for (let i = 0; i < 4; i++) {
    const candidate = join(dir, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error(`cannot find the node-gyp that comes with npm (looked upward from ${npmCli})`);
}

/** Keeps only the target's glibc prebuilds of the serialport bindings. */
export function pruneSerialportPrebuilds({ moduleDir, target }) {
  const prebuilds = join(moduleDir, 'prebuilds');
  const keep = `linux-${target.nodeArch}`;
  const dirs = readdirSync(prebuilds);
  if (!dirs.includes(keep)) throw new Error(`${prebuilds} has no ${keep} prebuild (has: ${dirs.join(', ')})`);
  for (const dir of dirs) if (dir !== keep) rmSync(join(prebuilds, dir), { recursive: true, force: true });
  for (const file of readdirSync(join(prebuilds, keep))) if (!file.includes('.glibc.')) rmSync(join(prebuilds, keep, file));
  // The C++ sources are only needed to compile the bindings, which the prebuild makes unnecessary.
  rmSync(join(moduleDir, 'src'), { recursive: true, force: true });
}
