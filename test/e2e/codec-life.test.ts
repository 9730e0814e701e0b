// Codec changes without fear, end to end against the compiled daemon: try a fixed codec on the
// kept raw uplinks, re-decode history with it, and kill -9 the daemon in the middle of a large
// re-decode. Real MQTT clients, the real SQLite file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from '../helpers/sqlite.js';
import { Store } from '../../src/store/store.js';
import { api, cli, cliJson, provision, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient } from '../mqtt/helpers.js';

/** A 2-byte signed temperature in tenths of a degree: the wrong codec divides by 100. */
const doc = (divisor: number) => ({ sense: [{ asset: 'temperature', value: { byte: 0, bytelength: 2, type: 'int', calculation: `val / ${divisor}` } }] });
const WRONG = { uplink: { format: 'abcl', document: doc(100) } };
const FIXED = { uplink: { format: 'abcl', document: doc(10) } };
const frame = (tenths: number) => Buffer.from([(tenths >> 8) & 0xff, tenths & 0xff]);
const ASSETS = [
  { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
  { name: 'label', is: 'sensor', profile: { type: 'string' } },
];

async function waitForJob(d: RunningDaemon, deviceId: string, token: string, until: (job: any) => boolean, timeoutMs = 120_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api(d.url, 'GET', `/device/${deviceId}/redecode`, { token });
    if (res.status === 200 && until(res.body)) return res.body;
    if (Date.now() > deadline) throw new Error(`redecode did not reach the expected state: ${res.text}`);
    await sleep(50);
  }
}

async function allStates(d: RunningDaemon, deviceId: string, asset: string, token: string): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const res = await api(d.url, 'GET', `/device/${deviceId}/asset/${asset}/states?provenance=1&limit=1000${cursor ? `&cursor=${cursor}` : ''}`, { token });
    assert.equal(res.status, 200, res.text);
    out.push(...res.body.data);
    cursor = res.body.next;
  } while (cursor);
  return out;
}

