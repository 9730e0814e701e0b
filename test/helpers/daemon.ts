// Starts the compiled daemon (dist/, built by `npm test` before the tests run) as a child process
// on free ports with a temporary data dir, the way a user runs it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CLI = join(ROOT, 'dist', 'cli', 'main.js');

export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'outpost-test-'));
}

function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, OUTPOST_LOG_LEVEL: 'info', ...extra };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.OUTPOST_CONFIG;
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete env[k];
  return env;
}

export interface RunningDaemon {
  proc: ChildProcess;
  dataDir: string;
  httpPort: number;
  mqttPort: number;
  /** UDP port of the packet forwarder door. */
  gwmpPort: number;
  /** TCP port of the Basics Station door (0 when it is off). */
  basicStationPort: number;
  url: string;
  /** Every stdout line so far (pino JSON). */
  logs: string[];
  /** SIGTERM (or the given signal) and the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

export interface StartOptions {
  dataDir?: string;
  env?: Record<string, string | undefined>;
  args?: string[];
  /** Another program than this checkout's dist/cli/main.js (an installed release), and its working directory. */
  program?: string;
  cwd?: string;
}

export interface ReadyWait {
  /** Every stdout line so far (the daemon logs JSON lines). */
  logs: string[];
  /** Resolves with the exit code when the process ends. */
  exited: Promise<number | null>;
  /** The daemon's ready line (it carries the bound ports); rejects on a timeout or an exit before it, with the output. */
  ready: Promise<{ ports: Record<string, number> }>;
}

/**
 * Collects a started daemon's output and waits for its `"msg":"ready"` line: the one place the tests
 * (this checkout's daemon, an installed release, a packaged one under QEMU) know what "ready" looks like.
 * `onTimeout` runs before the rejection (a packaged daemon is killed so QEMU does not linger).
 */
export function awaitReady(proc: ChildProcess, what: string, timeoutMs: number, onTimeout?: () => void): ReadyWait {
  const logs: string[] = [];
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const ready = new Promise<{ ports: Record<string, number> }>((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => {
      onTimeout?.();
      reject(new Error(`${what} not ready in ${timeoutMs} ms\n${logs.join('\n')}\n${stderr}`));
    }, timeoutMs);
    proc.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        logs.push(line);
        if (line.includes('"msg":"ready"')) {
          clearTimeout(timer);
          resolve(JSON.parse(line));
        }
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before ready\n${logs.join('\n')}\n${stderr}`));
    });
  });
  return { logs, exited, ready };
}

/** How long `stop` waits for the daemon to exit before it kills it and fails. */
const STOP_TIMEOUT_MS = 30_000;

export async function startDaemon(options: StartOptions = {}): Promise<RunningDaemon> {
  const dataDir = options.dataDir ?? tempDataDir();
  const proc = spawn(process.execPath, [options.program ?? CLI, 'run', '--data', dataDir, ...(options.args ?? [])], {
    cwd: options.cwd ?? ROOT,
    env: childEnv({ OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0', ...options.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { logs, exited, ready: readyLine } = awaitReady(proc, 'daemon', 15_000);
  const ready = await readyLine;
  const httpPort = ready.ports.http ?? 0;
  return {
    proc,
    dataDir,
    httpPort,
    mqttPort: ready.ports.mqtt ?? 0,
    gwmpPort: ready.ports.gwmp ?? 0,
    basicStationPort: ready.ports.basicStation ?? 0,
    url: `http://127.0.0.1:${httpPort}`,
    logs,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      // A daemon that does not exit would hang the whole test run without a word (systemd stops
      // waiting too: TimeoutStopSec). It fails the test instead, with what the daemon said last.
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), STOP_TIMEOUT_MS)));
      const outcome = await Promise.race([exited, late]);
      clearTimeout(timer);
      if (outcome !== 'late') return outcome;
      proc.kill('SIGKILL');
      await exited;
      throw new Error(`daemon did not exit within ${STOP_TIMEOUT_MS / 1000} s of ${signal}; its last log lines:\n${logs.slice(-40).join('\n')}`);
    },
  };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function cli(args: string[], env: Record<string, string | undefined> = {}): CliResult {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env: childEnv(env), encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Runs a CLI command with `--json` and parses its output; fails loudly on a non-zero exit. `env`
 * carries settings the daemon of that data directory has from its environment (a central node's
 * OUTPOST_POSTGRES_URL: its catalog writes go to PostgreSQL, docs/scale-out.md).
 */
export function cliJson<T = Record<string, unknown>>(args: string[], dataDir: string, env: Record<string, string | undefined> = {}): T {
  const r = cli([...args, '--json', '--data', dataDir], env);
  if (r.code !== 0) throw new Error(`outpost ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** fetch with a bearer token and an optional JSON body. */
export async function api(
  base: string,
  method: string,
  path: string,
  options: { token?: string; json?: unknown; body?: BodyInit; contentType?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
  }
  if (options.contentType) headers['content-type'] = options.contentType;
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** A device with a token, an app token with every scope, created through the CLI on the daemon's data dir. */
export function provision(dataDir: string, assets: Array<{ name: string; is: string; profile: unknown }> = []) {
  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'test-device'], dataDir);
  for (const a of assets) {
    cliJson(['asset', 'create', device.id, '--name', a.name, '--is', a.is, '--profile', JSON.stringify(a.profile)], dataDir);
  }
  const app = cliJson<{ id: string; token: string }>(['token', 'create', '--name', 'test-app', '--scopes', 'read,command,admin'], dataDir);
  return { device, app };
}
