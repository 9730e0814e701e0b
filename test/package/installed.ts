// What the tests of the package installed with dpkg on this machine share: asking dpkg and the
// system about it, and running the installed `outpost` as its service user, the way an admin would
// without systemd (sudo -u outpost outpost run), on the package's configuration and data directory.
import { spawn, spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { tool } from './helpers.js';
import { awaitReady } from '../helpers/daemon.js';

/** dpkg's status of the outpost package ("install ok installed"), '' when dpkg does not know it. */
export const dpkgStatus = () => spawnSync('dpkg-query', ['-W', '-f', '${Status}', 'outpost'], { encoding: 'utf8' }).stdout;
/** The installed version, as dpkg records it. */
export const dpkgVersion = () => spawnSync('dpkg-query', ['-W', '-f', '${Version}', 'outpost'], { encoding: 'utf8' }).stdout;
export const userExists = () => spawnSync('getent', ['passwd', 'outpost']).status === 0;
export const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);
export const ownerOf = (path: string) => tool('stat', ['-c', '%U:%G', path]).trim();

/** The refusals every installing test starts with: it needs root, and installs and purges its own package. */
export function assertMachineIsFree(): string | undefined {
  if (process.getuid?.() !== 0) return 'installing a package needs root (CI runs as root)';
  if (dpkgStatus().includes('installed') || userExists()) return 'an outpost package or user already exists on this machine; this test installs and purges its own';
  return undefined;
}

/** `dpkg <args>`; its status and all it printed. */
export function dpkg(args: string[]): { status: number | null; output: string } {
  const r = spawnSync('dpkg', args, { encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

function serviceUser(): { uid: number; gid: number } {
  return { uid: Number(tool('id', ['-u', 'outpost'])), gid: Number(tool('id', ['-g', 'outpost'])) };
}

/** The environment of an admin's shell: nothing pointing the command at another configuration. */
function adminEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const name of ['OUTPOST_CONFIG', 'OUTPOST_DATA_DIR', 'NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS']) delete env[name];
  return env;
}

/** `outpost <args>` as the service user, with no flags pointing it anywhere; status and output. */
export function outpostAsService(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('/usr/bin/outpost', args, { env: adminEnv(), ...serviceUser(), encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface InstalledService {
  /** Where its HTTP API answers (any free port). */
  url: string;
  logs: string[];
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** `outpost run` of the installed package as the service user, on free ports; resolves once ready. */
export async function startInstalledService(): Promise<InstalledService> {
  const daemon = spawn('/usr/bin/outpost', ['run'], {
    ...serviceUser(),
    env: adminEnv({ OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { exited, ready, logs } = awaitReady(daemon, 'the installed service', 30_000, () => daemon.kill('SIGKILL'));
  const stop = async () => {
    if (daemon.exitCode === null && daemon.signalCode === null) daemon.kill('SIGTERM');
    return exited;
  };
  try {
    const line = await ready;
    return { url: `http://127.0.0.1:${line.ports.http}`, logs, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
