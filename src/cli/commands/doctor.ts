import { runDoctor, type DoctorReport } from '../../ops/doctor.js';
import { showFor } from '../output.js';
import { opsArgs } from '../args.js';
import type { CliCommand } from '../command.js';

/** `outpost doctor`: checks what a running gateway needs; exit 1 when something needs action (docs/operations.md). */
export const command: CliCommand = {
  usage: '  doctor [--json]                                   check config, release files, ports, data dir, database, disk, radio, upstream, clock',
  async run(args, _argv, write) {
    // The configuration is one of the checks: doctor reports a bad one rather than failing on it.
    const { sources, json } = opsArgs('doctor', args);
    const report = await runDoctor({ sources });
    showFor(json, write)(report, () => formatReport(report));
    return report.ok ? 0 : 1;
  },
};

/** One line per check (and its fix when it failed), then the verdict. */
function formatReport(report: DoctorReport): string {
  const lines: string[] = [];
  for (const f of report.findings) {
    lines.push(`${f.ok ? 'ok  ' : 'FAIL'}  ${f.check.padEnd(8)}  ${f.message}`);
    if (f.fix) lines.push(`${' '.repeat(16)}fix: ${f.fix}`);
  }
  lines.push(report.ok ? '\nnothing needs attention' : `\n${report.findings.filter((f) => !f.ok).length} finding(s) need action`);
  return lines.join('\n');
}
