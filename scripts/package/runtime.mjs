// Fetches the Node.js runtime for a target from the npm registry (through npm itself, so its cache
// and registry settings apply), checks it against the pinned integrity and unpacks it once into the
// package cache. The unpacked runtime also carries the headers native modules are compiled against.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './run.mjs';

/** Returns the directory holding the runtime's `bin/node`, `include/node` and `LICENSE`. */
export function fetchRuntime(runtime, cacheDir) {
  const id = `${runtime.name}-${runtime.version}`;
  const dir = join(cacheDir, 'runtime', id);
  const done = join(dir, '.integrity');
  if (existsSync(done) && readFileSync(done, 'utf8') === runtime.integrity) return join(dir, 'package');

  const downloads = join(cacheDir, 'runtime', 'tarballs');
  mkdirSync(downloads, { recursive: true });
  const tarball = join(downloads, `${id}.tgz`);
  if (!existsSync(tarball) || integrityOf(tarball) !== runtime.integrity) {
    run('npm', ['pack', `${runtime.name}@${runtime.version}`, '--pack-destination', downloads, '--silent', '--no-fund', '--no-audit'], {
      what: `fetching the Node.js runtime ${id} from the npm registry`,
    });
  }
  const actual = integrityOf(tarball);
  if (actual !== runtime.integrity) {
    throw new Error(`${tarball}: integrity ${actual} is not the pinned ${runtime.integrity}; refusing to package it`);
  }
  rmSync(dir, { recursive: true, force: true });
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  run('tar', ['-xzf', tarball, '-C', partial], { what: `unpacking ${tarball}` });
  writeFileSync(join(partial, '.integrity'), runtime.integrity);
  renameSync(partial, dir);
  return join(dir, 'package');
}

function integrityOf(file) {
  return `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;
}
