// BENCH_ONLY=central, second table: reading a year of a fleet's history from PostgreSQL through a
// central node's HTTP API (docs/scale-out.md, "History in PostgreSQL"). PostgreSQL gets
// BENCH_HISTORY_ASSETS assets x BENCH_HISTORY_STATES states each, spread evenly over the last
// 375 days (so 13 monthly partitions), inserted with SQL; one of the assets is a real asset of the
// node. Then the node answers pages of that asset's history: the newest page, a month in the
// middle of the year, and pages walked with their cursors; latency per request, p50 and p99.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, cliJson, removeDir, startDaemon, tempDataDir } from '../test/helpers/daemon.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { CentralDatabase } from '../src/scale-out/postgres.js';
import { migratePostgres } from '../src/scale-out/schema.js';
import { StatePartitions } from '../src/scale-out/pg-partitions.js';
import type { BenchRow } from './lib.js';

const n = (name: string, def: number) => (process.env[name] ? Number(process.env[name]) : def);
const ASSETS = n('BENCH_HISTORY_ASSETS', 1000);
const STATES = n('BENCH_HISTORY_STATES', 3000);
const REQUESTS = n('BENCH_HISTORY_REQUESTS', 200);
const DAY = 86_400_000;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function timed(label: string, request: (i: number) => Promise<number>): Promise<BenchRow> {
  const ms: number[] = [];
  let states = 0;
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    states += await request(i);
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { name: label, 'p50 ms': percentile(ms, 50), 'p99 ms': percentile(ms, 99), 'states per request': Math.round(states / REQUESTS) };
}

export async function benchCentralHistory(): Promise<BenchRow[]> {
  const pg = await startPostgres();
  const dir = tempDataDir();
  try {
    const url = await pg.createDatabase();
    const name = url.split('/').pop()!;
    const db = new CentralDatabase(url);
    const now = Date.now();
    const first = now - 375 * DAY;
    const step = Math.floor((now - first) / STATES);
    try {
      await migratePostgres(db);
      const months: number[] = [];
      for (let at = first; at <= now + 31 * DAY; at += 15 * DAY) months.push(at);
      await new StatePartitions(db).ensureFor(months);
    } finally {
      await db.close();
    }
    // A year is kept: with the default limits.historyDays (30) the node's retention would drop the older months.
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ version: 1, limits: { historyDays: 400 } }));
    const node = await startDaemon({ dataDir: dir, args: ['--config', config], env: { OUTPOST_ROLE: 'central', OUTPOST_RATE_LIMIT: '0', OUTPOST_POSTGRES_URL: url } });
    try {
      const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'bench', '--scopes', 'read,admin'], dir).token;
      const device = (await api(node.url, 'POST', '/devices', { token: admin, json: { name: 'meter' } })).body as { id: string };
      const asset = (await api(node.url, 'POST', `/device/${device.id}/assets`, { token: admin, json: { name: 'power', is: 'sensor', profile: { type: 'number' } } })).body as { id: string };
      const started = performance.now();
      pg.psql(
        `INSERT INTO states (asset_id, at, value, value_md5, received_at, node)
         SELECT CASE WHEN a = 1 THEN '${asset.id}' ELSE 'asset-' || a END, ${first} + s::bigint * ${step}, (s % 997)::text, md5((s % 997)::text)::uuid, ${first} + s::bigint * ${step}, 'bench'
         FROM generate_series(1, ${STATES}) s, generate_series(1, ${ASSETS}) a`,
        name,
      );
      pg.psql('ANALYZE states', name);
      const seedSeconds = (performance.now() - started) / 1000;
      const rows = Number(pg.psql('SELECT count(*) FROM states', name));
      if (rows !== ASSETS * STATES) throw new Error(`${rows} rows in PostgreSQL, ${ASSETS * STATES} seeded: something pruned them`);
      const path = `/device/${device.id}/asset/power/states`;
      const page = async (query: string) => {
        const r = await api(node.url, 'GET', `${path}?${query}`, { token: admin });
        if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
        return r.body as { data: unknown[]; next: string | null };
      };
      // The client's kept-alive connection idled through the seeding and the node closed it: the
      // first request may meet the closed socket, so one warm-up is allowed to fail.
      await page('limit=1').catch(() => page('limit=1'));
      const out: BenchRow[] = [];
      out.push(await timed('newest page of 100', async () => (await page('limit=100')).data.length));
      const mid = first + 180 * DAY;
      out.push(
        await timed('one month in the middle of the year, page of 100', async (i) => {
          const from = mid + (i % 30) * DAY;
          return (await page(`limit=100&from=${new Date(from).toISOString()}&to=${new Date(from + 30 * DAY).toISOString()}`)).data.length;
        }),
      );
      // Cursors to walk from: the next of each of the first pages of 100.
      const cursors: string[] = [];
      let next: string | null = (await page('limit=100')).next;
      while (next && cursors.length < 25) {
        cursors.push(next);
        next = (await page(`limit=100&cursor=${next}`)).next;
      }
      out.push(await timed('a page of 100 after a cursor', async (i) => (await page(`limit=100&cursor=${cursors[i % cursors.length]}`)).data.length));
      out.push(await timed('a page of 1000', async () => (await page('limit=1000')).data.length));
      for (const row of out) Object.assign(row, { 'rows in PostgreSQL': rows, 'months': 13, 'seeded in s': Number(seedSeconds.toFixed(1)) });
      return out;
    } finally {
      await node.stop();
    }
  } finally {
    removeDir(dir);
    await pg.dispose();
  }
}
