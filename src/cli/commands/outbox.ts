import { parseTimestamp } from '../../core/time.js';
import type { Store } from '../../store/store.js';
import { managementArgs, runVerb, UsageError, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { openStore } from '../open.js';
import { formatTable } from '../table.js';

/** `outpost outbox status|purge` (docs/sync.md): the gateway's queue for the central; works while the daemon runs. */
export const command: CliCommand = {
  usage: [
    '  outbox status [--json]                            (gateway) link, depth, bytes, oldest, sent, dropped, rejected',
    '  outbox purge --before <ISO time> --yes            (gateway) drop queued states accepted before that time',
  ].join('\n'),
  run(args, argv, out) {
    const a = managementArgs(args, argv, out);
    const store = openStore(a.config);
    try {
      const verbs = { status: () => outboxStatus(a, store), purge: () => purgeOutbox(a, store) };
      return runVerb(a, verbs, `unknown command: outbox ${a.sub ?? ''}`);
    } finally {
      store.close();
    }
  },
};

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function outboxStatus({ config, show }: ManagementArgs, store: Store): number {
  const outbox = store.outbox;
  const totals = outbox.totals();
  const c = outbox.counters();
  // The daemon writes its link state every second; an older record means no daemon is running.
  const fresh = c.updatedAt !== null && Date.now() - c.updatedAt < 10_000;
  const link = !config.upstream.url ? 'off' : fresh ? c.link : 'down';
  const status = { link, depth: totals.depth, bytes: totals.bytes, oldestAt: iso(totals.oldestAt), sent: c.sent, dropped: c.dropped, rejected: c.rejected, setAside: c.setAside, lastAckAt: iso(c.lastAckAt) };
  show(status, () =>
    formatTable(
      ['LINK', 'DEPTH', 'BYTES', 'OLDEST', 'SENT', 'DROPPED', 'REJECTED', 'SET ASIDE', 'LAST ACK'],
      [[status.link, status.depth, status.bytes, status.oldestAt, status.sent, status.dropped, status.rejected, status.setAside, status.lastAckAt]],
    ),
  );
  return 0;
}

function purgeOutbox({ values, show }: ManagementArgs, store: Store): number {
  if (!values.before) throw new UsageError('missing --before <ISO time>');
  const before = parseTimestamp(values.before);
  if (before === undefined) throw new UsageError('--before must be an ISO 8601 time with a zone, e.g. 2026-11-21T00:00:00Z');
  if (!values.yes) throw new UsageError('purging drops queued states for good: add --yes');
  const outbox = store.outbox;
  const removed = store.transaction(() => {
    const r = outbox.dropStatesBefore(before);
    outbox.addCounts({ dropped: r.rows }, null);
    return r;
  });
  show({ purged: removed.rows, bytes: removed.bytes }, () => `${removed.rows} queued states (${removed.bytes} bytes) purged and counted as dropped`);
  return 0;
}
