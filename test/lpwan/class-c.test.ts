// Class C end to end (docs/lpwan.md, "Class C"): the compiled daemon, two packet forwarder
// simulators over UDP, commands over HTTP; downlinks read from the bytes on air, MIC checked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder } from 'cbor-x';
import { api } from '../helpers/daemon.js';
import { ForwarderSimulator } from './forwarder.js';
import { readDownlink, uplinkFrame, type DeviceKeys } from './frames.js';
import { sleep, startRig, until } from './daemon-rig.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const KEYS: DeviceKeys = { devAddr: '26011235', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };
const ABP_C = { activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex'), class: 'C' };

test('Class C: a command goes at once in RX2 parameters (imme) through the gateway that heard the device last; confirmed ones are retried, then expire no-ack', async () => {
  const r = await startRig({ classC: { ackTimeoutS: 0.6, retries: 2 } });
  const second = new ForwarderSimulator('b827ebfffe000002');
  try {
    await second.connect(r.daemon.gwmpPort);
    await second.pull();
    const put = await r.lorawan(ABP_C);
    assert.equal(put.class, 'C');
    const command = (value: boolean, meta: Record<string, unknown> = {}) => api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value, meta } });

    // Never heard yet: nothing to send it through; the command waits for the first uplink (Class A first).
    assert.equal((await command(true)).status, 202);
    await sleep(300);
    assert.equal(r.fwd.pullResps().length + second.pullResps().length, 0);
    await r.uplink(KEYS, { fCnt: 0 }, { tmst: 5_000_000 });
    await until(() => r.fwd.pullResps().length === 1, 'the Class A answer');
    assert.equal(r.fwd.pullResps()[0]!.txpk.tmst, 6_000_000, 'RX1 after the uplink');
    assert.deepEqual(cbor.decode(readDownlink(KEYS, Buffer.from(r.fwd.pullResps()[0]!.txpk.data, 'base64'), 0).payload), { led: true });
    await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.window === 'rx1');

    // Heard last through the second forwarder: the next command goes through it, at once.
    await second.push([{ payload: uplinkFrame(KEYS, { fCnt: 1 }), tmst: 7_000_000 }]);
    await r.event((e) => e.type === 'uplink' && e.fCnt === 1);
    const t0 = Date.now();
    const accepted = await command(false);
    const t202 = Date.now();
    assert.equal(accepted.status, 202);
    await until(() => second.pullResps().length === 1, 'a Class C PULL_RESP', 2000);
    const latency = second.received.find((d) => d.bytes[3] === 0x03)!.at - t202;
    assert.ok(latency <= 200, `PULL_RESP ${latency} ms after the 202 (request took ${t202 - t0} ms)`);
    const { txpk } = second.pullResps()[0]!;
    assert.equal(txpk.imme, true);
    assert.equal(txpk.tmst, undefined);
    assert.equal(txpk.freq, 869.525);
    assert.equal(txpk.datr, 'SF12BW125');
    assert.equal(txpk.ipol, true);
    assert.equal(txpk.powe, 27);
    const down = readDownlink(KEYS, Buffer.from(txpk.data, 'base64'), 1);
    assert.ok(down.micValid);
    assert.deepEqual(cbor.decode(down.payload), { led: false });
    const sent = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.window === 'rx2c');
    assert.equal(sent.fCnt, 1);
    assert.equal(r.fwd.pullResps().length, 1, 'nothing through the first forwarder');

    // Confirmed: not acknowledged within ackTimeoutS → sent again (new counter), twice, then expired no-ack.
    const confirmed = await command(true, { confirmed: true });
    assert.equal(confirmed.status, 202);
    const first = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.confirmed === true);
    for (const fCnt of [3, 4]) {
      const again = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.id === first.id, 3000);
      assert.equal(again.fCnt, fCnt);
      assert.equal(again.window, 'rx2c');
    }
    const expired = await r.event((e) => e.type === 'downlink' && e.status === 'expired' && e.id === first.id, 3000);
    assert.equal(expired.reason, 'no-ack');
    const resends = second.pullResps().slice(1).map((p, i) => readDownlink(KEYS, Buffer.from(p.txpk.data, 'base64'), 2 + i));
    assert.equal(resends.length, 3);
    assert.ok(resends.every((d) => d.micValid && d.confirmed));

    // Confirmed and acknowledged: the next uplink's ACK completes it, nothing is sent again.
    await command(false, { confirmed: true });
    const pending = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.confirmed === true);
    assert.equal(pending.fCnt, 5);
    await second.push([{ payload: uplinkFrame(KEYS, { fCnt: 2, ack: true }), tmst: 9_000_000 }]);
    const acked = await r.event((e) => e.type === 'downlink' && e.status === 'acknowledged');
    assert.equal(acked.id, pending.id);
    const count = second.pullResps().length;
    await sleep(1000);
    assert.equal(second.pullResps().length, count, 'no resend after the ACK');
    const list = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/downlinks`, { token: r.app });
    assert.equal(list.body.data.find((d: { id: string }) => d.id === first.id).status, 'expired');
    assert.equal(list.body.data.find((d: { id: string }) => d.id === pending.id).status, 'acknowledged');
  } finally {
    second.close();
    await r.close();
  }
});

test('Class C: a confirmed downlink the next uplink does not acknowledge goes again in that uplink\'s Class A window', async () => {
  const r = await startRig({ classC: { ackTimeoutS: 30, retries: 2 } });
  try {
    await r.lorawan(ABP_C);
    // Confirmed, so its answer (the ACK) is seen to go before the command is made: an answer still
    // waiting for its commit would carry the command in RX1 instead.
    await r.uplink(KEYS, { fCnt: 0, confirmed: true }, { tmst: 1_000_000 });
    await until(() => r.fwd.pullResps().length === 1, 'the ACK of the first uplink');
    const res = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true, meta: { confirmed: true } } });
    assert.equal(res.status, 202);
    const sent = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.window === 'rx2c');
    await r.uplink(KEYS, { fCnt: 1 }, { tmst: 2_000_000 });
    const again = await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.id === sent.id);
    assert.equal(again.window, 'rx1');
    assert.equal(again.fCnt, sent.fCnt + 1);
    // Third uplink without ACK: the last retry went; the next time it is out of retries → expired no-ack.
    await r.uplink(KEYS, { fCnt: 2 }, { tmst: 3_000_000 });
    await r.event((e) => e.type === 'downlink' && e.status === 'sent' && e.id === sent.id);
    await r.uplink(KEYS, { fCnt: 3 }, { tmst: 4_000_000 });
    const expired = await r.event((e) => e.type === 'downlink' && e.status === 'expired');
    assert.equal(expired.reason, 'no-ack');
  } finally {
    await r.close();
  }
});
