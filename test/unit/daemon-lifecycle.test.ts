// The generic daemon in-process, on a real data directory and real sockets: doors open in the
// order the composition lists them and close in reverse, a door that cannot open closes the ones
// already open (itself included) and frees the data directory, and /healthz merges the doors' sections.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { ConfigError, loadConfig } from '../../src/core/config.js';
import { systemClock } from '../../src/core/time.js';
import { createLogger } from '../../src/ops/logger.js';
import { Daemon } from '../../src/daemon.js';
import type { Door } from '../../src/doors/door.js';
import { listen } from '../../src/doors/listen.js';
import { Core } from '../../src/roles/core.js';
import { DataDirLockedError } from '../../src/store/data-dir.js';
import { removeDir, tempDataDir } from '../helpers/daemon.js';

/** A door with a real TCP listener that writes what happens to it into `log`. */
class TcpDoor implements Door {
  readonly server: Server = createServer((socket) => socket.end());
  constructor(
    readonly name: string,
    readonly log: string[],
    readonly port = 0,
    readonly section?: unknown,
    readonly problem?: string,
  ) {}
  async start(): Promise<Record<string, number>> {
    this.log.push(`start ${this.name}`);
    return { [this.name]: await listen(this.server, this.port, '127.0.0.1', { host: `${this.name}.host`, port: `${this.name}.port` }) };
  }
  async stop(): Promise<void> {
    this.log.push(`stop ${this.name}`);
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
  health?(): unknown;
  degradedBecause(): string | undefined {
    return this.problem;
  }
}

function withHealth(door: TcpDoor): TcpDoor {
  door.health = () => door.section;
  return door;
}

function openCore(dataDir: string): Core {
  return Core.open(loadConfig({ dataDir, env: {} }), createLogger('silent'), systemClock);
}

test('doors open in the listed order, report their ports, and close in reverse before the store closes', async () => {
  const dir = tempDataDir();
  try {
    const log: string[] = [];
    const daemon = new Daemon(openCore(dir), [new TcpDoor('first', log), new TcpDoor('second', log), new TcpDoor('third', log)]);
    const ports = (await daemon.start()) as Record<string, number>;
    assert.deepEqual(Object.keys(ports), ['first', 'second', 'third']);
    for (const port of Object.values(ports)) assert.ok(port > 0);
    assert.deepEqual((await daemon.status()).ports, ports);
    assert.ok(daemon.healthy());
    await daemon.stop();
    assert.deepEqual(log, ['start first', 'start second', 'start third', 'stop third', 'stop second', 'stop first']);
    assert.equal(daemon.healthy(), false, 'the store is closed');
    // The lock went with it: the data directory opens again.
    await openCore(dir).close();
  } finally {
    removeDir(dir);
  }
});

test('a door that cannot open closes the open ones and itself in reverse, names its key, and frees the data directory', async () => {
  const dir = tempDataDir();
  const taken = createServer();
  try {
    const takenPort = await listen(taken, 0, '127.0.0.1', { host: 'x', port: 'x' });
    const log: string[] = [];
    const first = new TcpDoor('first', log);
    const daemon = new Daemon(openCore(dir), [first, new TcpDoor('second', log, takenPort), new TcpDoor('third', log)]);
    // While it runs, a second daemon on the same directory is refused.
    assert.throws(() => openCore(dir), DataDirLockedError);
    await assert.rejects(daemon.start(), (err: unknown) => err instanceof ConfigError && err.message.includes(`config key second.port: port ${takenPort}`) && err.message.includes('EADDRINUSE'));
    assert.deepEqual(log, ['start first', 'start second', 'stop second', 'stop first']);
    assert.equal(first.server.listening, false, 'the door opened first is closed again');
    await openCore(dir).close();
  } finally {
    taken.close();
    removeDir(dir);
  }
});

test('/healthz carries each door section under its name, and a door that says so degrades it', async () => {
  const dir = tempDataDir();
  try {
    const log: string[] = [];
    const link = withHealth(new TcpDoor('link', log, 0, { link: 'down' }, 'link: down'));
    const radio = withHealth(new TcpDoor('radio', log, 0, { devices: 0 }));
    const daemon = new Daemon(openCore(dir), [link, new TcpDoor('plain', log), radio]);
    await daemon.start();
    try {
      const health = daemon.health();
      assert.equal(health.status, 'degraded');
      assert.equal(health.reason, 'link: down');
      assert.deepEqual(health.link, { link: 'down' });
      assert.deepEqual(health.radio, { devices: 0 });
      assert.equal('plain' in health, false, 'a door without health() has no section');
      assert.equal(health.role, 'gateway');
    } finally {
      await daemon.stop();
    }
  } finally {
    removeDir(dir);
  }
});
