import { loadConfig } from '../../core/config.js';
import { askDaemon } from '../../ops/control.js';
import type { DaemonStatus } from '../../ops/status.js';
import { opsArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { showFor } from '../output.js';
import { formatTable } from '../table.js';

/** `outpost status`: asks the running daemon over its control socket (docs/operations.md). */
export const command: CliCommand = {
  usage: '  status [--json]                                   ask the running daemon (version, uptime, counts, radio, upstream)',
  async run(args, _argv, write) {
    const { sources, json, fail } = opsArgs('status', args);
    const config = loadConfig(sources);
    let status: DaemonStatus | undefined;
    try {
      status = await askDaemon<DaemonStatus>(config.dataDir, '/status');
    } catch (err) {
      return fail(`cannot ask the daemon of ${config.dataDir}: ${(err as Error).message} (run as the outpost user or root)`);
    }
    if (!status) return fail(`no daemon runs on ${config.dataDir}`);
    showFor(json, write)(status, () => formatStatus(status));
    return 0;
  },
};

/** Two columns, name and value, without a header row. */
function formatStatus(status: DaemonStatus): string {
  const rows: Array<[string, string]> = [
    ['version', status.version],
    ['pid', String(status.pid)],
    ['uptime', `${status.uptimeSeconds} s`],
    ['data dir', status.dataDir],
    ['ports', Object.entries(status.ports).map(([k, v]) => `${k} ${v}`).join(', ')],
    ['devices', String(status.devices)],
    ['states', `${status.states.stored} stored, ${status.states.acceptedSinceStart} accepted and ${status.states.refusedSinceStart} refused since start`],
    ['last uplink', status.lastUplinkAt ?? 'none yet'],
    ['radio', status.radio === null ? 'not configured' : JSON.stringify(status.radio)],
    ['upstream', status.upstream === null ? 'not configured' : JSON.stringify(status.upstream)],
  ];
  return formatTable(['', ''], rows).split('\n').slice(1).join('\n');
}
