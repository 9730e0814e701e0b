import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { ROOT, api, provision, startDaemon } from '../helpers/daemon.js';

test('a custom binary device state over MQTT is decoded with the device ABCL document into feed messages', async () => {
  const d = await startDaemon();
  try {
    const { device, app } = provision(d.dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
      { name: 'humidity', is: 'sensor', profile: { type: 'number' } },
      { name: 'battery', is: 'sensor', profile: { type: 'number', maximum: 3.3 } },
    ]);
    const document = readFileSync(join(ROOT, 'abcl', 'environment-sensor.abcl.json'), 'utf8');
    const set = await api(d.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'abcl', document } } });
    assert.equal(set.status, 200, set.text);

    const sensor = await mqtt.connectAsync(`mqtt://127.0.0.1:${d.mqttPort}`, { username: device.token, password: 'ignored', reconnectPeriod: 0 });
    const feed: Record<string, { value: unknown; at: string }> = {};
    const errors: Array<{ code: string; error: string }> = [];
    sensor.on('message', (topic, payload) => {
      if (topic.endsWith('/errors')) errors.push(JSON.parse(payload.toString()));
      else feed[topic.split('/')[3]!] = JSON.parse(payload.toString());
    });
    await sensor.subscribeAsync([`device/${device.id}/asset/+/feed`, `device/${device.id}/errors`], { qos: 1 });
    // 21.5 °C, 45.5 %, battery 3.6 V: over the battery profile's maximum, so refused by name.
    await sensor.publishAsync(`device/${device.id}/state`, Buffer.from('66085B100E', 'hex'), { qos: 1 });
    for (let i = 0; i < 50 && (Object.keys(feed).length < 2 || errors.length < 1); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(feed.temperature?.value, 21.5);
    assert.equal(feed.humidity?.value, 45.5);
    assert.match(feed.temperature!.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.equal(feed.battery, undefined, 'the invalid asset produced no feed message');
    assert.ok(errors.some((e) => e.code === 'PROFILE_MISMATCH' && /battery/.test(e.error)), JSON.stringify(errors));

    // A frame the document cannot decode at all: reported, raw bytes kept, the connection stays.
    await sensor.publishAsync(`device/${device.id}/state`, Buffer.alloc(0), { qos: 1 });
    const uplinks = await api(d.url, 'GET', `/device/${device.id}/uplinks`, { token: app.token });
    assert.equal(uplinks.body.data[0].source, 'mqtt');
    assert.equal(uplinks.body.data[1].payload, '66085B100E');
    assert.equal(sensor.connected, true);
    await sensor.endAsync();
  } finally {
    await d.stop();
  }
});
