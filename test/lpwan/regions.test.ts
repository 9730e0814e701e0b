// Regional parameters (RP002-1.0.4) as vectors: RX1/RX2, largest payloads, the LinkADRReq channel
// masks of the 72-channel plans with the configured sub-band; and AU915 ADR on air through the daemon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AS923, AU915, EU868, US915, dataRateIndex, maxFrmPayload, regionByName, requiredSnr } from '../../src/lpwan/lorawan/regions.js';
import { linkAdrRequests } from '../../src/lpwan/mac/link-adr.js';
import { adrTarget } from '../../src/lpwan/adr/adr.js';
import type { DeviceKeys } from './frames.js';
import { startRig, until } from './daemon-rig.js';

const hex = (b: Buffer) => b.toString('hex');

test('AU915: data rates, RX1 channel and data rate by offset, RX2, payload sizes', () => {
  assert.equal(regionByName('AU915'), AU915);
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((dr) => AU915.dataRates[dr]), [12, 11, 10, 9, 8, 7].map((spreadingFactor) => ({ spreadingFactor, bandwidth: 125 })));
  assert.equal(dataRateIndex(AU915, 'SF8BW500'), 6);
  assert.equal(dataRateIndex(AU915, 'SF12BW500'), 8);
  // Uplink channel 8 (916.8 MHz) at DR2 → downlink channel 0 (923.3 MHz) at DR10.
  assert.deepEqual(AU915.rx1(916_800_000, 2, 0), { frequency: 923_300_000, dataRate: 10 });
  // Channel 12 (917.6 MHz) at DR5 → channel 4 (925.7 MHz) at DR13; with offset 3 → DR10.
  assert.deepEqual(AU915.rx1(917_600_000, 5, 0), { frequency: 925_700_000, dataRate: 13 });
  assert.deepEqual(AU915.rx1(917_600_000, 5, 3), { frequency: 925_700_000, dataRate: 10 });
  // 500 kHz channel 65 (917.5 MHz) at DR6 → channel 1 (923.9 MHz) at DR13; offset 5 → DR9.
  assert.deepEqual(AU915.rx1(917_500_000, 6, 0), { frequency: 923_900_000, dataRate: 13 });
  assert.deepEqual(AU915.rx1(917_500_000, 6, 5), { frequency: 923_900_000, dataRate: 9 });
  assert.equal(AU915.rx1(910_000_000, 2, 0), undefined, 'not an AU915 channel');
  assert.deepEqual(AU915.rx2, { frequency: 923_300_000, dataRate: 8 });
  assert.deepEqual([0, 2, 3, 4, 6, 8, 9, 10, 13].map((dr) => maxFrmPayload(AU915, dr)), [51, 51, 115, 242, 242, 53, 129, 242, 242]);
  assert.equal(AU915.dutyCycle, false);
  assert.equal(AU915.maxAdrDataRate, 5);
  assert.equal(AU915.maxTxPowerIndex, 14);
});

test('AS923: EU868-like rates, RX1 on the uplink frequency, RX2 923.2 MHz DR2, payload sizes', () => {
  assert.equal(regionByName('AS923'), AS923);
  assert.equal(dataRateIndex(AS923, 'SF7BW250'), 6);
  assert.deepEqual(AS923.rx1(923_400_000, 5, 0), { frequency: 923_400_000, dataRate: 5 });
  assert.deepEqual(AS923.rx1(923_200_000, 3, 2), { frequency: 923_200_000, dataRate: 1 });
  assert.deepEqual(AS923.rx1(923_200_000, 6, 0), { frequency: 923_200_000, dataRate: 5 }, 'RX1 never above DR5');
  assert.deepEqual(AS923.rx2, { frequency: 923_200_000, dataRate: 2 });
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7].map((dr) => maxFrmPayload(AS923, dr)), [51, 51, 115, 115, 242, 242, 242, 242]);
  assert.equal(AS923.maxTxPowerIndex, 7);
});

test('LinkADRReq blocks: default channels of EU868 and AS923, the configured sub-band of US915 and AU915', () => {
  const req = { dataRate: 3, txPower: 2, nbTrans: 1 };
  assert.equal(hex(linkAdrRequests(req, EU868.linkAdrMasks(2))), '0332070001');
  assert.equal(hex(linkAdrRequests(req, AS923.linkAdrMasks(2))), '0332030001');
  // Sub-band 2 = channels 8–15 + 65: ChMaskCntl 7 (all 125 kHz off, 500 kHz mask 0x0002), then ChMaskCntl 0 mask 0xFF00.
  assert.equal(hex(linkAdrRequests(req, US915.linkAdrMasks(2))), '0332020071' + '033200ff01');
  // Sub-band 1 = channels 0–7 + 64; sub-band 8 = channels 56–63 + 71 (block 3, high byte).
  assert.equal(hex(linkAdrRequests(req, AU915.linkAdrMasks(1))), '0332010071' + '0332ff0001');
  assert.equal(hex(linkAdrRequests({ ...req, nbTrans: 2 }, AU915.linkAdrMasks(8))), '0332800072' + '033200ff32');
});

test('ADR per region: the required SNR follows the spreading factor, the data rate stops at the fastest 125 kHz rate', () => {
  assert.equal(requiredSnr(US915.dataRates[0]!), -15, 'US915 DR0 = SF10');
  const history = Array(20).fill(10);
  // US915 DR0 (SF10): 10 − (−15) − 10 = 15 → 5 steps: DR3 (the maximum), then 2 power steps.
  assert.deepEqual(adrTarget({ dataRate: 0, txPower: 0, history }, US915, { installationMargin: 10, maxDataRate: 5 }), { dataRate: 3, txPower: 2 });
  // AU915 DR0 (SF12): 10 − (−20) − 10 = 20 → 6 steps: DR5, then 1 power step.
  assert.deepEqual(adrTarget({ dataRate: 0, txPower: 0, history }, AU915, { installationMargin: 10, maxDataRate: 5 }), { dataRate: 5, txPower: 1 });
  // Not enough history yet.
  assert.equal(adrTarget({ dataRate: 0, txPower: 0, history: history.slice(1) }, AU915, { installationMargin: 10, maxDataRate: 5 }), undefined);
});

test('AU915 through the daemon: RX1 on the 500 kHz downlink channel, the LinkADRReq block with sub-band 2 on air', async () => {
  const keys: DeviceKeys = { devAddr: '26011238', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };
  const r = await startRig({ region: 'AU915', subBand: 2 });
  try {
    await r.lorawan({ activation: 'abp', devAddr: keys.devAddr, nwkSKey: keys.nwkSKey.toString('hex'), appSKey: keys.appSKey.toString('hex') });
    for (let fCnt = 0; fCnt < 20; fCnt++) await r.uplink(keys, { fCnt, adr: true }, { freq: 916.8, datr: 'SF12BW125', lsnr: 5 });
    await until(() => r.fwd.pullResps().length === 1, 'the LinkADRReq');
    const [{ txpk, frame }] = r.downlinks(keys, () => 0);
    assert.equal(txpk.freq, 923.3);
    assert.equal(txpk.datr, 'SF12BW500');
    assert.ok(frame.micValid);
    // 5 − (−20) − 10 = 15 → 5 steps: DR0 → DR5, power index 0.
    assert.equal(frame.fOpts.toString('hex'), '0350020071' + '035000ff01');
  } finally {
    await r.close();
  }
});
