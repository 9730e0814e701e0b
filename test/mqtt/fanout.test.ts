// Fan-out hardening (issue 7, defect 1): one refused message is one bounded report, the errors topic
// is rate limited, and no subscriber behaviour (vanishing in the middle of a burst) crashes the broker.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mqemitter from 'mqemitter';
import { createFanout } from '../../src/doors/mqtt/fanout.js';
import { api, provision, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient, eventually, sleep, type TestClient } from './helpers.js';

describe('the fan-out emitter', () => {
  /**
   * The crash of defect 1, without the daemon: a burst of messages to a subscriber that answers later
   * (as aedes' deliveries do) and leaves after the 10th. Returns what the last delivery threw.
   */
  async function burstThenLeave(mq: ReturnType<typeof createFanout>, total: number): Promise<{ completed: number; thrown?: unknown }> {
    let delivered = 0;
    let completed = 0;
    let thrown: unknown;
    const listener = (_message: unknown, done: () => void) => {
      if (++delivered === 10) mq.removeListener('device/x/errors', listener);
      setImmediate(() => {
        try {
          done();
        } catch (err) {
          thrown ??= err;
        }
      });
    };
    mq.on('device/x/errors', listener);
    await new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < total; i++) mq.emit({ topic: 'device/x/errors', i }, () => completed++);
    const deadline = Date.now() + 10_000;
    while (completed < total && thrown === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise<void>((resolve) => mq.close(() => resolve()));
    return { completed, thrown };
  }

  test("aedes' default emitter (a queue past 100 in flight) overflows the stack when the subscriber leaves mid-burst", async () => {
    // Reproduces the root cause; if this ever passes without a throw, mqemitter fixed it upstream.
    const { thrown } = await burstThenLeave(mqemitter({ concurrency: 100, matchEmptyLevels: true }), 100_000);
    assert.ok(thrown instanceof RangeError, `expected a stack overflow, got ${String(thrown)}`);
  });

  test('the emitter the door uses delivers 100 000 messages published at once with no overflow, the subscriber leaving or not', async () => {
    const { completed, thrown } = await burstThenLeave(createFanout(), 100_000);
    assert.equal(thrown, undefined);
    assert.equal(completed, 100_000);
  });
});

