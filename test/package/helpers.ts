// What the package tests share: where `test/package/run.mjs` put the packages, unpacking one, and
// starting its program, under QEMU user emulation for ARM (no binfmt_misc in these containers, so
// the emulator is started explicitly, with Debian's cross C library as the target's root).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: plain JavaScript module of the build scripts, no type declarations.
import { TARGETS } from '../../scripts/package/targets.mjs';
import { awaitReady } from '../helpers/daemon.js';

export type Arch = 'arm64' | 'armhf' | 'amd64';

interface Target {
  debArch: Arch;
  nodeArch: string;
  fileMachine: string;
  runtime: { name: string; version: string };
  qemu: { binary: string; sysroot: string } | null;
}

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PACKAGE_DIR = process.env.OUTPOST_PACKAGE_DIR ?? join(ROOT, 'dist-pkg');
export const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * The version of the same tree built a second time as an older release, the one the upgrade test
 * starts from (test/package/run.mjs builds it for amd64 only).
 */
export const PREVIOUS_VERSION = process.env.OUTPOST_PACKAGE_PREVIOUS_VERSION ?? `${VERSION}~previous`;

export function targetOf(arch: Arch): Target {
  return (TARGETS as Record<Arch, Target>)[arch];
}

export function debFor(arch: Arch, version: string = VERSION): string {
  const deb = join(PACKAGE_DIR, `outpost_${version}_${arch}.deb`);
  if (!existsSync(deb)) throw new Error(`${deb} is missing: the package tests run through npm run test:arm, which builds it first`);
  return deb;
}

/** Runs a tool and returns its stdout; throws with its output when it fails. */
export function tool(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; input?: string } = {}): string {
  const r = spawnSync(command, args, { encoding: 'utf8', env: options.env ?? process.env, input: options.input, maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${r.status}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Unpacks the package's files (not its scripts) into a fresh directory, as dpkg would lay them out. */
export function unpack(arch: Arch): { root: string; app: string; remove(): void } {
  const root = mkdtempSync(join(tmpdir(), `outpost-pkg-${arch}-`));
  tool('dpkg-deb', ['-x', debFor(arch), root]);
  return { root, app: join(root, 'usr', 'lib', 'outpost'), remove: () => rmSync(root, { recursive: true, force: true }) };
}

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  // The machine's extra CA bundle costs every node start time; the daemon needs no outbound TLS here.
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.OUTPOST_CONFIG;
  delete env.NODE_OPTIONS;
  return env;
}

/** The command that runs the package's own node with these arguments (under QEMU for ARM). */
export function packagedNode(arch: Arch, app: string, args: string[]): [string, string[]] {
  const node = join(app, 'node', 'bin', 'node');
  const qemu = targetOf(arch).qemu;
  return qemu ? [qemu.binary, ['-L', qemu.sysroot, node, ...args]] : [node, args];
}

/** Runs the packaged `outpost` command line to completion. */
export function packagedCli(arch: Arch, app: string, args: string[]): string {
  const [command, argv] = packagedNode(arch, app, [join(app, 'dist', 'cli', 'main.js'), ...args]);
  return tool(command, argv, { env: childEnv({}) });
}

export interface PackagedDaemon {
  proc: ChildProcess;
  ports: { http: number; mqtt: number; gwmp: number };
  url: string;
  /** Milliseconds from spawning the process to its `ready` log line. */
  startToReadyMs: number;
  logs: string[];
  /** The resident and peak resident size of the process (for ARM: QEMU with the program in it), KiB. */
  memory(): { rssKiB: number; peakKiB: number };
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export async function startPackagedDaemon(arch: Arch, app: string, dataDir: string, readyTimeoutMs: number, args: string[] = []): Promise<PackagedDaemon> {
  const [command, argv] = packagedNode(arch, app, [join(app, 'dist', 'cli', 'main.js'), 'run', '--data', dataDir, ...args]);
  const spawnedAt = Date.now();
  const proc = spawn(command, argv, {
    cwd: app,
    env: childEnv({ OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0', OUTPOST_LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { logs, exited, ready: readyLine } = awaitReady(proc, `packaged daemon (${arch})`, readyTimeoutMs, () => proc.kill('SIGKILL'));
  const ready = await readyLine;
  const startToReadyMs = Date.now() - spawnedAt;
  return {
    proc,
    ports: { http: ready.ports.http ?? 0, mqtt: ready.ports.mqtt ?? 0, gwmp: ready.ports.gwmp ?? 0 },
    url: `http://127.0.0.1:${ready.ports.http}`,
    startToReadyMs,
    logs,
    memory() {
      const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
      const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
      return { rssKiB: field('VmRSS'), peakKiB: field('VmHWM') };
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}
