import { existsSync } from 'node:fs';
import { DataDirLock } from '../store/data-dir.js';
import { askDaemon } from './control.js';
import type { DaemonStatus } from './status.js';

/**
 * Whether a daemon runs on a data directory, for the tools that must know (restore refuses,
 * doctor accepts ports held by it). The daemon answers on its control socket; a daemon that does
 * not (control socket unavailable, still starting) is still found by the data dir's OS lock.
 */
export async function daemonHolding(dataDir: string): Promise<{ pid?: number; status?: DaemonStatus } | undefined> {
  try {
    const status = await askDaemon<DaemonStatus>(dataDir, '/status');
    if (status) return { pid: status.pid, status };
  } catch {
    // Something listens but does not answer us (no permission, hung): assume a daemon, never the opposite.
    return {};
  }
  if (!existsSync(dataDir)) return undefined;
  try {
    const lock = DataDirLock.probe(dataDir);
    return lock.locked ? { pid: lock.pid } : undefined;
  } catch {
    // The lock file cannot be opened (a read-only data dir): the socket said no daemon; go with that.
    return undefined;
  }
}
