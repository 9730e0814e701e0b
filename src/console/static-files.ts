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

/**
 * One console file: read at start (a few hundred KB in all), compressed on its first request and
 * kept, so start-up pays nothing for compression (brotli at its best level costs about 0.2 s for
 * all files) and a Pi spends no CPU per request afterwards.
 */
export class StaticFile {
  readonly type: string;
  readonly etag: string;
  readonly identity: Buffer;
  #gzip: Buffer | undefined;
  #brotli: Buffer | undefined;

  constructor(name: string, content: Buffer) {
    this.type = TYPES[extname(name)] ?? 'application/octet-stream';
    this.etag = `"${createHash('sha256').update(content).digest('base64url').slice(0, 16)}"`;
    this.identity = content;
  }

  get gzip(): Buffer {
    return (this.#gzip ??= gzipSync(this.identity, { level: 9 }));
  }

  get brotli(): Buffer {
    return (this.#brotli ??= brotliCompressSync(this.identity, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }));
  }
}

/** Every console file; the plotting library comes from its npm package under `vendor/`. */
export function loadConsoleFiles(staticDir: string = STATIC_DIR): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  const add = (name: string, content: Buffer) => files.set(name, new StaticFile(name, content));
  const walk = (dir: string, prefix: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path, `${prefix}${name}/`);
      else add(`${prefix}${name}`, readFileSync(path));
    }
  };
  walk(staticDir, '');
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
