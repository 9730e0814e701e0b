import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConsoleFiles } from '../console/static-files.js';

/** The release this program runs from: the directory holding dist/ (or src/ when run from the sources). */
export const RELEASE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** One missing or unreadable part of a release, named by its path and what needs it. */
export interface ReleaseProblem {
  path: string;
  problem: string;
  neededBy: string;
}

/**
 * Checks the files the daemon reads at run time besides its own code (docs/operations.md,
 * "Installing as a service"): a release copied without one of them starts and then fails, or
 * fails at start (the console's files are read when the HTTP door opens). The console is checked
 * by loading it exactly as the daemon does, so the check cannot drift from what start-up needs.
 */
export function checkReleaseFiles(root: string = RELEASE_ROOT): ReleaseProblem[] {
  const problems: ReleaseProblem[] = [];
  const packageJson = join(root, 'package.json');
  try {
    const version = (JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: unknown }).version;
    if (typeof version !== 'string') problems.push({ path: packageJson, problem: 'has no "version"', neededBy: 'outpost --version, /healthz and the status' });
  } catch (err) {
    problems.push({ path: packageJson, problem: describe(err), neededBy: 'outpost --version, /healthz and the status' });
  }
  const staticDir = join(root, 'src', 'console', 'static');
  try {
    const files = loadConsoleFiles(staticDir);
    if (!files.has('index.html')) problems.push({ path: join(staticDir, 'index.html'), problem: 'missing', neededBy: 'the console (/console/)' });
  } catch (err) {
    problems.push({ path: (err as NodeJS.ErrnoException).path ?? staticDir, problem: describe(err), neededBy: 'the daemon at start (it serves the console)' });
  }
  const abclDir = join(root, 'abcl');
  if (!existsSync(abclDir) || !statSync(abclDir).isDirectory()) {
    problems.push({ path: abclDir, problem: 'missing', neededBy: 'codec settings that name a shipped codec document (e.g. dimmer.abcl.json)' });
  } else if (readdirSync(abclDir).length === 0) {
    problems.push({ path: abclDir, problem: 'empty', neededBy: 'codec settings that name a shipped codec document (e.g. dimmer.abcl.json)' });
  }
  return problems;
}

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'ENOENT') return 'missing';
  return e.code ?? e.message;
}
