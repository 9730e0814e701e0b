import type { AddressInfo, Server } from 'node:net';
import { bindError, type ListenerKeys } from './bind-errors.js';

/**
 * Opens a door's listener and resolves with the port it got (port 0 picks a free one). A failure
 * that is about the address (in use, no permission, not this machine's) rejects with a ConfigError
 * naming `keys`, so the daemon exits with the config exit code and the admin knows what to change.
 */
export function listen(server: Server, port: number, host: string, keys: ListenerKeys): Promise<number> {
  return new Promise((resolve, reject) => {
    const failed = (err: Error) => reject(bindError(err, keys, host, port) ?? err);
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
