// A throw-away redis-server (Debian's redis-server package): loopback, a free port, nothing saved.
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort, untilListening } from './ports.js';

export interface TestRedis {
  port: number;
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  let proc: ChildProcess | undefined;
  const api: TestRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], { stdio: 'ignore' });
      const started = proc;
      await untilListening(port, 'redis-server', { exited: () => started.exitCode !== null });
    },
    async stop() {
      const p = proc;
      proc = undefined;
      if (!p || p.exitCode !== null) return;
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await exited;
    },
  };
  await api.start();
  return api;
}
