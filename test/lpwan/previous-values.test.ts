// A radio downlink codec fills the assets a command leaves out from the values last commanded to
// the device (docs/codecs.md, "Previous values"), across a restart; its warnings reach the sender.
// The compiled daemon, the shipped abcl/dimmer.abcl.json, a packet forwarder simulator over UDP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, provision, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient, type TestClient } from '../mqtt/helpers.js';
import { ForwarderSimulator } from './forwarder.js';
import { readDownlink, uplinkFrame, type DeviceKeys } from './frames.js';

const hex = (s: string) => Buffer.from(s, 'hex');
const ABP: DeviceKeys = { devAddr: '26011235', nwkSKey: hex('44024241ed4ce9a68c6a8bc055233fd3'), appSKey: hex('ec925802ae430ca77fd3dd73cb2cc588') };
const DIMMER = [
  { name: 'level', is: 'actuator', profile: { type: 'number', minimum: 0, maximum: 100 } },
  { name: 'fade', is: 'actuator', profile: { type: 'number' } },
  { name: 'on', is: 'actuator', profile: { type: 'boolean' } },
  { name: 'scene', is: 'actuator', profile: { type: 'integer' } },
];

interface Radio {
  daemon: RunningDaemon;
  fwd: ForwarderSimulator;
  mqtt: TestClient;
}

async function connect(daemon: RunningDaemon, app: string, deviceId: string): Promise<Radio> {
  const fwd = new ForwarderSimulator('b827ebfffe0000a1');
  await fwd.connect(daemon.gwmpPort);
  await fwd.pull();
  const mqtt = await connectClient(daemon.mqttPort, app);
  await mqtt.client.subscribeAsync(`device/${deviceId}/events`, { qos: 1 });
  return { daemon, fwd, mqtt };
}

async function disconnect(r: Radio): Promise<void> {
  await r.mqtt.end();
  r.fwd.close();
  assert.equal(await r.daemon.stop(), 0);
}

/** An uplink opens the receive window; returns the application payload of the downlink that goes on air then. */
async function nextDownlinkOnAir(r: Radio, fCntUp: number, fCntDown: number): Promise<string> {
  const before = r.fwd.pullResps().length;
  await r.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: fCntUp, fPort: 1, payload: hex('00000000') }), tmst: 1_000_000 * (fCntUp + 1) }]);
  const deadline = Date.now() + 10_000;
  while (r.fwd.pullResps().length === before) {
    if (Date.now() > deadline) throw new Error(`no PULL_RESP after uplink ${fCntUp}`);
    await new Promise((res) => setTimeout(res, 20));
  }
  const resp = r.fwd.pullResps()[before]!;
  const down = readDownlink(ABP, Buffer.from(resp.txpk.data, 'base64'), fCntDown);
  assert.ok(down.micValid, 'the device accepts the frame');
  assert.equal(down.fCnt16, fCntDown);
  return down.payload.toString('hex').toUpperCase();
}

test('an asset command to a dimmer keeps the fade, on and scene last commanded (also after a restart); warnings reach the 202 answer and the downlink event', async () => {
  const dataDir = tempDataDir();
  let r: Radio | undefined;
  try {
    let daemon = await startDaemon({ dataDir });
    const { device, app } = provision(dataDir, DIMMER);
    const token = app.token;
    const lorawan = await api(daemon.url, 'PUT', `/device/${device.id}/lorawan`, {
      token,
      json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex') },
    });
    assert.equal(lorawan.status, 200, lorawan.text);
    const codec = await api(daemon.url, 'PUT', `/device/${device.id}/codec`, {
      token,
      json: { uplink: { format: 'abcl', file: 'dimmer.abcl.json' }, downlink: { format: 'abcl', file: 'dimmer.abcl.json', port: 10 } },
    });
    assert.equal(codec.status, 200, codec.text);
    r = await connect(daemon, token, device.id);

    // Nothing commanded yet: the frame's other fields have no value, and the sender is told so.
    const first = await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/command`, { token, json: { value: 20 } });
    assert.equal(first.status, 202, first.text);
    assert.equal(first.body.delivered.lpwan, 'queued');
    assert.ok(Array.isArray(first.body.warnings), first.text);
    for (const asset of ['fade', 'on', 'scene']) assert.ok(first.body.warnings.some((w: string) => w.includes(`asset "${asset}"`) && w.includes('no value')), `a warning names ${asset}: ${first.text}`);
    const queued = JSON.parse((await r.mqtt.waitFor((m) => JSON.parse(m.text).type === 'downlink' && JSON.parse(m.text).status === 'queued', 8000)).text);
    assert.deepEqual(queued.warnings, first.body.warnings, 'the downlink event carries the same warnings');
    assert.equal(await nextDownlinkOnAir(r, 0, 0), '01A533000000');

    // The whole dimmer at once: no warnings.
    const all = await api(daemon.url, 'PUT', `/device/${device.id}/command`, { token, json: { level: 100, fade: 1.5, on: true, scene: 2 } });
    assert.equal(all.status, 202, all.text);
    assert.equal(all.body.warnings, undefined, all.text);
    assert.equal(await nextDownlinkOnAir(r, 1, 1), '01A5FF000F21');

    // The values are kept in the database: a restart does not forget them.
    await disconnect(r);
    r = undefined;
    daemon = await startDaemon({ dataDir });
    r = await connect(daemon, token, device.id);

    // Only the level: fade 1.5 s, on, scene 2 stay as commanded (not 0, off, scene 0).
    const level = await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/command`, { token, json: { value: 50 } });
    assert.equal(level.status, 202, level.text);
    // 50 × 2.55 is not a whole number: the codec says so (and rounds); it no longer misses any field.
    assert.deepEqual(level.body.warnings, ['asset "level" (actuate[2]): 127.49999999999999 is not an integer; rounded to 127'], level.text);
    assert.equal(await nextDownlinkOnAir(r, 2, 2), '01A57F000F21');

    // And the next asset command builds on that one.
    const off = await api(daemon.url, 'PUT', `/device/${device.id}/asset/on/command`, { token, json: { value: false } });
    assert.equal(off.status, 202, off.text);
    assert.equal(await nextDownlinkOnAir(r, 3, 3), '01A57F000F20');
  } finally {
    if (r) await disconnect(r);
    removeDir(dataDir);
  }
});
