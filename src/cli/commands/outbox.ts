import { parseTimestamp } from '../../core/time.js';
import { askDaemon } from '../../ops/control.js';
import type { DaemonStatus } from '../../ops/status.js';
import type { Store } from '../../store/store.js';
import { managementArgs, runVerb, UsageError, type ManagementArgs } from '../args.js';
import type { CliCommand } from '../command.js';
import { openStore } from '../open.js';
import { formatTable } from '../table.js';

/** `outpost outbox status|purge` (docs/sync.md): the gateway's queue for the central; works while the daemon runs. */
export const command: CliCommand = {
  usage: [
    '  outbox status [--json]                            (gateway) link, depth, bytes, oldest, sent, dropped, rejected (live from the daemon)',
    '  outbox purge --before <ISO time> --yes            (gateway) drop queued states accepted before that time',
  ].join('\n'),
  async run(args, argv, out) {
    const a = managementArgs(args, argv, out);
    const store = openStore(a.config);
    try {
      const verbs = { status: () => outboxStatus(a, store), purge: () => purgeOutbox(a, store) };
      return await runVerb(a, verbs, `unknown command: outbox ${a.sub ?? ''}`);
    } finally {
      store.close();
    }
  },
};

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** What `outbox status` prints; `from` says whose figures they are. */
interface OutboxStatusView {
  from: 'daemon' | 'database';
  link: string;
  depth: number;
  bytes: number;
  oldestAt: string | null;
  sent: number;
  dropped: number;
  rejected: number;
  setAside: number;
  lastAckAt: string | null;
}

/**
 * The running daemon's own figures when one runs on the data dir (asked over the control socket,
 * as `outpost status` does): its link state, and counters the database sees only up to a second
 * later. Without a daemon, the figures in the database, which are then final.
 */
async function outboxStatus({ config, show }: ManagementArgs, store: Store): Promise<number> {
  let live: DaemonStatus | undefined;
  try {
    live = await askDaemon<DaemonStatus>(config.dataDir, '/status');
  } catch {
    // Something holds the socket but does not answer us: report what the database says, and say so.
    live = undefined;
  }
  const upstream = live?.upstream as (Omit<OutboxStatusView, 'from'> & Record<string, unknown>) | null | undefined;
  let status: OutboxStatusView;
  if (upstream) {
    status = { from: 'daemon', link: upstream.link, depth: upstream.depth, bytes: upstream.bytes, oldestAt: upstream.oldestAt, sent: upstream.sent, dropped: upstream.dropped, rejected: upstream.rejected, setAside: upstream.setAside, lastAckAt: upstream.lastAckAt };
  } else {
    const totals = store.outbox.totals();
    const c = store.outbox.counters();
    // A daemon without an upstream has no link; without a daemon nothing sends at all.
    const link = live ? 'off' : 'down';
    status = { from: 'database', link, depth: totals.depth, bytes: totals.bytes, oldestAt: iso(totals.oldestAt), sent: c.sent, dropped: c.dropped, rejected: c.rejected, setAside: c.setAside, lastAckAt: iso(c.lastAckAt) };
  }
  const source = upstream
    ? `live from the daemon of ${config.dataDir} (pid ${live!.pid})`
    : live
      ? `the daemon of ${config.dataDir} runs without an upstream (no upstream.url in its config): figures from the database`
      : `no daemon runs on ${config.dataDir}: figures from the database`;
  show(status, () =>
    [
      formatTable(
        ['LINK', 'DEPTH', 'BYTES', 'OLDEST', 'SENT', 'DROPPED', 'REJECTED', 'SET ASIDE', 'LAST ACK'],
        [[status.link, status.depth, status.bytes, status.oldestAt, status.sent, status.dropped, status.rejected, status.setAside, status.lastAckAt]],
      ),
      source,
    ].join('\n'),
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
