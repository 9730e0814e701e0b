import { runDoctor } from '../../ops/doctor.js';
import { opsArgs } from '../args.js';
import type { CliCommand } from '../command.js';

/** `outpost doctor`: checks what a running gateway needs; exit 1 when something needs action (docs/operations.md). */
export const command: CliCommand = {
  usage: '  doctor [--json]                                   check config, ports, data dir, database, disk, radio, upstream, clock',
  async run(args, _argv, write) {
    // The configuration is one of the checks: doctor reports a bad one rather than failing on it.
    const { sources, json } = opsArgs('doctor', args);
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
  },
};
