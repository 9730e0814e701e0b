// A throw-away PostgreSQL (Debian's postgresql package) for the scale-out tests: initdb into a temp
// dir under /tmp (the `postgres` user must be able to traverse it; initdb and postgres refuse to
// run as root), listening on 127.0.0.1 and a free port, trust authentication, no fsync (a test
// cluster, thrown away after). One per test file: start it once, make databases per test.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './mosquitto.js';

const BIN = '/usr/lib/postgresql/15/bin';

export interface TestPostgres {
  port: number;
  /** The URL of database `name` (default: postgres). */
  url(name?: string): string;
  /** A new empty database with a unique name; its URL. */
  createDatabase(): Promise<string>;
  /** SQL through psql (no pg client needed in the helper). */
  psql(sql: string, database?: string): string;
  /** `pg_ctl stop -m fast` (or `immediate`: a crash); start() again later on the same data. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  dispose(): Promise<void>;
}

function runAs(args: string[], asPostgres: boolean): string[] {
  return asPostgres ? ['runuser', '-u', 'postgres', '--', ...args] : args;
}

export async function startPostgres(): Promise<TestPostgres> {
  if (!existsSync(join(BIN, 'initdb'))) throw new Error('PostgreSQL 15 is not installed (apt-get install -y postgresql)');
  const asPostgres = userInfo().uid === 0;
  const dir = mkdtempSync('/tmp/outpost-pg-');
  const data = join(dir, 'data');
  if (asPostgres) chownSync(dir, Number(spawnSync('id', ['-u', 'postgres']).stdout.toString().trim()), Number(spawnSync('id', ['-g', 'postgres']).stdout.toString().trim()));
  const initdb = runAs([join(BIN, 'initdb'), '-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'], asPostgres);
  const init = spawnSync(initdb[0]!, initdb.slice(1), { encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  let proc: ChildProcess | undefined;
  let databases = 0;
  const api: TestPostgres = {
    port,
    url: (name = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${name}`,
    async createDatabase() {
      const name = `outpost_${process.pid}_${++databases}`;
      api.psql(`CREATE DATABASE ${name}`);
      return api.url(name);
    },
    psql(sql, database = 'postgres') {
      const r = spawnSync('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', database, '-v', 'ON_ERROR_STOP=1', '-At', '-c', sql], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`);
      return r.stdout.trim();
    },
    async start() {
      const args = runAs([join(BIN, 'postgres'), '-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'], asPostgres);
      proc = spawn(args[0]!, args.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
      let log = '';
      proc.stderr!.on('data', (d) => (log = (log + d.toString()).slice(-4000)));
      const deadline = Date.now() + 20_000;
      for (;;) {
        const ready = spawnSync(join(BIN, 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-q']);
        if (ready.status === 0) break;
        if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`postgres did not start: ${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(mode = 'fast') {
      const p = proc;
      proc = undefined;
      if (!p || p.exitCode !== null) return;
      const exited = new Promise((r) => p.once('exit', r));
      const args = runAs([join(BIN, 'pg_ctl'), 'stop', '-D', data, '-m', mode, '-w'], asPostgres);
      spawnSync(args[0]!, args.slice(1), { stdio: 'ignore' });
      await exited;
    },
    async dispose() {
      await api.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await api.start();
  return api;
}
