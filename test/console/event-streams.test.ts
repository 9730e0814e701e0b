// `GET /events` slots (docs/security.md): one device token cannot hold every live-stream slot, device
// tokens together leave the slots reserved for application tokens, and the console (an app token)
// still gets a stream. Real HTTP connections against the real daemon.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/core/config.js';
import { cliJson, provision, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';

interface OpenStream {
  status: number;
  body: string;
  req: ClientRequest;
  res: IncomingMessage;
}

/** Opens `GET /events` on its own TCP connection; resolves with the status once headers (and, for a refusal, the body) are in. */
function openStream(d: RunningDaemon, token: string, query: string): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = request(`${d.url}/events${query}`, { headers: { authorization: `Bearer ${token}` }, agent: false }, (res) => {
      if (res.statusCode === 200) {
        // The first bytes of a stream (`retry:`) arrive at once: the slot is taken by then.
        res.once('data', (chunk: Buffer) => resolve({ status: 200, body: chunk.toString(), req, res }));
        return;
      }
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body, req, res }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('live event stream slots', () => {
  let d: RunningDaemon;
  let app: { token: string };
  const open: OpenStream[] = [];

  before(async () => {
    d = await startDaemon();
    app = provision(d.dataDir).app;
  });
  after(async () => {
    for (const s of open) s.req.destroy();
    await d.stop();
  });

  test('one device token gets 4 streams, not 32; device tokens together leave 8 for the console', async () => {
    // Seven devices: 7 × 4 = 28 streams would take every slot but four.
    const devices = Array.from({ length: 7 }, (_, i) => cliJson<{ id: string; token: string }>(['device', 'create', '--name', `streamer${i}`], d.dataDir));
    const first = devices[0]!;
    for (let i = 0; i < 4; i++) {
      const s = await openStream(d, first.token, `?device=${first.id}`);
      assert.equal(s.status, 200, s.body);
      assert.match(s.body, /^retry: /);
      open.push(s);
    }
    const fifth = await openStream(d, first.token, `?device=${first.id}`);
    assert.equal(fifth.status, 429);
    assert.equal(fifth.res.headers['retry-after'], '5');
    const refusal = JSON.parse(fifth.body);
    assert.equal(refusal.code, 'RATE_LIMITED');
    assert.match(refusal.error, /holds 4 event streams already.*http\.eventStreams\.perPrincipal/);

    // Five more devices fill the 24 slots device tokens may hold together.
    for (const device of devices.slice(1, 6)) {
      for (let i = 0; i < 4; i++) {
        const s = await openStream(d, device.token, `?device=${device.id}`);
        assert.equal(s.status, 200, `${device.id} stream ${i}: ${s.body}`);
        open.push(s);
      }
    }
    const seventh = devices[6]!;
    const refused = await openStream(d, seventh.token, `?device=${seventh.id}`);
    assert.equal(refused.status, 429);
    assert.match(JSON.parse(refused.body).error, /kept for application tokens.*reservedForApps/);

    // The console still gets its stream, and it carries events.
    const consoleStream = await openStream(d, app.token, '');
    assert.equal(consoleStream.status, 200, consoleStream.body);
    open.push(consoleStream);

    // A closed stream gives its slot back to its device.
    open[0]!.req.destroy();
    open.shift();
    let again: OpenStream | undefined;
    for (let i = 0; i < 50; i++) {
      again = await openStream(d, first.token, `?device=${first.id}`);
      if (again.status === 200) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(again!.status, 200, 'the device may open a stream again once one of its own closed');
    open.push(again!);
  });

  test('an application token is held to the per-principal limit too; the total is 32', async () => {
    // The console's token holds one (above); three more, then the fifth is refused for this token.
    const extra: OpenStream[] = [];
    for (let i = 0; i < 3; i++) extra.push(await openStream(d, app.token, ''));
    assert.deepEqual(extra.map((s) => s.status), [200, 200, 200]);
    open.push(...extra);
    assert.equal((await openStream(d, app.token, '')).status, 429);
    // Another app token takes the last free slots, up to 32 streams in all.
    const other = cliJson<{ token: string }>(['token', 'create', '--name', 'second-console', '--scopes', 'read'], d.dataDir);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await openStream(d, other.token, '');
      statuses.push(s.status);
      if (s.status === 200) open.push(s);
    }
    // 24 device streams + 4 + 4 app streams = 32: every slot is in use.
    assert.deepEqual(statuses, [200, 200, 200, 200]);
    const third = cliJson<{ token: string }>(['token', 'create', '--name', 'third-console', '--scopes', 'read'], d.dataDir);
    const full = await openStream(d, third.token, '');
    assert.equal(full.status, 429);
    assert.match(JSON.parse(full.body).error, /serves 32 event streams already/);
  });
});

test('http.eventStreams is checked across its keys: a clear error names the key and the rule', () => {
  const dir = tempDataDir();
  const load = (eventStreams: Record<string, number>) => () => {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ http: { eventStreams } }));
    return loadConfig({ file, env: {} });
  };
  assert.throws(load({ max: 4, perPrincipal: 5, reservedForApps: 1 }), (e: unknown) => e instanceof ConfigError && /http\.eventStreams\.perPrincipal: must not be above http\.eventStreams\.max/.test(e.message));
  assert.throws(load({ max: 4, perPrincipal: 2, reservedForApps: 4 }), (e: unknown) => e instanceof ConfigError && /http\.eventStreams\.reservedForApps: must be below/.test(e.message));
  assert.throws(load({ max: 0, perPrincipal: 1, reservedForApps: 0 }), ConfigError);
  assert.deepEqual(load({ max: 8, perPrincipal: 2, reservedForApps: 2 })().http.eventStreams, { max: 8, perPrincipal: 2, reservedForApps: 2 });
  removeDir(dir);
});