describe('against the daemon', () => {
  let daemon: RunningDaemon;
  let device: { id: string; token: string };
  let configDir: string;
  const open: TestClient[] = [];

  before(async () => {
    configDir = (await import('../helpers/daemon.js')).tempDataDir();
    const config = join(configDir, 'config.json');
    // A small errors budget so the rate limit shows with few messages.
    writeFileSync(config, JSON.stringify({ mqtt: { errorsPerSecond: 2, errorsBurst: 5 } }));
    daemon = await startDaemon({ args: ['--config', config] });
    device = provision(daemon.dataDir).device;
  });

  after(async () => {
    for (const c of open) await c.end().catch(() => {});
    await daemon.stop();
    removeDir(daemon.dataDir);
    removeDir(configDir);
  });

  async function client(): Promise<TestClient> {
    const c = await connectClient(daemon.mqttPort, device.token);
    open.push(c);
    return c;
  }

  function alive(): boolean {
    return daemon.proc.exitCode === null && daemon.proc.signalCode === null;
  }

  test('a 64 KiB device state naming 6 500 unknown assets is ONE errors report (50 listed, the rest counted); a subscriber vanishing meanwhile crashes nothing', async () => {
    const errors = `device/${device.id}/errors`;
    // One subscriber drops its TCP connection (no DISCONNECT) the moment the first report arrives.
    const rude = await client();
    assert.equal(await rude.subscribeCode(errors), 1);
    rude.client.on('message', () => rude.client.stream.destroy());
    const watcher = await client();
    assert.equal(await watcher.subscribeCode(errors), 1);

    const names: Record<string, number> = {};
    for (let i = 0; i < 6500; i++) names[`u${i}`] = 1;
    const payload = JSON.stringify(names);
    assert.ok(payload.length <= 65536, `payload of ${payload.length} bytes fits the default limit`);
    const publisher = await client();
    await publisher.client.publishAsync(`device/${device.id}/state`, payload, { qos: 1 });

    const report = await watcher.waitFor((m) => m.topic === errors);
    const body = JSON.parse(report.text);
    assert.equal(body.topic, `device/${device.id}/state`);
    assert.equal(body.code, 'ASSET_NOT_FOUND');
    assert.equal(body.assets.length, 50);
    assert.deepEqual(body.assets[0], { asset: 'u0', code: 'ASSET_NOT_FOUND', error: `asset "u0" not found on device ${device.id}` });
    assert.equal(body.more, 6450);
    assert.match(body.error, /^6500 assets refused: "u0", "u1", .*"u49", and 6450 more$/);
    assert.ok(report.payload.length < 8192, `the report is bounded (${report.payload.length} bytes)`);

    // The daemon is alive and answers; still exactly one report for that message.
    await sleep(500);
    assert.ok(alive(), 'daemon still running');
    assert.equal(watcher.received.filter((m) => m.topic === errors).length, 1);
    assert.equal((await api(daemon.url, 'GET', '/healthz')).status, 200);
    await publisher.client.publishAsync(`device/${device.id}/state`, '{}', { qos: 1 });
  });

  test('the errors topic is rate limited per device; the next delivered report counts what was held back', async () => {
    const errors = `device/${device.id}/errors`;
    await sleep(3000); // let the bucket of the previous test refill (burst 5 at 2/s)
    const watcher = await client();
    assert.equal(await watcher.subscribeCode(errors), 1);
    const publisher = await client();
    const started = Date.now();
    const sent = 60;
    for (let i = 0; i < sent; i++) await publisher.client.publishAsync(`device/${device.id}/asset/nope${i}/state`, '1', { qos: 1 });
    const elapsed = (Date.now() - started) / 1000;
    // After a pause the budget refills; the next report says how many were held back since the last.
    await sleep(1500);
    await publisher.client.publishAsync(`device/${device.id}/asset/late/state`, '1', { qos: 1 });
    // Reports reach the watcher in order: once "late" is in, every earlier delivered one is too.
    await watcher.waitFor((m) => m.topic === errors && JSON.parse(m.text).topic.endsWith('/late/state'));
    const reports = watcher.received.filter((m) => m.topic === errors).map((m) => JSON.parse(m.text));
    const delivered = reports.filter((r) => /\/nope\d+\/state$/.test(r.topic)).length;
    // burst 5, then 2 per second: whatever the machine's speed, far fewer than were sent
    assert.ok(delivered >= 5, `at least the burst was reported (${delivered})`);
    assert.ok(delivered <= 5 + Math.ceil(elapsed * 2) + 1, `${delivered} reports for ${sent} refusals in ${elapsed} s`);
    const dropped = reports.reduce((n, r) => n + (r.dropped ?? 0), 0);
    assert.equal(delivered + dropped, sent, 'every refusal was either reported or counted as dropped');
    assert.ok(dropped > 0 || elapsed > 25, 'reports were held back');
    await eventually(async () => new RegExp(`outpost_mqtt_error_reports_dropped_total ${dropped}\\b`).test((await api(daemon.url, 'GET', '/metrics')).text), 5000, 'dropped reports are counted');
  });

  test('a subscriber that vanishes in the middle of thousands of feed and echo messages crashes nothing', async () => {
    // 1000 assets, then device states naming all of them: 2 000 messages (echo and feed) per publish.
    const assets = 1000;
    for (let i = 0; i < assets; i++) {
      const res = await api(daemon.url, 'POST', `/device/${device.id}/assets`, { token: device.token, json: { name: `a${i}`, is: 'sensor', profile: { type: 'integer' } } });
      assert.equal(res.status, 201, res.text);
    }
    const values: Record<string, number> = {};
    for (let i = 0; i < assets; i++) values[`a${i}`] = i;
    for (let round = 0; round < 3; round++) {
      const rude = await client();
      assert.equal(await rude.subscribeCode(`device/${device.id}/#`), 1);
      let got = 0;
      rude.client.on('message', () => {
        if (++got === 5) rude.client.stream.destroy();
      });
      const publisher = await client();
      for (let k = 0; k < 3; k++) await publisher.client.publishAsync(`device/${device.id}/state`, JSON.stringify(values), { qos: 1 });
      await rude.closed;
      await sleep(300);
      assert.ok(alive(), `daemon still running after round ${round}`);
    }
    const watcher = await client();
    await watcher.subscribeCode(`device/${device.id}/asset/a999/feed`);
    const last = await watcher.waitFor((m) => m.topic === `device/${device.id}/asset/a999/feed`);
    assert.equal(JSON.parse(last.text).value, 999);
  });
});
