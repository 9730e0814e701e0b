// Two corner cases of the network server, with the compiled daemon and a forwarder over UDP: an
// FPort with an empty FRMPayload reaches the device's codec; FPending is not set for an item that
// was just refused as too large.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api } from '../helpers/daemon.js';
import { readDownlink, type DeviceKeys } from './frames.js';
import { startRig, until } from './daemon-rig.js';

const KEYS: DeviceKeys = { devAddr: '26011237', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };
const ABP = { activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex') };
// A heartbeat: the device sends FPort 5 with no payload; the codec turns that into a state.
const CODEC = {
  uplink: {
    format: 'js',
    script: `function decodeUplink(input) {
      if (input.bytes.length === 0) return { data: { temperature: -1000 - input.fPort } };
      return { data: { temperature: input.bytes[0] } };
    }`,
  },
};

test('an uplink with an FPort and an empty FRMPayload reaches the JS codec (bytes: []) and its result is stored', async () => {
  const r = await startRig();
  try {
    assert.equal((await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/codec`, { token: r.app, json: CODEC })).status, 200);
    await r.lorawan(ABP);
    const up = await r.uplink(KEYS, { fCnt: 0, fPort: 5 });
    assert.equal(up.fPort, 5);
    assert.equal(up.payloadSize, 0);
    await until(async () => (await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/state`, { token: r.app })).body?.state?.value === -1005, 'the heartbeat state');
    await r.uplink(KEYS, { fCnt: 1, fPort: 5, payload: Buffer.from([21]) });
    await until(async () => (await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/state`, { token: r.app })).body?.state?.value === 21, 'the next state');
    // No FPort at all (an empty frame, MAC only): nothing for the codec.
    await r.uplink(KEYS, { fCnt: 2 });
    const kept = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/uplinks`, { token: r.app });
    assert.equal(kept.status, 200, kept.text);
    assert.equal(kept.body.data.length, 2, 'the empty FPort 5 frame and the next one are kept raw; the portless frame has nothing to keep');
  } finally {
    await r.close();
  }
});

test('the ACK of a confirmed uplink does not set FPending when the only other item was just refused as too_large', async () => {
  const r = await startRig();
  try {
    await r.lorawan(ABP);
    // First a small item (the built-in CBOR command)…
    const small = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/command`, { token: r.app, json: { values: { led: true }, meta: {} } });
    assert.equal(small.status, 202);
    // Then a JS downlink codec that makes a 200-byte frame of led = true.
    const codec = { downlink: { format: 'js', script: `function encodeDownlink(input) { var b = []; for (var i = 0; i < (input.data.led ? 200 : 2); i++) b.push(255); return { bytes: b, fPort: 9 }; }` } };
    assert.equal((await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/codec`, { token: r.app, json: codec })).status, 200);
    assert.equal((await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true } })).status, 202);
    const list = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/downlinks`, { token: r.app });
    assert.equal(list.body.data.length, 2);
    // The first (small, CBOR) item goes with the first confirmed uplink, FPending set: the large one waits.
    await r.uplink(KEYS, { fCnt: 0, confirmed: true }, { datr: 'SF12BW125' });
    await until(() => r.fwd.pullResps().length === 1, 'the first downlink');
    const first = readDownlink(KEYS, Buffer.from(r.fwd.pullResps()[0]!.txpk.data, 'base64'), 0);
    assert.ok(first.micValid && first.ack);
    assert.equal(first.fPending, true);
    // The second confirmed uplink: the large item fits no window (too_large); the ACK goes alone, FPending clear.
    await r.uplink(KEYS, { fCnt: 1, confirmed: true }, { datr: 'SF12BW125' });
    const tooLarge = await r.event((e) => e.type === 'downlink' && e.status === 'too_large');
    assert.match(tooLarge.reason, /200 bytes/);
    await until(() => r.fwd.pullResps().length === 2, 'the ACK');
    const ack = readDownlink(KEYS, Buffer.from(r.fwd.pullResps()[1]!.txpk.data, 'base64'), 1);
    assert.ok(ack.micValid && ack.ack);
    assert.equal(ack.fPort, undefined);
    assert.equal(ack.fPending, false, 'nothing else waits');
  } finally {
    await r.close();
  }
});