test('try reports the 50 values a fixed codec changes; redecode fixes history, the latest state and the feed, and leaves JSON states alone', async () => {
  const d = await startDaemon();
  try {
    const { device, app } = provision(d.dataDir, ASSETS);
    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: WRONG })).status, 200);
    // JSON states of the same device: one older temperature, one label.
    const json = await api(d.url, 'PUT', `/device/${device.id}/state`, {
      token: device.token,
      json: { temperature: { value: -40, at: '2020-01-01T00:00:00.000Z' }, label: { value: 'boiler room' } },
    });
    assert.equal(json.status, 200, json.text);

    const sensor = await connectClient(d.mqttPort, device.token);
    for (let i = 0; i < 50; i++) await sensor.client.publishAsync(`device/${device.id}/state`, frame(200 + i), { qos: 1 });
    const before = await allStates(d, device.id, 'temperature', app.token);
    assert.equal(before.length, 51);
    assert.ok(before.filter((s) => s.uplink !== null).every((s) => s.value < 2.5), 'the wrong codec stored values 10 times too small');

    // Bad candidates: every problem listed; a looping script stopped by the sandbox, per uplink.
    const invalid = await api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: app.token, json: { uplink: { format: 'abcl', document: { sense: [{ value: {} }] } } } });
    assert.equal(invalid.status, 422, invalid.text);
    assert.equal(invalid.body.code, 'CODEC_INVALID');
    assert.ok(Array.isArray(invalid.body.errors) && invalid.body.errors.length > 0, invalid.text);
    const looping = await api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: app.token, json: { script: 'function decodeUplink(input) { for (;;) {} }', limit: 3 } });
    assert.equal(looping.status, 200, looping.text);
    assert.deepEqual(looping.body.summary, { same: 0, changed: 0, errors: 3 });
    assert.ok(looping.body.uplinks.every((u: any) => u.candidate.errors.length > 0), looping.text);
    const refusing = await api(d.url, 'POST', `/device/${device.id}/codec/try`, {
      token: app.token,
      json: { script: "function decodeUplink(input) { return { data: { temperature: 'warm', humidity: 3 } }; }", limit: 1 },
    });
    assert.deepEqual(refusing.body.uplinks[0].diff.refused.map((r: any) => r.code).sort(), ['ASSET_NOT_FOUND', 'PROFILE_MISMATCH']);
    const forbidden = await api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: device.token, json: FIXED });
    assert.equal(forbidden.status, 403);

    // Try the fix: nothing stored, 50 changed values.
    const tried = await api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: app.token, json: FIXED });
    assert.equal(tried.status, 200, tried.text);
    assert.deepEqual(tried.body.summary, { same: 0, changed: 50, errors: 0 });
    for (const u of tried.body.uplinks) {
      assert.equal(u.diff.changed.length, 1);
      assert.equal(u.diff.changed[0].asset, 'temperature');
      assert.ok(Math.abs(u.diff.changed[0].candidate.value - u.diff.changed[0].current.value * 10) < 1e-9, JSON.stringify(u.diff));
      assert.deepEqual([u.diff.added, u.diff.removed, u.diff.errors, u.diff.refused], [[], [], [], []]);
    }
    assert.deepEqual(await allStates(d, device.id, 'temperature', app.token), before, 'try stores nothing');

    // A feed subscriber sees the corrected latest value once, when the re-decode finishes.
    const watcher = await connectClient(d.mqttPort, app.token);
    await watcher.client.subscribeAsync(`device/${device.id}/asset/temperature/feed`, { qos: 1 });
    await watcher.waitFor((m) => m.retain); // the retained latest (wrong) value
    const feedBefore = watcher.received.length;

    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: FIXED })).status, 200);
    const started = await api(d.url, 'POST', `/device/${device.id}/redecode`, { token: app.token });
    assert.equal(started.status, 202, started.text);
    const job = await waitForJob(d, device.id, app.token, (j) => j.status !== 'running');
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.done, job.total, job.replaced, job.failed], [50, 50, 50, 0]);
    assert.equal(job.notCovered, undefined);

    const after = await allStates(d, device.id, 'temperature', app.token);
    assert.equal(after.length, 51);
    const decoded = after.filter((s) => s.uplink !== null);
    assert.deepEqual(decoded.map((s) => s.value).sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => (200 + i) / 10));
    assert.ok(decoded.every((s) => s.codec === job.codec), 'every corrected state names the new codec version');
    // A corrected state keeps its uplink's receive time.
    assert.deepEqual(new Set(decoded.map((s) => s.at)), new Set(before.filter((s) => s.uplink !== null).map((s) => s.at)));
    assert.deepEqual(after.find((s) => s.uplink === null), { value: -40, at: '2020-01-01T00:00:00.000Z', uplink: null, codec: null }, 'the JSON state is untouched');
    const label = await api(d.url, 'GET', `/device/${device.id}/asset/label/state`, { token: app.token });
    assert.equal(label.body.state.value, 'boiler room');

    const latest = await api(d.url, 'GET', `/device/${device.id}/asset/temperature/state`, { token: app.token });
    assert.equal(latest.body.state.value, 24.9);
    const corrected = await watcher.waitFor((m) => !m.retain && JSON.parse(m.text).value === 24.9);
    await sleep(300);
    const feedAfter = watcher.received.slice(feedBefore);
    assert.equal(feedAfter.length, 1, `one feed message: ${JSON.stringify(feedAfter.map((m) => m.text))}`);
    assert.equal(JSON.parse(corrected.text).at, latest.body.state.at);

    // Trying the codec now in use: everything is the same.
    const again = await api(d.url, 'POST', `/device/${device.id}/codec/try`, { token: app.token, json: { ...FIXED, limit: 10 } });
    assert.deepEqual(again.body.summary, { same: 10, changed: 0, errors: 0 });

    // The CLI: try as a table and as JSON, and a redecode the daemon takes over, with progress.
    const wrongFile = join(d.dataDir, 'wrong.abcl.json');
    writeFileSync(wrongFile, JSON.stringify(doc(100)));
    const table = cli(['device', 'codec', device.id, '--uplink', 'abcl', '--file', wrongFile, '--try', '--limit', '5', '--data', d.dataDir]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /5 uplinks tried .*: 0 same, 5 changed, 0 errors/);
    assert.match(table.stdout, /UPLINK\s+AT\s+ASSET\s+DIFFERENCE\s+CURRENT\s+CANDIDATE/);
    assert.match(table.stdout, /temperature\s+changed\s+24\.9\s+2\.49/);
    const report = cliJson<any>(['device', 'codec', device.id, '--uplink', 'abcl', '--file', wrongFile, '--try', '--limit', '5'], d.dataDir);
    assert.deepEqual(report.summary, { same: 0, changed: 5, errors: 0 });
    const rerun = cli(['device', 'redecode', device.id, '--data', d.dataDir]);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.match(rerun.stderr, /\[#+\] 100%\s+50\/50 uplinks, 50 states replaced, 0 failed/);
    assert.match(rerun.stdout, /re-decode done: 50 of 50 uplinks, 50 states replaced, 0 failed/);
    assert.doesNotMatch(rerun.stderr, /in this process/, 'the running daemon took the job');
    await watcher.end();
    await sensor.end();
  } finally {
    await d.stop();
    removeDir(d.dataDir);
  }
});

