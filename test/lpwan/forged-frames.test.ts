// Forged frames naming a known device (its DevAddr is on the air in clear) must not flood its
// events topic: refusals are limited per device like the errors topic (docs/security.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Encoder } from 'cbor-x';
import { api, provision, removeDir, startDaemon } from '../helpers/daemon.js';
import { connectClient, eventually, sleep } from '../mqtt/helpers.js';
import { ForwarderSimulator } from './forwarder.js';
import { uplinkFrame, type DeviceKeys } from './frames.js';

const hex = (s: string) => Buffer.from(s, 'hex');
const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const ABP: DeviceKeys = { devAddr: '26011234', nwkSKey: hex('44024241ed4ce9a68c6a8bc055233fd3'), appSKey: hex('ec925802ae430ca77fd3dd73cb2cc588') };

test('2 000 frames with a known DevAddr and bad MICs give a bounded number of uplink_refused events, the rest counted', { timeout: 120_000 }, async () => {
  const daemon = await startDaemon();
  const fwd = new ForwarderSimulator('b827ebfffe0000aa');
  try {
    const { device, app } = provision(daemon.dataDir, [{ name: 'temperature', is: 'sensor', profile: { type: 'number' } }]);
    const put = await api(daemon.url, 'PUT', `/device/${device.id}/lorawan`, {
      token: app.token,
      json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex'), fCntUp: 0, fCntDown: 0 },
    });
    assert.equal(put.status, 200, put.text);
    await fwd.connect(daemon.gwmpPort);
    await fwd.pull();
    const mqtt = await connectClient(daemon.mqttPort, app.token);
    await mqtt.client.subscribeAsync(`device/${device.id}/events`, { qos: 0 });
    const events = () => mqtt.received.filter((m) => m.topic.endsWith('/events')).map((m) => JSON.parse(m.text) as Record<string, any>);

    const forged: DeviceKeys = { ...ABP, nwkSKey: randomBytes(16) };
    const started = Date.now();
    for (let batch = 0; batch < 100; batch++) {
      const packets = Array.from({ length: 20 }, (_, i) => ({ payload: uplinkFrame(forged, { fCnt: batch * 20 + i + 1, fPort: 2, payload: randomBytes(4) }) }));
      await fwd.push(packets);
    }
    const metricText = async () => (await api(daemon.url, 'GET', '/metrics')).text;
    await eventually(async () => /outpost_lpwan_refusal_events_suppressed_total\{type="uplink_refused"\} (\d+)/.test(await metricText()), 10_000, 'suppressed refusals counted');
    await sleep(500);
    const seconds = (Date.now() - started) / 1000;
    const refused = events().filter((e) => e.type === 'uplink_refused');
    // mqtt.errorsBurst (50) at once, then mqtt.errorsPerSecond (10) a second.
    assert.ok(refused.length >= 10, `${refused.length} refusals delivered`);
    assert.ok(refused.length <= 50 + Math.ceil(seconds * 10) + 5, `${refused.length} refusals delivered in ${seconds.toFixed(1)} s`);
    assert.ok(refused.every((e) => e.reason === 'mic'));
    const suppressed = Number(/outpost_lpwan_refusal_events_suppressed_total\{type="uplink_refused"\} (\d+)/.exec(await metricText())![1]);
    assert.equal(suppressed + refused.length, 2000, `${suppressed} suppressed + ${refused.length} delivered`);

    // Each refusal delivered after some were held back says how many: with one more after the
    // bucket refilled, they account for every suppressed one.
    await sleep(1200);
    await fwd.push([{ payload: uplinkFrame(forged, { fCnt: 5000, fPort: 2, payload: randomBytes(4) }) }]);
    await eventually(() => events().filter((e) => e.type === 'uplink_refused').length === refused.length + 1, 5000, 'one more refusal');
    const told = events().reduce((sum, e) => sum + (typeof e.suppressed === 'number' ? e.suppressed : 0), 0);
    assert.equal(told, suppressed);
    assert.equal(typeof events().filter((e) => e.type === 'uplink_refused').at(-1)!.suppressed, 'number');

    // The genuine device's uplink is not limited with the refusals.
    await fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 1, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 20 })) }) }]);
    await eventually(() => events().some((e) => e.type === 'uplink' && e.fCnt === 1), 5000, 'the real uplink event');
    await mqtt.end();
  } finally {
    fwd.close();
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }
});
