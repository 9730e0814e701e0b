// `POST /device/<id>/codec/try` runs in slices (docs/codecs.md): a slow JS codec tried on many kept
// uplinks must not freeze the daemon, and the list of tried uplinks stays within `http.pageBytes`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, provision, startDaemon, tempDataDir, removeDir, type RunningDaemon } from '../helpers/daemon.js';

const UPLINKS = 50;
/** A codec that takes about 80 ms of CPU per uplink (below the 100 ms limit of a JS codec call). */
const SLOW = 'function decodeUplink(input) { var end = Date.now() + 80; while (Date.now() < end) {} return { data: { size: input.bytes.length } }; }';
const FAST = 'function decodeUplink(input) { return { data: { size: input.bytes.length } }; }';

describe('codec try in slices', () => {
  let d: RunningDaemon;
  let configDir: string;
  let device: { id: string; token: string };
  let app: { token: string };

  before(async () => {
    configDir = tempDataDir();
    const config = join(configDir, 'config.json');
    // A small page budget so the list of tried uplinks is cut (each uplink below is ~700 bytes in the answer).
    writeFileSync(config, JSON.stringify({ http: { pageBytes: 16384 } }));
    d = await startDaemon({ args: ['--config', config] });
    ({ device, app } = provision(d.dataDir, [{ name: 'size', is: 'sensor', profile: { type: 'integer' } }]));
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script: FAST } } });
    assert.equal(set.status, 200, set.text);
    for (let i = 0; i < UPLINKS; i++) {
      const r = await api(d.url, 'PUT', `/device/${device.id}/state`, { token: device.token, body: Buffer.alloc(200, i), contentType: 'application/octet-stream' });
      assert.equal(r.status, 200, r.text);
    }
  });
  after(async () => {
    await d.stop();
    removeDir(configDir);
  });

  test(`${UPLINKS} uplinks with an 80 ms codec: /healthz answers within 500 ms all along; the answer is the same shape, its list cut at http.pageBytes`, async (t) => {
    const started = performance.now();
    const trying = api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: app.token, json: { script: SLOW, limit: UPLINKS } });
    let finished = false;
    void trying.finally(() => (finished = true));
    const latencies: number[] = [];
    // Run in one go the try blocks the daemon for 50 × 80 ms = 4 s.
    while (!finished) {
      const asked = performance.now();
      const health = await api(d.url, 'GET', '/healthz');
      latencies.push(performance.now() - asked);
      assert.equal(health.status, 200);
      await new Promise((r) => setTimeout(r, 20));
    }
    const r = await trying;
    const took = performance.now() - started;
    t.diagnostic(`try took ${Math.round(took)} ms; ${latencies.length} /healthz requests meanwhile, slowest ${Math.round(Math.max(...latencies))} ms`);
    assert.equal(r.status, 200, r.text);
    assert.ok(took > 3000, `the slow codec ran on every uplink (${Math.round(took)} ms)`);
    assert.ok(latencies.length >= 10, `${latencies.length} health checks while the try ran`);
    assert.ok(Math.max(...latencies) < 500, `slowest /healthz ${Math.round(Math.max(...latencies))} ms`);
    // Every uplink was tried; the list holds what fits in 16 KiB, the rest is counted.
    assert.deepEqual(r.body.summary, { same: UPLINKS, changed: 0, errors: 0 });
    assert.ok(r.body.uplinks.length > 0 && r.body.uplinks.length < UPLINKS, `${r.body.uplinks.length} uplinks listed`);
    assert.equal(r.body.uplinks.length + r.body.omitted, UPLINKS);
    assert.ok(Buffer.byteLength(JSON.stringify(r.body.uplinks)) <= 16384 + 100);
    const first = r.body.uplinks[0];
    assert.equal(first.payload, Buffer.alloc(200, UPLINKS - 1).toString('hex').toUpperCase(), 'newest first');
    assert.deepEqual(first.candidate.states.size.value, 200);
    assert.deepEqual(first.diff, { added: [], removed: [], changed: [], errors: [], refused: [] });
  });

  test('a codec changed while a try runs stops the try with 409 CODEC_CHANGED', async () => {
    const trying = api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: app.token, json: { script: SLOW, limit: UPLINKS } });
    await new Promise((r) => setTimeout(r, 500));
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script: `${FAST}\n// v2` } } });
    assert.equal(set.status, 200, set.text);
    const r = await trying;
    assert.equal(r.status, 409, r.text);
    assert.equal(r.body.code, 'CODEC_CHANGED');
    assert.match(r.body.error, /changed from .* to .* during the try/);
  });
});
