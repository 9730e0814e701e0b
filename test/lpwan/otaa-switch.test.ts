// OTAA session switch (docs/lpwan.md, "Joining over the air"): a lost JoinAccept does not cut a
// device off; the new session becomes current on its first uplink, also across kill -9.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder } from 'cbor-x';
import { api } from '../helpers/daemon.js';
import { acceptJoin, joinRequest, readDownlink, uplinkFrame, type DeviceKeys } from './frames.js';
import { discardRig, killAndRestart, startRig, until, type Rig } from './daemon-rig.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const APP_KEY = Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex');
const DEV_EUI = '0004A30B001F2A3D';
const JOIN_EUI = '70B3D57ED0000010';
const temperature = (t: number) => Buffer.from(cbor.encode({ temperature: t }));

async function join(r: Rig, devNonce: number, tmst: number): Promise<DeviceKeys> {
  const before = r.fwd.pullResps().length;
  await r.fwd.push([{ payload: joinRequest(APP_KEY, JOIN_EUI, DEV_EUI, devNonce), tmst }]);
  await until(() => r.fwd.pullResps().length > before, 'a join accept');
  const accept = r.fwd.pullResps()[before]!.txpk;
  assert.equal(accept.tmst, tmst + 5_000_000);
  const session = acceptJoin(APP_KEY, Buffer.from(accept.data, 'base64'), devNonce);
  assert.ok(session.micValid);
  await r.event((e) => e.type === 'join' && e.devNonce === devNonce);
  return session;
}

const settings = async (r: Rig) => (await api(r.daemon.url, 'GET', `/device/${r.deviceId}/lorawan`, { token: r.app })).body;

test('a lost JoinAccept: the device goes on with its old session until its first uplink under the new one', async () => {
  let r = await startRig();
  try {
    await r.lorawan({ activation: 'otaa', devEui: DEV_EUI, joinEui: JOIN_EUI, appKey: APP_KEY.toString('hex') });
    const a = await join(r, 1, 1_000_000);
    await r.uplink(a, { fCnt: 0, fPort: 1, payload: temperature(20) });
    assert.equal((await settings(r)).devAddr, a.devAddr);

    // The device asks again; the JoinAccept never reaches it: it keeps using session A.
    const b = await join(r, 2, 2_000_000);
    assert.notEqual(b.devAddr, a.devAddr);
    const shown = await settings(r);
    assert.equal(shown.devAddr, b.devAddr, 'GET shows the new session');
    assert.equal(shown.fCntUp, 0);
    const up = await r.uplink(a, { fCnt: 1, fPort: 1, payload: temperature(21), confirmed: true });
    assert.equal(up.fCnt, 1);
    // Answered under session A: its keys and its downlink counter.
    await until(() => r.fwd.pullResps().length === 3, 'the ACK');
    const ack = readDownlink(a, Buffer.from(r.fwd.pullResps()[2]!.txpk.data, 'base64'), 0);
    assert.ok(ack.micValid && ack.ack);
    assert.equal(ack.devAddr, a.devAddr);
    const state = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/state`, { token: r.app });
    assert.equal(state.body.state.value, 21);

    // A third join reaches the device (session C); the daemon is killed before the device's first uplink.
    const c = await join(r, 3, 3_000_000);
    r = await killAndRestart(r);
    assert.equal((await settings(r)).devAddr, c.devAddr);
    // Session A still works until the device uses C…
    await r.uplink(a, { fCnt: 2, fPort: 1, payload: temperature(22) });
    // …and the first uplink under C makes C current; a command queued meanwhile follows the device.
    const cmd = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true } });
    assert.equal(cmd.status, 202);
    await r.uplink(c, { fCnt: 0, fPort: 1, payload: temperature(23) });
    await until(() => r.fwd.pullResps().length === 1, 'the command');
    const down = readDownlink(c, Buffer.from(r.fwd.pullResps()[0]!.txpk.data, 'base64'), 0);
    assert.ok(down.micValid, 'sent under session C with its counter 0');
    assert.equal(down.devAddr, c.devAddr);
    assert.deepEqual(cbor.decode(down.payload), { led: true });
    const after = await settings(r);
    assert.equal(after.devAddr, c.devAddr);
    assert.equal(after.fCntUp, 1);
    assert.equal(after.fCntDown, 1);
    // Session A is gone: its frames name no device any more; B was never used.
    await r.fwd.push([{ payload: uplinkFrame(a, { fCnt: 3, fPort: 1, payload: temperature(99) }) }]);
    await r.fwd.push([{ payload: uplinkFrame(b, { fCnt: 0, fPort: 1, payload: temperature(98) }) }]);
    await until(async () => /outpost_lpwan_refused_total\{reason="unknown-devaddr"\} 2/.test((await api(r.daemon.url, 'GET', '/metrics')).text), 'both refused');
    const history = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/states`, { token: r.app });
    assert.deepEqual(history.body.data.map((s: { value: number }) => s.value), [23, 22, 21, 20]);
    await r.close();
  } catch (err) {
    await discardRig(r);
    throw err;
  }
});
