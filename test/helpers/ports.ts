// Loopback ports for the servers tests start: a free one to give them, and the wait until they listen.
import { createServer, connect } from 'node:net';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Resolves once `port` accepts TCP connections; rejects after `timeoutMs`, or at once when
 * `exited()` says the server process is gone (its own error is then on stderr).
 */
export async function untilListening(port: number, what: string, options: { timeoutMs?: number; exited?: () => boolean } = {}): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  while (!(await accepts(port))) {
    if (options.exited?.()) throw new Error(`${what} exited before it listened on ${port}`);
    if (Date.now() > deadline) throw new Error(`${what} did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
