import { readFileSync } from 'node:fs';

/** The program version, from package.json (reported by /healthz and `outpost --version`). */
export function programVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