test('kill -9 during a redecode of 100 000 uplinks leaves history consistent; the restarted daemon finishes the job', async () => {
  const dataDir = tempDataDir();
  const N = 100_000;
  const configFile = join(dataDir, 'config.json');
  // Keep every raw uplink and state of this test (the defaults would prune them).
  writeFileSync(configFile, JSON.stringify({ limits: { rawUplinksPerDevice: 200_000, historyPerAsset: 200_000 } }));
  const { device, app } = provision(dataDir, ASSETS);
  const wrongFile = join(dataDir, 'wrong.abcl.json');
  writeFileSync(wrongFile, JSON.stringify(doc(100)));
  assert.equal(cli(['device', 'codec', device.id, '--uplink', 'abcl', '--file', wrongFile, '--data', dataDir]).code, 0);
  // History as the wrong codec wrote it: N raw uplinks, each with its state pointing at it, and JSON states.
  const store = Store.open(dataDir);
  const asset = store.assets.byName(device.id, 'temperature')!;
  const t0 = Date.now() - 2 * 86_400_000; // inside the 30 days of history and raw uplinks kept
  store.transaction(() => {
    for (let i = 0; i < N; i++) {
      const at = t0 + i * 1000;
      const seq = store.uplinks.record({ deviceId: device.id, at, payload: frame(i % 1000), port: null, source: 'mqtt', decoded: true, error: null, codec: 'abcl:wrongwrongwr' });
      store.states.write([{ assetId: asset.id, at, valueJson: JSON.stringify((i % 1000) / 100), receivedAt: at, uplinkSeq: seq, codec: 'abcl:wrongwrongwr' }]);
    }
    store.states.write([{ assetId: asset.id, at: t0 - 1000, valueJson: '-40', receivedAt: t0 - 1000 }]);
  });
  store.close();

  let d = await startDaemon({ dataDir, args: ['--config', configFile] });
  try {
    assert.equal((await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: FIXED })).status, 200);
    const started = await api(d.url, 'POST', `/device/${device.id}/redecode`, { token: app.token, json: {} });
    assert.equal(started.status, 202, started.text);
    assert.equal(started.body.total, N);
    const second = await api(d.url, 'POST', `/device/${device.id}/redecode`, { token: app.token });
    assert.equal(second.status, 409, second.text);
    assert.equal(second.body.code, 'REDECODE_RUNNING');
    const partway = await waitForJob(d, device.id, app.token, (j) => j.done > 0 || j.status !== 'running');
    assert.equal(partway.status, 'running', 'the job was still running when the daemon was killed');
    await d.stop('SIGKILL');

    // History right after the kill: every uplink has exactly one state, all new up to the job's
    // last committed uplink and all old after it; nothing lost, nothing doubled.
    const check = inspect(join(dataDir, 'outpost.db'));
    const job = check.prepare('SELECT status, last_seq, done FROM redecode_jobs WHERE device_id = ?').get(device.id) as { status: string; last_seq: number; done: number };
    assert.equal(job.status, 'running');
    assert.ok(job.done > 0 && job.done < N, `killed partway: ${job.done} of ${N}`);
    const rows = check
      .prepare(
        `SELECT u.seq, u.payload, count(s.seq) AS n, max(s.value) AS value, max(s.codec) AS codec
         FROM raw_uplinks u LEFT JOIN states s ON s.uplink_seq = u.seq GROUP BY u.seq ORDER BY u.seq`,
      )
      .all() as Array<{ seq: number; payload: Buffer; n: number; value: string; codec: string }>;
    assert.equal(rows.length, N);
    let fixed = 0;
    for (const r of rows) {
      const tenths = r.payload.readInt16BE(0);
      assert.equal(r.n, 1, `uplink ${r.seq} has ${r.n} states`);
      const isNew = r.seq <= job.last_seq;
      assert.equal(Number(r.value), isNew ? tenths / 10 : tenths / 100, `uplink ${r.seq}`);
      assert.equal(r.codec === 'abcl:wrongwrongwr', !isNew);
      if (isNew) fixed++;
    }
    assert.equal(fixed, job.done);
    assert.equal(check.prepare("SELECT value FROM states WHERE uplink_seq IS NULL").pluck().get(), '-40');
    check.close();

    // The restarted daemon resumes where the last commit left off and finishes.
    d = await startDaemon({ dataDir, args: ['--config', configFile] });
    const finished = await waitForJob(d, device.id, app.token, (j) => j.status !== 'running');
    assert.equal(finished.status, 'done', JSON.stringify(finished));
    assert.deepEqual([finished.done, finished.total, finished.replaced, finished.failed], [N, N, N, 0]);
    const latest = await api(d.url, 'GET', `/device/${device.id}/asset/temperature/state`, { token: app.token });
    assert.equal(latest.body.state.value, ((N - 1) % 1000) / 10);
    const final = inspect(join(dataDir, 'outpost.db'));
    assert.equal(final.prepare("SELECT count(*) FROM states WHERE codec = 'abcl:wrongwrongwr'").pluck().get(), 0);
    assert.equal(final.prepare('SELECT count(*) FROM states').pluck().get(), N + 1);
    final.close();
  } finally {
    await d.stop('SIGKILL');
    removeDir(dataDir);
  }
});
