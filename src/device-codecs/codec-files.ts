import { closeSync, constants, fstatSync, openSync, readSync, realpathSync } from 'node:fs';
import { extname, isAbsolute, relative, resolve, sep } from 'node:path';
import { ServiceError } from '../core/errors.js';

/**
 * Codec `file` references (docs/api.md, docs/codecs.md) name a document or script in the data
 * directory or in the shipped `abcl/`, nothing else. The name comes in over HTTP with an admin
 * token, so it is treated as hostile: resolved with every symlink followed, then confined to
 * those two directories; only regular files with a codec's extension, of bounded size, are read.
 * Nothing read is ever echoed in an error: the messages name the file and the rule only.
 */

/** Largest codec file read; checked on the open file before reading (a device or /dev/zero cannot grow it). */
export const CODEC_FILE_MAX_BYTES = 1024 * 1024;

/** Extensions of codec documents and scripts: keeps the database, its WAL and keys out of reach. */
export const CODEC_FILE_EXTENSIONS = ['.json', '.jsonc', '.abcl', '.js'] as const;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function refuse(where: string, file: string, why: string): ServiceError {
  return new ServiceError('CODEC_INVALID', `${where}.file ${JSON.stringify(file)}: ${why}`);
}

function inside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

function realDir(dir: string): string | undefined {
  try {
    return realpathSync.native(dir);
  } catch {
    return undefined;
  }
}

/**
 * Reads a codec file: relative names are looked up in the data dir first, then in `abcl/`; an
 * absolute name must lie in one of them. Refuses (CODEC_INVALID) anything that resolves elsewhere,
 * is not a regular file, is over CODEC_FILE_MAX_BYTES or is not UTF-8 text.
 */
export function readCodecFile(file: string, dirs: { dataDir: string; shippedDir: string }, where: string): string {
  if (file.length === 0 || file.includes('\0')) throw refuse(where, file, 'is not a file name');
  if (!(CODEC_FILE_EXTENSIONS as readonly string[]).includes(extname(file).toLowerCase())) {
    throw refuse(where, file, `must end in ${CODEC_FILE_EXTENSIONS.join(', ')}`);
  }
  const roots = [realDir(dirs.dataDir), realDir(dirs.shippedDir)].filter((d): d is string => d !== undefined);
  const candidates = isAbsolute(file) ? [file] : [resolve(dirs.dataDir, file), resolve(dirs.shippedDir, file)];
  let outside = false;
  for (const candidate of candidates) {
    let real: string;
    try {
      real = realpathSync.native(candidate);
    } catch {
      continue; // not there (or a dangling link): try the next place
    }
    if (!roots.some((root) => inside(root, real))) {
      outside = true;
      continue;
    }
    return readConfined(real, file, where);
  }
  if (outside) throw refuse(where, file, 'resolves outside the data directory and the shipped abcl/ directory');
  throw refuse(where, file, 'not found in the data directory or the shipped abcl/ directory');
}

function readConfined(path: string, file: string, where: string): string {
  let fd: number;
  try {
    // O_NOFOLLOW: the checked path must not become a link in between; O_NONBLOCK: a FIFO must not hang the open.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    throw refuse(where, file, `cannot be opened (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw refuse(where, file, 'is not a regular file');
    if (stat.size > CODEC_FILE_MAX_BYTES) throw refuse(where, file, `is ${stat.size} bytes, more than the limit of ${CODEC_FILE_MAX_BYTES}`);
    // Read at most one byte past the limit, whatever the file does meanwhile.
    const buffer = Buffer.alloc(Math.min(stat.size, CODEC_FILE_MAX_BYTES) + 1);
    let length = 0;
    for (let n: number; length < buffer.length && (n = readSync(fd, buffer, length, buffer.length - length, null)) > 0; ) length += n;
    if (length > CODEC_FILE_MAX_BYTES) throw refuse(where, file, `grew beyond the limit of ${CODEC_FILE_MAX_BYTES} bytes while being read`);
    try {
      return UTF8.decode(buffer.subarray(0, length));
    } catch {
      throw refuse(where, file, 'is not UTF-8 text');
    }
  } finally {
    closeSync(fd);
  }
}
