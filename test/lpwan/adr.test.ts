// ADR end to end (docs/lpwan.md, "ADR"): the compiled daemon, a packet forwarder simulator over UDP,
// the LinkADRReq read from the bytes that go on air (MIC checked), answers as a device sends them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api } from '../helpers/daemon.js';
import { startRig, sleep, until, type Rig } from './daemon-rig.js';
import type { DeviceKeys } from './frames.js';
import { gpsTimeSeconds } from '../../src/lpwan/mac/device-time.js';

const KEYS: DeviceKeys = { devAddr: '26011234', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };
const ABP = { activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex') };

// The rule, written out independently of the implementation: EU868 DR0…DR5 = SF12…SF7.
const REQUIRED_SNR = [-20, -17.5, -15, -12.5, -10, -7.5];
const SF_OF_DR = [12, 11, 10, 9, 8, 7];
function expected(dr: number, txPower: number, maxSnr: number, margin = 10, maxDr = 5): { dr: number; txPower: number } {
  let steps = Math.floor((maxSnr - REQUIRED_SNR[dr]! - margin) / 3);
  while (steps > 0 && dr < maxDr) (dr++, steps--);
  while (steps > 0 && txPower < 7) (txPower++, steps--);
  while (steps < 0 && txPower > 0) (txPower--, steps++);
  return { dr, txPower };
}
const datr = (dr: number) => `SF${SF_OF_DR[dr]}BW125`;
/** LinkADRReq as EU868 sends it: DR<<4|TXPower, ChMask 0x0007 (868.1/868.3/868.5), ChMaskCntl 0, NbTrans 1. */
const linkAdrReq = (dr: number, txPower: number) => Buffer.from([0x03, (dr << 4) | txPower, 0x07, 0x00, 0x01]).toString('hex');

/** Drives one device: counters, and the downlinks read as the device reads them. */
class Device {
  fCnt = 0;
  fCntDown = 0;
  seen = 0;
  constructor(readonly r: Rig) {}
  up(o: { snr: number; dr: number; adr?: boolean; fOpts?: Buffer; adrAckReq?: boolean; confirmed?: boolean }) {
    return this.r.uplink(KEYS, { fCnt: this.fCnt++, adr: o.adr ?? true, fOpts: o.fOpts, adrAckReq: o.adrAckReq, confirmed: o.confirmed }, { lsnr: o.snr, datr: datr(o.dr), tmst: 1_000_000 * this.fCnt });
  }
  /** The next downlink on air, decoded with the next downlink counter and its MIC checked. */
  async next() {
    await until(() => this.r.fwd.pullResps().length > this.seen, 'a PULL_RESP');
    const txpk = this.r.fwd.pullResps()[this.seen++]!.txpk;
    const all = this.r.downlinks(KEYS, () => this.fCntDown);
    const frame = all[this.seen - 1]!.frame;
    assert.ok(frame.micValid, `downlink MIC valid with FCntDown ${this.fCntDown}`);
    assert.equal(frame.fCnt16, this.fCntDown & 0xffff);
    this.fCntDown++;
    return { txpk, frame };
  }
  /** No downlink went out since the last one read (after giving the daemon time to send one). */
  async none() {
    await sleep(300);
    assert.equal(this.r.fwd.pullResps().length, this.seen, 'no downlink');
  }
}

const adrOf = async (r: Rig) => (await api(r.daemon.url, 'GET', `/device/${r.deviceId}/lorawan`, { token: r.app })).body.adr;

test('ADR: raise the data rate, lower the power, raise it again, NACK holds off 20 uplinks, an unanswered request is sent again', async () => {
  const r = await startRig();
  try {
    await r.lorawan(ABP);
    const d = new Device(r);
    // 1. Raise the data rate: 20 uplinks at DR0, best SNR 5 dB.
    const snrs = [-3, 5, 1, 0, -2, 4, 2, 3, -1, 0, 1, 2, 3, 4, 0, -5, 1, 2, 3, 0];
    for (let i = 0; i < 19; i++) {
      const up = await d.up({ snr: snrs[i]!, dr: 0 });
      assert.equal(up.adr, true);
      assert.equal(up.adrAckReq, false);
    }
    await d.none();
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF12BW125', txPower: 0, nbTrans: 1, uplinks: 19, pending: false });
    await d.up({ snr: snrs[19]!, dr: 0 });
    let want = expected(0, 0, 5);
    assert.deepEqual(want, { dr: 5, txPower: 0 });
    let { txpk, frame } = await d.next();
    assert.equal(txpk.datr, 'SF12BW125', 'RX1 at the uplink data rate');
    assert.equal(frame.fOpts.toString('hex'), linkAdrReq(want.dr, want.txPower));
    assert.equal(frame.fPort, undefined, 'nothing queued: an empty downlink carries it');
    assert.ok(frame.adr, 'FCtrl.ADR set: the network controls the data rate');
    const sent = await r.event((e) => e.type === 'downlink' && e.status === 'sent');
    assert.deepEqual(sent.macCommands, [{ cid: 'LinkADRReq', dataRate: 'SF7BW125', txPower: 0, nbTrans: 1 }]);
    assert.equal((await adrOf(r)).pending, true);
    // The device applies it and answers at DR5.
    let up = await d.up({ snr: 9, dr: 5, fOpts: Buffer.from([0x03, 0x07]) });
    assert.deepEqual(up.macCommands, [{ cid: 'LinkADRAns', channelMaskAck: true, dataRateAck: true, powerAck: true }]);
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF7BW125', txPower: 0, nbTrans: 1, uplinks: 1, pending: false });

    // 2. Lower the power: at DR5 (the maximum) a 10 dB best SNR leaves 2 steps for the power.
    for (let i = 0; i < 19; i++) await d.up({ snr: i === 7 ? 10 : 6, dr: 5 });
    want = expected(5, 0, 10);
    assert.deepEqual(want, { dr: 5, txPower: 2 });
    ({ frame } = await d.next());
    assert.equal(frame.fOpts.toString('hex'), linkAdrReq(5, 2));
    // (The answer's own SNR starts the new history.)
    await d.up({ snr: -6, dr: 5, fOpts: Buffer.from([0x03, 0x07]) });
    assert.equal((await adrOf(r)).txPower, 2);

    // 3. Raise the power: the link got worse (best −6 dB): negative steps, the data rate stays.
    for (let i = 0; i < 19; i++) await d.up({ snr: -6 - (i % 3), dr: 5 });
    want = expected(5, 2, -6);
    assert.deepEqual(want, { dr: 5, txPower: 0 });
    ({ frame } = await d.next());
    assert.equal(frame.fOpts.toString('hex'), linkAdrReq(5, 0));
    // 4. NACK (channel mask refused): nothing changes, no new request for the next 20 uplinks.
    up = await d.up({ snr: 10, dr: 5, fOpts: Buffer.from([0x03, 0x06]) });
    assert.deepEqual(up.macCommands, [{ cid: 'LinkADRAns', channelMaskAck: false, dataRateAck: true, powerAck: true }]);
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF7BW125', txPower: 2, nbTrans: 1, uplinks: 20, pending: false });
    for (let i = 0; i < 20; i++) await d.up({ snr: 10, dr: 5 });
    await d.none();
    // The 21st: the power is lowered again (a refused request does not stop ADR for good).
    await d.up({ snr: 10, dr: 5 });
    ({ frame } = await d.next());
    assert.equal(frame.fOpts.toString('hex'), linkAdrReq(...(Object.values(expected(5, 2, 10)) as [number, number])));

    // 5. Unanswered (the downlink was lost): the next uplink without an answer expires it; after
    // three more uplinks the request goes again, so a device is never stuck on a lost request.
    await d.up({ snr: 10, dr: 5 });
    assert.equal((await adrOf(r)).pending, false);
    for (let i = 0; i < 3; i++) await d.up({ snr: 10, dr: 5 });
    await d.none();
    await d.up({ snr: 10, dr: 5 });
    ({ frame } = await d.next());
    assert.equal(frame.fOpts.toString('hex'), linkAdrReq(5, 4));
    await d.up({ snr: 10, dr: 5, fOpts: Buffer.from([0x03, 0x07]) });
    assert.deepEqual(await adrOf(r), { enabled: true, dataRate: 'SF7BW125', txPower: 4, nbTrans: 1, uplinks: 1, pending: false });
    const metrics = await api(r.daemon.url, 'GET', '/metrics');
    assert.doesNotMatch(metrics.text, /internal-error/);
  } finally {
    await r.close();
  }
});

test('ADRAckReq always gets a downlink; DeviceTimeReq gets the GPS time; no LinkADRReq without the ADR bit or with "adr": false', async () => {
  const r = await startRig();
  try {
    await r.lorawan(ABP);
    const d = new Device(r);
    // ADRAckReq on an unconfirmed uplink with nothing queued: an empty downlink all the same.
    const up = await d.up({ snr: 0, dr: 3, adrAckReq: true });
    assert.equal(up.adrAckReq, true);
    let { txpk, frame } = await d.next();
    assert.equal(txpk.datr, 'SF9BW125');
    assert.equal(frame.fPort, undefined);
    assert.equal(frame.fOpts.length, 0);
    // DeviceTimeReq (CID 0x0D): DeviceTimeAns with the GPS time of the uplink's reception.
    const before = gpsTimeSeconds(Date.now());
    await d.up({ snr: 0, dr: 3, fOpts: Buffer.from([0x0d]) });
    ({ frame } = await d.next());
    assert.equal(frame.fOpts[0], 0x0d);
    assert.equal(frame.fOpts.length, 6);
    const gps = frame.fOpts.readUInt32LE(1) + frame.fOpts[5]! / 256;
    assert.ok(gps >= before - 1 && gps <= gpsTimeSeconds(Date.now()) + 1, `GPS time ${gps} near ${before}`);
    // 1980-01-06 is GPS 0; 2026 is about 1.4e9 s later (with 18 leap seconds).
    assert.ok(gps > 1.4e9 && gps < 1.6e9);
    // Uplinks without the ADR bit: the device keeps its data rate, nothing is requested.
    for (let i = 0; i < 22; i++) await d.up({ snr: 10, dr: 0, adr: false });
    await d.none();
    // ADR off for the device: its uplinks ask for ADR, nothing is requested either.
    const put = await r.lorawan({ ...ABP, fCntUp: d.fCnt, fCntDown: d.fCntDown, adr: false });
    assert.equal(put.adr.enabled, false);
    for (let i = 0; i < 22; i++) await d.up({ snr: 10, dr: 0 });
    await d.none();
    assert.deepEqual(await adrOf(r), { enabled: false, dataRate: 'SF12BW125', txPower: 0, nbTrans: 1, uplinks: 20, pending: false });
    // A confirmed uplink's ACK carries no LinkADRReq and no ADR bit.
    await d.up({ snr: 10, dr: 0, confirmed: true });
    ({ frame } = await d.next());
    assert.ok(frame.ack);
    assert.equal(frame.fOpts.length, 0);
    assert.equal(frame.adr, false);
  } finally {
    await r.close();
  }
});

test('radio.adr false: no LinkADRReq is ever sent; radio.adr settings change the decision', async () => {
  const off = await startRig({ adr: false });
  try {
    await off.lorawan(ABP);
    const d = new Device(off);
    for (let i = 0; i < 25; i++) await d.up({ snr: 10, dr: 0 });
    await d.none();
    assert.equal((await adrOf(off)).pending, false);
  } finally {
    await off.close();
  }
  // A 20 dB margin and DR3 at most: best SNR 12 at DR0 → floor((12 + 20 − 20) / 3) = 4 steps: DR3, then power 1.
  const custom = await startRig({ adr: { installationMargin: 20, maxDataRate: 3 } });
  try {
    await custom.lorawan(ABP);
    const d = new Device(custom);
    for (let i = 0; i < 20; i++) await d.up({ snr: 12, dr: 0 });
    const want = expected(0, 0, 12, 20, 3);
    assert.deepEqual(want, { dr: 3, txPower: 1 });
    const { frame } = await d.next();
    assert.equal(frame.fOpts.toString('hex'), linkAdrReq(3, 1));
  } finally {
    await custom.close();
  }
});
