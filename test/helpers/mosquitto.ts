// Debian mosquitto as a real foreign upstream for sync tests: a generated config on a free loopback
// port, persistence in a temp dir (so a subscriber's session and queue survive a restart).
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort, untilListening } from './ports.js';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export { freePort } from './ports.js';

export interface Mosquitto {
  port: number;
  url: string;
  start(): Promise<void>;
  /** SIGTERM (persistence is written) and wait for the exit. */
  stop(): Promise<void>;
  /** Stops and removes the temp dir. */
  dispose(): Promise<void>;
}

/** `persistence: false` (the benchmarks): nothing is written to disk, as in mosquitto's own default. */
export async function mosquitto(options: { port?: number; persistence?: boolean } = {}): Promise<Mosquitto> {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-mosquitto-'));
  const port = options.port ?? (await freePort());
  const conf = join(dir, 'mosquitto.conf');
  writeFileSync(
    conf,
    [
      `listener ${port} 127.0.0.1`,
      'allow_anonymous true',
      ...(options.persistence === false ? ['persistence false'] : ['persistence true', `persistence_location ${dir}/`]),
      'max_queued_messages 0',
      'max_inflight_messages 0',
      // Started as root, mosquitto would switch to the `mosquitto` user and could not write its persistence here.
      `user ${userInfo().username}`,
      'log_type error',
      '',
    ].join('\n'),
  );
  let proc: ChildProcess | undefined;
  const api: Mosquitto = {
    port,
    url: `mqtt://127.0.0.1:${port}`,
    async start() {
      proc = spawn(existsSync('/usr/sbin/mosquitto') ? '/usr/sbin/mosquitto' : 'mosquitto', ['-c', conf], { stdio: ['ignore', 'ignore', 'inherit'] });
      const started = proc;
      await untilListening(port, 'mosquitto', { exited: () => started.exitCode !== null });
    },
    async stop() {
      const p = proc;
      proc = undefined;
      if (!p || p.exitCode !== null) return;
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await exited;
    },
    async dispose() {
      await api.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return api;
}
