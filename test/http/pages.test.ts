// List pages are bounded in bytes, not only in rows (docs/api.md, "Pages"): a device token asking
// for its own uplinks or history of large values gets pages of about `http.pageBytes` and a cursor
// through all of them, and the daemon's memory stays where it was.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { api, provision, startDaemon, type RunningDaemon } from '../helpers/daemon.js';

const PAGE_BYTES = 1024 * 1024;
const LARGE = 60 * 1024;
const COUNT = 1000;

/** The daemon's resident memory, from the kernel. */
function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'))!;
  return Number(/(\d+)/.exec(line)![1]) * 1024;
}

/** Runs `work(i)` for i < count, `width` at a time. */
async function inParallel(count: number, width: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) await work(next++);
  }));
}

/** Follows `next` from the first page to the last; returns every page's size and rows. */
async function walk(d: RunningDaemon, token: string, path: string): Promise<{ pages: number; largest: number; rows: any[] }> {
  const rows: any[] = [];
  let pages = 0;
  let largest = 0;
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const r = await api(d.url, 'GET', cursor === null ? path : `${path}${sep}cursor=${encodeURIComponent(cursor)}`, { token });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    pages++;
    largest = Math.max(largest, Buffer.byteLength(r.text));
    assert.ok(r.body.data.length > 0, 'every page holds at least one row');
    rows.push(...r.body.data);
    cursor = r.body.next;
  } while (cursor !== null && pages < 10_000);
  return { pages, largest, rows };
}

describe('a device\'s asset list with large values is streamed', () => {
  let d: RunningDaemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d.stop();
  });

  test('1 024 assets holding 60 KB states each: GET /device/<id>/assets and /device/<id> answer every one, and the daemon\'s RSS stays moderate', async (t) => {
    const { device } = provision(d.dataDir);
    const value = 'v'.repeat(LARGE - 100);
    await inParallel(1024, 8, async (i) => {
      const r = await api(d.url, 'PUT', `/device/${device.id}/asset/a${i}/state`, { token: device.token, json: { value: `${i}:${value}` } }).catch(() => undefined);
      if (r?.status === 404) {
        // The device creates its own assets (as the cloud SDKs do), then sends the state.
        const created = await api(d.url, 'PUT', `/device/${device.id}/asset/a${i}`, { token: device.token, json: { is: 'sensor', profile: { type: 'string' } } });
        assert.ok(created.status === 201, created.text);
        const again = await api(d.url, 'PUT', `/device/${device.id}/asset/a${i}/state`, { token: device.token, json: { value: `${i}:${value}` } });
        assert.equal(again.status, 200, again.text);
      } else assert.equal(r?.status, 200, r?.text);
    });
    for (const path of [`/device/${device.id}/assets`, `/device/${device.id}`]) {
      const rssBefore = rssBytes(d.proc.pid!);
      const r = await api(d.url, 'GET', path, { token: device.token });
      const rssAfter = rssBytes(d.proc.pid!);
      assert.equal(r.status, 200);
      const assets = Array.isArray(r.body) ? r.body : r.body.assets;
      assert.equal(assets.length, 1024, 'every asset, with its state');
      assert.equal(new Set(assets.map((a: any) => a.state.value.split(':')[0])).size, 1024);
      if (!Array.isArray(r.body)) assert.equal(r.body.id, device.id);
      const grown = rssAfter - rssBefore;
      t.diagnostic(`${path}: ${Math.round(r.text.length / 1048576)} MB answer; daemon RSS ${Math.round(rssBefore / 1048576)} → ${Math.round(rssAfter / 1048576)} MB`);
      assert.ok(grown < 100 * 1024 * 1024, `${path}: daemon RSS grew by ${Math.round(grown / 1048576)} MB`);
    }
  });
});

