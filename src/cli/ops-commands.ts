import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { loadConfig, type ConfigSources } from '../core/config.js';
import { askDaemon } from '../ops/control.js';
import { runDoctor } from '../ops/doctor.js';
import { backupDatabase, BackupError, restoreDatabase } from '../ops/backup.js';
import type { DaemonStatus } from '../ops/status.js';
import { formatTable } from './table.js';

/** `outpost status | doctor | backup FILE | restore FILE` (docs/operations.md). */
export async function runOpsCommand(command: string, args: string[], write: (text: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      data: { type: 'string' },
      json: { type: 'boolean', default: false },
      yes: { type: 'boolean', default: false },
    },
  });
  const sources: ConfigSources = { file: values.config, dataDir: values.data };
  const json = values.json === true;
  const fail = (message: string, code = 1) => {
    process.stderr.write(`outpost ${command}: ${message}\n`);
    return code;
  };

  if (command === 'doctor') {
    const report = await runDoctor({ sources });
    if (json) write(JSON.stringify(report, null, 2));
    else {
      for (const f of report.findings) {
        write(`${f.ok ? 'ok  ' : 'FAIL'}  ${f.check.padEnd(8)}  ${f.message}`);
        if (f.fix) write(`${' '.repeat(16)}fix: ${f.fix}`);
      }
      write(report.ok ? '\nnothing needs attention' : `\n${report.findings.filter((f) => !f.ok).length} finding(s) need action`);
    }
    return report.ok ? 0 : 1;
  }

  const config = loadConfig(sources);

  if (command === 'status') {
    let status: DaemonStatus | undefined;
    try {
      status = await askDaemon<DaemonStatus>(config.dataDir, '/status');
    } catch (err) {
      return fail(`cannot ask the daemon of ${config.dataDir}: ${(err as Error).message} (run as the outpost user or root)`);
    }
    if (!status) return fail(`no daemon runs on ${config.dataDir}`);
    if (json) {
      write(JSON.stringify(status, null, 2));
      return 0;
    }
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
    write(formatTable(['', ''], rows).split('\n').slice(1).join('\n'));
    return 0;
  }

  const file = positionals[0];
  if (!file) return fail(`missing FILE: outpost ${command} FILE`, 2);
  const path = resolve(file);
  try {
    if (command === 'backup') {
      let lastShown = -1;
      const result = await backupDatabase(config.dataDir, path, ({ totalPages, remainingPages }) => {
        // One line per tenth on a pipe or in the journal; small databases finish before the first.
        const done = totalPages ? Math.floor(((totalPages - remainingPages) / totalPages) * 10) : 10;
        if (totalPages > 2048 && done !== lastShown) {
          lastShown = done;
          process.stderr.write(`backup: ${done * 10}% of ${totalPages} pages\n`);
        }
      });
      if (json) write(JSON.stringify(result));
      else write(`backup written to ${result.file} (${result.bytes} bytes, ${result.pages} pages, checked)`);
      return 0;
    }
    if (command === 'restore') {
      if (!values.yes && !json) {
        // Restoring replaces live data: say what will happen; --yes for scripts.
        process.stderr.write(`outpost restore: replacing the database of ${config.dataDir} with ${path} (the current one is kept beside it)\n`);
      }
      const result = await restoreDatabase(config.dataDir, path);
      if (json) write(JSON.stringify(result));
      else write(`restored ${result.restoredFrom} into ${result.database}${result.previous ? `; the previous database is kept as ${result.previous}` : ''}`);
      return 0;
    }
  } catch (err) {
    if (err instanceof BackupError) return fail(`${err.message} (${err.code})`);
    throw err;
  }
  return fail(`unknown command ${command}`, 2);
}
