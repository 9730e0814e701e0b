import { askDaemon } from './control.js';
import type { DaemonStatus } from './status.js';

/**
 * Whether a daemon runs on a data directory, for the tools that must know (restore refuses,
 * doctor accepts ports held by it). The daemon answers on its control socket.
 */
export async function daemonHolding(dataDir: string): Promise<{ pid?: number; status?: DaemonStatus } | undefined> {
  try {
    const status = await askDaemon<DaemonStatus>(dataDir, '/status');
    return status ? { pid: status.pid, status } : undefined;
  } catch {
    // Something listens but does not answer us (no permission, hung): assume a daemon, never the opposite.
    return {};
  }
}
