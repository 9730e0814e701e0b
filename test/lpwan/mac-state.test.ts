// MAC state survives kill -9 (docs/lpwan.md, "What survives a restart"): the ADR history, a pending
// confirmed downlink and a pending LinkADRReq, with the compiled daemon and a forwarder over UDP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api } from '../helpers/daemon.js';
import { readDownlink, type DeviceKeys } from './frames.js';
import { discardRig, killAndRestart, startRig, until, type Rig } from './daemon-rig.js';
import { Encoder } from 'cbor-x';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const KEYS: DeviceKeys = { devAddr: '26011236', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };

const adrOf = async (r: Rig) => (await api(r.daemon.url, 'GET', `/device/${r.deviceId}/lorawan`, { token: r.app })).body.adr;

test('kill -9 with a pending confirmed downlink and a pending LinkADRReq: after the restart the ACK completes the item and the LinkADRAns is applied', async () => {
  let r = await startRig();
  let fCnt = 0;
  try {
    await r.lorawan({ activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex') });
    // Twelve uplinks of ADR history, then kill -9.
    for (let i = 0; i < 12; i++) await r.uplink(KEYS, { fCnt: fCnt++, adr: true }, { lsnr: 5, datr: 'SF12BW125' });
    await until(async () => (await adrOf(r)).uplinks === 12, 'twelve uplinks committed');
    r = await killAndRestart(r);
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF12BW125', txPower: 0, nbTrans: 1, uplinks: 12, pending: false });

    for (let i = 0; i < 7; i++) await r.uplink(KEYS, { fCnt: fCnt++, adr: true }, { lsnr: 5, datr: 'SF12BW125' });
    assert.equal(r.fwd.pullResps().length, 0, 'nineteen uplinks of history: nothing to send yet');
    // A confirmed command waits; the 20th uplink's answer carries it and the LinkADRReq (DR5: 5 dB − (−20) − 10 = 15 → 5 steps).
    const cmd = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true, meta: { confirmed: true } } });
    assert.equal(cmd.status, 202);
    await r.uplink(KEYS, { fCnt: fCnt++, adr: true }, { lsnr: 5, datr: 'SF12BW125' });
    const sent = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.macCommands !== undefined);
    assert.deepEqual(sent.macCommands, [{ cid: 'LinkADRReq', dataRate: 'SF7BW125', txPower: 0, nbTrans: 1 }]);
    assert.equal(sent.confirmed, true);
    const resps = r.fwd.pullResps();
    const down = readDownlink(KEYS, Buffer.from(resps.at(-1)!.txpk.data, 'base64'), sent.fCnt);
    assert.ok(down.micValid && down.confirmed);
    assert.deepEqual(cbor.decode(down.payload), { led: true });
    assert.equal(down.fOpts.toString('hex'), '0350070001');
    assert.equal((await adrOf(r)).pending, true);

    r = await killAndRestart(r);
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF12BW125', txPower: 0, nbTrans: 1, uplinks: 20, pending: true });
    // The device acknowledges the command and answers the LinkADRReq, at its new data rate.
    const up = await r.uplink(KEYS, { fCnt: fCnt++, adr: true, ack: true, fOpts: Buffer.from([0x03, 0x07]) }, { lsnr: 5, datr: 'SF7BW125' });
    assert.deepEqual(up.macCommands, [{ cid: 'LinkADRAns', channelMaskAck: true, dataRateAck: true, powerAck: true }]);
    const acked = await r.event((e) => e.type === 'downlink' && e.status === 'acknowledged');
    assert.equal(acked.id, sent.id);
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF7BW125', txPower: 0, nbTrans: 1, uplinks: 1, pending: false });
    const list = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/downlinks`, { token: r.app });
    assert.equal(list.body.data[0].status, 'acknowledged');
    // Counters: the next downlink uses a counter never used before the kills.
    await r.uplink(KEYS, { fCnt: fCnt++, confirmed: true }, { lsnr: 5, datr: 'SF7BW125' });
    await until(() => r.fwd.pullResps().length === 1, 'the ACK');
    assert.ok(readDownlink(KEYS, Buffer.from(r.fwd.pullResps()[0]!.txpk.data, 'base64'), sent.fCnt + 1).micValid);
    await r.close();
  } catch (err) {
    await discardRig(r);
    throw err;
  }
});
