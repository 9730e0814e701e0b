import type { OutpostConfig } from '../core/config.js';
import { parseTimestamp, systemClock } from '../core/time.js';
import { Store } from '../store/store.js';
import { Catalog } from '../store/catalog.js';
import { Registry } from '../registry/registry.js';
import { GatewayRegistry, gatewayView } from '../sync/central/gateway-registry.js';
import { formatTable } from './table.js';

export const SYNC_USAGE = `  gateway create --name N [--json]                  (central) a gateway and its token (shown once)
  gateway list [--json]                             (central)
  gateway delete <GatewayID>                        (central) revokes its token; its devices stay
  outbox status [--json]                            (gateway) link, depth, bytes, oldest, sent, dropped, rejected
  outbox purge --before <ISO time> --yes            (gateway) drop queued states accepted before that time`;

export interface SyncCommandArgs {
  command: string;
  sub: string | undefined;
  positionals: string[];
  values: { name?: string; before?: string; yes?: boolean };
  config: OutpostConfig;
  show: (data: unknown, human: () => string) => void;
  usage: (message: string) => Error;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function openStore(config: OutpostConfig): Store {
  return Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes });
}

/** `outpost gateway …` and `outpost outbox …` (docs/sync.md); they work while the daemon runs. */
export function runSyncCommand(a: SyncCommandArgs): number {
  const store = openStore(a.config);
  try {
    return a.command === 'gateway' ? gatewayCommand(a, store) : outboxCommand(a, store);
  } finally {
    store.close();
  }
}

function gatewayCommand(a: SyncCommandArgs, store: Store): number {
  // Works on any data directory; only a daemon with role "central" lets gateways connect.
  const catalog = new Catalog(store);
  const gateways = new GatewayRegistry(catalog, new Registry(catalog, systemClock, a.config.limits), systemClock);
  switch (a.sub) {
    case 'create': {
      const { gateway, token } = gateways.create({ name: a.values.name ?? 'gateway' });
      a.show({ id: gateway.id, token }, () => `gateway ${gateway.id} created\ntoken: ${token}\n(the token is shown only now; put both in the gateway's upstream config)`);
      return 0;
    }
    case 'list': {
      // Whether a gateway is connected only the running daemon knows (GET /gateways); lastSeen is on disk.
      const list = gateways.store.list().map((g) => gatewayView(g, gateways.store.deviceIds(g.id), false));
      a.show(
        list.map(({ connected: _c, ...rest }) => rest),
        () => formatTable(['ID', 'NAME', 'DEVICES', 'LAST SEEN'], list.map((g) => [g.id, g.name, g.devices.length, g.lastSeen])),
      );
      return 0;
    }
    case 'delete': {
      const id = a.positionals[1];
      if (!id) throw a.usage('missing <GatewayID>');
      gateways.delete(id);
      a.show({ deleted: id }, () => `gateway ${id} deleted (its token is revoked; its devices stay)`);
      return 0;
    }
    default:
      throw a.usage(`unknown command: gateway ${a.sub ?? ''}`);
  }
}

function outboxCommand(a: SyncCommandArgs, store: Store): number {
  const outbox = store.outbox;
  switch (a.sub) {
    case 'status': {
      const totals = outbox.totals();
      const c = outbox.counters();
      // The daemon writes its link state every second; an older record means no daemon is running.
      const fresh = c.updatedAt !== null && Date.now() - c.updatedAt < 10_000;
      const link = !a.config.upstream.url ? 'off' : fresh ? c.link : 'down';
      const status = { link, depth: totals.depth, bytes: totals.bytes, oldestAt: iso(totals.oldestAt), sent: c.sent, dropped: c.dropped, rejected: c.rejected, lastAckAt: iso(c.lastAckAt) };
      a.show(status, () => formatTable(['LINK', 'DEPTH', 'BYTES', 'OLDEST', 'SENT', 'DROPPED', 'REJECTED', 'LAST ACK'], [[status.link, status.depth, status.bytes, status.oldestAt, status.sent, status.dropped, status.rejected, status.lastAckAt]]));
      return 0;
    }
    case 'purge': {
      if (!a.values.before) throw a.usage('missing --before <ISO time>');
      const before = parseTimestamp(a.values.before);
      if (before === undefined) throw a.usage('--before must be an ISO 8601 time with a zone, e.g. 2026-11-21T00:00:00Z');
      if (!a.values.yes) throw a.usage('purging drops queued states for good: add --yes');
      const removed = store.transaction(() => {
        const r = outbox.dropStatesBefore(before);
        outbox.addCounts({ dropped: r.rows }, null);
        return r;
      });
      a.show({ purged: removed.rows, bytes: removed.bytes }, () => `${removed.rows} queued states (${removed.bytes} bytes) purged and counted as dropped`);
      return 0;
    }
    default:
      throw a.usage(`unknown command: outbox ${a.sub ?? ''}`);
  }
}