describe('list pages bounded in bytes', () => {
  let d: RunningDaemon;
  let device: { id: string; token: string };

  before(async () => {
    d = await startDaemon();
    const { app, ...rest } = provision(d.dataDir, [{ name: 'note', is: 'sensor', profile: { type: 'string' } }]);
    device = rest.device;
    // A CBOR codec: the filler bytes below do not decode (422 at once), and each is kept as a raw uplink all the same.
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'cbor' } } });
    assert.equal(set.status, 200, set.text);
  });
  after(async () => {
    await d.stop();
  });

  test(`${COUNT} raw uplinks of 60 KB: each uplinks page stays near ${PAGE_BYTES} bytes, the cursor walks all of them, RSS stays moderate`, async (t) => {
    await inParallel(COUNT, 8, async (i) => {
      const body = Buffer.alloc(LARGE, 0xff);
      body.writeUInt16BE(i, 1);
      const r = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body, contentType: 'application/octet-stream' });
      assert.equal(r.body?.code, 'DECODE_FAILED', r.text);
    });
    const rssBefore = rssBytes(d.proc.pid!);
    // The old answer to this request was the whole `limit` at once: 1000 × 120 KB of hex.
    const { pages, largest, rows } = await walk(d, device.token, `/device/${device.id}/uplinks?limit=1000`);
    const rssAfter = rssBytes(d.proc.pid!);
    assert.equal(rows.length, COUNT, 'the cursor reaches every kept uplink');
    assert.equal(new Set(rows.map((u) => u.id)).size, COUNT, 'no uplink twice');
    for (let i = 1; i < rows.length; i++) assert.ok(rows[i].id < rows[i - 1].id, 'newest first across pages');
    assert.equal(rows[0].payload.length, 2 * LARGE);
    // One uplink is ~123 KB in the answer: a page holds 8 of them, never the old 120 MB.
    assert.ok(largest <= PAGE_BYTES + 2048, `largest page ${largest} bytes`);
    assert.ok(pages >= 100, `${pages} pages`);
    const grown = rssAfter - rssBefore;
    t.diagnostic(`${pages} pages, largest ${largest} bytes; daemon RSS ${Math.round(rssBefore / 1048576)} → ${Math.round(rssAfter / 1048576)} MB`);
    assert.ok(grown < 150 * 1024 * 1024, `daemon RSS grew by ${Math.round(grown / 1048576)} MB (${Math.round(rssBefore / 1048576)} → ${Math.round(rssAfter / 1048576)} MB)`);
    // A small `limit` still counts: the row limit and the byte budget both hold.
    const five = await api(d.url, 'GET', `/device/${device.id}/uplinks?limit=5`, { token: device.token });
    assert.equal(five.body.data.length, 5);
    assert.ok(five.body.next);
  });

  test('history of large string values: pages near the byte budget, the cursor walks all of them, RSS stays moderate', async (t) => {
    const value = 'x'.repeat(LARGE - 100);
    await inParallel(COUNT, 8, async (i) => {
      const at = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
      const r = await api(d.url, 'PUT', `/device/${device.id}/asset/note/state`, { token: device.token, json: { value: `${i}:${value}`, at } });
      assert.equal(r.status, 200, r.text);
    });
    const rssBefore = rssBytes(d.proc.pid!);
    const { pages, largest, rows } = await walk(d, device.token, `/device/${device.id}/asset/note/states?limit=1000&provenance=1`);
    const rssAfter = rssBytes(d.proc.pid!);
    assert.equal(rows.length, COUNT);
    assert.equal(new Set(rows.map((s) => s.value.split(':')[0])).size, COUNT, 'every state once');
    assert.equal(rows[0].value.split(':')[0], String(COUNT - 1), 'newest first');
    assert.ok(largest <= PAGE_BYTES + 1024, `largest page ${largest} bytes`);
    assert.ok(pages >= 50, `${pages} pages`);
    const grown = rssAfter - rssBefore;
    t.diagnostic(`${pages} pages, largest ${largest} bytes; daemon RSS ${Math.round(rssBefore / 1048576)} → ${Math.round(rssAfter / 1048576)} MB`);
    assert.ok(grown < 150 * 1024 * 1024, `daemon RSS grew by ${Math.round(grown / 1048576)} MB (${Math.round(rssBefore / 1048576)} → ${Math.round(rssAfter / 1048576)} MB)`);
  });
});
