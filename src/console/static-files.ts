import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, gzipSync, constants as zlib } from 'node:zlib';
import { createHash } from 'node:crypto';

/** The console's own files, served as they are: no build step, nothing fetched from outside the gateway. */
const STATIC_DIR = fileURLToPath(new URL('../../src/console/static/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json; charset=utf-8',
};

export interface StaticFile {
  type: string;
  etag: string;
  identity: Buffer;
  gzip: Buffer;
  brotli: Buffer;
}

/**
 * Every console file, read and compressed once at start (they total a few hundred KB), so a Pi
 * spends no CPU per request on them. The plotting library comes from its npm package under
 * `vendor/`, served from this gateway like everything else.
 */
export function loadConsoleFiles(): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  const add = (name: string, content: Buffer) => {
    files.set(name, {
      type: TYPES[extname(name)] ?? 'application/octet-stream',
      etag: `"${createHash('sha256').update(content).digest('base64url').slice(0, 16)}"`,
      identity: content,
      gzip: gzipSync(content, { level: 9 }),
      brotli: brotliCompressSync(content, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }),
    });
  };
  const walk = (dir: string, prefix: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path, `${prefix}${name}/`);
      else add(`${prefix}${name}`, readFileSync(path));
    }
  };
  walk(STATIC_DIR, '');
  const require = createRequire(import.meta.url);
  const uplotDir = join(require.resolve('uplot'), '..');
  add('vendor/uPlot.iife.min.js', readFileSync(join(uplotDir, 'uPlot.iife.min.js')));
  add('vendor/uPlot.min.css', readFileSync(join(uplotDir, 'uPlot.min.css')));
  return files;
}

/** Picks the smallest encoding the browser accepts. */
export function chooseEncoding(acceptEncoding: string | undefined): 'br' | 'gzip' | 'identity' {
  const accepted = (acceptEncoding ?? '').toLowerCase();
  if (/\bbr\b/.test(accepted)) return 'br';
  if (/\bgzip\b/.test(accepted)) return 'gzip';
  return 'identity';
}
