// LoRaWAN layers against the published vectors (RFC 4493 CMAC, frames V1–V9, OTAA-A/B, airtime).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { aesCmac, cmacKey, cryptFrmPayload, dataMic, deriveSessionKeys, Direction, aesEncryptBlocks } from '../../src/lpwan/lorawan/crypto.js';
import { buildDataDownlink, buildJoinAccept, dataMicValid, joinRequestMicValid, onAirBytes, parseUplink, type DataUplink, type JoinRequest } from '../../src/lpwan/lorawan/phy.js';
import { MAX_FCNT_GAP, reconstructFCnt, replayedFCnt } from '../../src/lpwan/lorawan/counters.js';
import { EU868, US915, dataRateIndex, maxFrmPayload, timeOnAirMs } from '../../src/lpwan/lorawan/regions.js';
import { DutyCycleTracker, subBandOf } from '../../src/lpwan/lorawan/duty-cycle.js';
import { parseUplinkMacCommands } from '../../src/lpwan/mac/commands.js';
import { linkCheckAnswer } from '../../src/lpwan/mac/link-check.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const NWK = cmacKey(hex('44024241ed4ce9a68c6a8bc055233fd3'));
const APP = hex('ec925802ae430ca77fd3dd73cb2cc588');

function data(frameHex: string): DataUplink {
  const parsed = parseUplink(hex(frameHex));
  assert.ok(parsed.ok && parsed.frame.kind === 'data', `parses ${frameHex}`);
  return parsed.frame as DataUplink;
}

test('AES-CMAC matches RFC 4493', () => {
  const key = hex('2b7e151628aed2a6abf7158809cf4f3c');
  const msg = hex('6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710');
  const expected: Array<[number, string]> = [
    [0, 'bb1d6929e95937287fa37d129b756746'],
    [16, '070a16b46b4d4144f79bdd9dd04a287c'],
    [40, 'dfa66747de9ae63030ca32611497c827'],
    [64, '51f0bebf7e3b9d92fc49741779363cfe'],
  ];
  for (const [len, mac] of expected) assert.equal(aesCmac(key, msg.subarray(0, len)).toString('hex'), mac, `length ${len}`);
  // Precomputed subkeys give the same answer as a raw key.
  assert.equal(aesCmac(cmacKey(key), msg.subarray(0, 40)).toString('hex'), 'dfa66747de9ae63030ca32611497c827');
  // One cipher per key serves every MAC (it chains from call to call): in any order, and whatever
  // a caller does to a MAC it was given, the next ones are still right.
  for (const [len, mac] of [...expected].reverse()) {
    const got = aesCmac(key, msg.subarray(0, len));
    assert.equal(got.toString('hex'), mac, `again, length ${len}`);
    got.fill(0xff);
  }
  assert.equal(aesCmac(key, msg.subarray(0, 64)).toString('hex'), '51f0bebf7e3b9d92fc49741779363cfe');
});

test('V1: MIC and plaintext; a wrong AppSKey still passes the MIC', () => {
  const f = data('40f17dbe4900020001954378762b11ff0d');
  assert.equal(f.devAddr, '49BE7DF1');
  assert.equal(f.fCnt16, 2);
  assert.equal(f.fPort, 1);
  assert.equal(f.confirmed, false);
  assert.ok(dataMicValid(f, NWK, 2));
  assert.equal(cryptFrmPayload(APP, Direction.Up, f.devAddrLe, 2, f.frmPayload).toString('hex'), '74657374');
  assert.equal(cryptFrmPayload(hex('ec925802ae430ca77fd3dd73cb2cc580'), Direction.Up, f.devAddrLe, 2, f.frmPayload).toString('hex'), '5999fc3f');
});

test('V2: three-block payload', () => {
  const f = data('40f17dbe490004000155332de41a11adc072553544429ce7787707d1c316e027e7e5e334263376affb8aa17ad30075293f28dea8a20af3c5e7');
  assert.ok(dataMicValid(f, NWK, 4));
  assert.equal(cryptFrmPayload(APP, Direction.Up, f.devAddrLe, 4, f.frmPayload).toString(), 'The quick brown fox jumps over the lazy dog.');
});

test('V3: FPort with an empty payload; a changed MIC fails', () => {
  const f = data('40f17dbe49000300012a3518af');
  assert.equal(f.fPort, 1);
  assert.equal(f.frmPayload.length, 0);
  assert.ok(dataMicValid(f, NWK, 3));
  assert.ok(!dataMicValid(data('40f17dbe49000300012a3518aa'), NWK, 3));
});

test('V5: ADR + ADRACKReq, FPort 0 decrypted with NwkSKey', () => {
  const nwk = hex('581c4d08ef04cda30b1fef7a8b2c74b8');
  const f = data('4006dc00fcc07400000244925050');
  assert.equal(f.devAddr, 'FC00DC06');
  assert.ok(f.adr && f.adrAckReq && !f.ack);
  assert.equal(f.fCnt16, 116);
  assert.equal(f.fPort, 0);
  assert.ok(dataMicValid(f, cmacKey(nwk), 116));
  const mac = cryptFrmPayload(nwk, Direction.Up, f.devAddrLe, 116, f.frmPayload);
  assert.equal(mac.toString('hex'), '02');
  assert.deepEqual(parseUplinkMacCommands(mac).commands.map((c) => c.name), ['LinkCheckReq']);
});

test('V6: FOpts carry DevStatusAns; confirmed uplink', () => {
  const f = data('80040302010300000673070ae264d4f7e117d2c0');
  assert.equal(f.devAddr, '01020304');
  assert.ok(f.confirmed);
  assert.equal(f.fOpts.toString('hex'), '067307');
  assert.equal(f.fPort, 10);
  assert.ok(dataMicValid(f, cmacKey(hex('0102030405060708090a0b0c0d0e0f10')), 0));
  assert.equal(cryptFrmPayload(hex('100f0e0d0c0b0a090807060504030201'), Direction.Up, f.devAddrLe, 0, f.frmPayload).toString('hex'), '01020304');
  const { commands } = parseUplinkMacCommands(f.fOpts);
  assert.equal(commands[0]!.name, 'DevStatusAns');
  assert.deepEqual([...commands[0]!.payload], [115, 7]);
});

test('V8: the upper 16 bits of the counter decide the MIC', () => {
  const f = data('803412012600030202496759b8b0e56d8fc7');
  assert.equal(f.devAddr, '26011234');
  const { full, gap } = reconstructFCnt(0x000101f0, f.fCnt16);
  assert.equal(full, 0x00010203);
  assert.equal(gap, 0x13);
  assert.ok(dataMicValid(f, NWK, full));
  assert.ok(!dataMicValid(f, NWK, 0x0203));
  assert.equal(dataMic(NWK, Direction.Up, f.devAddrLe, 0x0203, f.micInput).toString('hex'), '8bed9b4b');
  assert.equal(cryptFrmPayload(APP, Direction.Up, f.devAddrLe, full, f.frmPayload).toString(), 'hello');
});

test('downlinks V4, V7, V9 are built byte for byte', () => {
  const devAddrLe = onAirBytes('49be7df1');
  const v4 = buildDataDownlink({ devAddrLe, nwkSKey: NWK, appSKey: APP, fCnt: 2, confirmed: false, ack: true, fPending: false, fPort: 1, payload: Buffer.alloc(0) });
  assert.equal(v4.toString('hex'), '60f17dbe4920020001f9d65d27');
  const v7 = buildDataDownlink({ devAddrLe, nwkSKey: NWK, appSKey: APP, fCnt: 5, confirmed: false, ack: true, fPending: false, fPort: 10, payload: hex('01020304') });
  assert.equal(v7.toString('hex'), '60f17dbe492005000a3fad619b89a57007');
  const v9 = buildDataDownlink({ devAddrLe, nwkSKey: NWK, appSKey: APP, fCnt: 7, confirmed: false, ack: false, fPending: false, fPort: 0, payload: hex('06') });
  assert.equal(v9.toString('hex'), '60f17dbe49000700007bf2b0303a');
  // An uplink-direction parse refuses downlink frames.
  const parsed = parseUplink(v7);
  assert.ok(!parsed.ok && parsed.reason === 'not-uplink');
});

test('OTAA-A and OTAA-B: join request MIC, keys, join accept, first uplink', () => {
  const appKey = hex('000102030405060708090a0b0c0d0e0f');
  for (const v of [
    { req: '00100000d07ed5b3703c2a1f000ba3040034 12c8c1cae1', nonce: 0x1234, appNonce: '0a0b0c', netId: '000000', devAddr: '01abcdef', cfList: undefined, accept: '20e3f4bc0e7f63e489b5eb05e717b32b1c', nwk: '6378edc0a40350fcf69dacf5ef53f3ef', app: 'b9f2e937f437b94385b1b444c1de072a', up: '40efcdab0100000001d66075397fa4b51c' },
    { req: '00100000d07ed5b3703c2a1f000ba304003512031e4ac6', nonce: 0x1235, appNonce: '0a0b0d', netId: '000013', devAddr: '26012345', cfList: '184e84e85684b85e84886684586e8400', accept: '20edcc670c566971b021b2cdbdd8a02a0e0c728dfdd850855a510cdc910e5bb7b2', nwk: '7ed1fd3fe2970b88398d1cb75fd9cf73', app: '7d74e41de3e43a1971acd183ef6bc71d', up: '40452301260000000100d4973dbbe2ad14' },
  ]) {
    const parsed = parseUplink(hex(v.req));
    assert.ok(parsed.ok && parsed.frame.kind === 'join-request');
    const jr = parsed.frame as JoinRequest;
    assert.equal(jr.joinEui, '70B3D57ED0000010');
    assert.equal(jr.devEui, '0004A30B001F2A3C');
    assert.equal(jr.devNonce, v.nonce);
    assert.ok(joinRequestMicValid(jr, appKey));
    assert.ok(!joinRequestMicValid(jr, hex('000102030405060708090a0b0c0d0e00')));
    const keys = deriveSessionKeys(appKey, onAirBytes(v.appNonce), onAirBytes(v.netId), jr.devNonceLe);
    assert.equal(keys.nwkSKey.toString('hex'), v.nwk);
    assert.equal(keys.appSKey.toString('hex'), v.app);
    const accept = buildJoinAccept({ appKey, appNonceLe: onAirBytes(v.appNonce), netIdLe: onAirBytes(v.netId), devAddrLe: onAirBytes(v.devAddr), dlSettings: 0, rxDelay: 1, cfList: v.cfList ? hex(v.cfList) : undefined });
    assert.equal(accept.toString('hex'), v.accept);
    // The device reads it with AES encrypt.
    assert.equal(aesEncryptBlocks(appKey, accept.subarray(1)).subarray(6, 10).toString('hex'), onAirBytes(v.devAddr).toString('hex'));
    const up = data(v.up);
    assert.ok(dataMicValid(up, cmacKey(keys.nwkSKey), 0));
    assert.equal(cryptFrmPayload(keys.appSKey, Direction.Up, up.devAddrLe, 0, up.frmPayload).toString('hex'), '01020304');
  }
});

test('public join request MIC vectors', () => {
  const a = parseUplink(hex('0039363463336913aa05693574323831330489c65b1304'));
  assert.ok(a.ok && joinRequestMicValid(a.frame as JoinRequest, hex('98929b92c49edba9676d646d3b612456')));
  const b = parseUplink(hex('00010101010101010102020202020202020303 09b97b32'));
  assert.ok(b.ok && joinRequestMicValid(b.frame as JoinRequest, hex('0102030405060708090a0b0c0d0e0f10')));
});

test('malformed frames are told apart from other networks’ traffic', () => {
  assert.deepEqual(parseUplink(Buffer.alloc(0)), { ok: false, reason: 'malformed' });
  assert.deepEqual(parseUplink(hex('41f17dbe4900020001954378762b11ff0d')), { ok: false, reason: 'unsupported-major' });
  assert.deepEqual(parseUplink(hex('40f17dbe4900020001')), { ok: false, reason: 'malformed' });
  // FOptsLen 15 in a 12-byte frame overruns the MIC.
  assert.deepEqual(parseUplink(hex('40f17dbe490f0200aabbccdd')), { ok: false, reason: 'malformed' });
  assert.deepEqual(parseUplink(hex('e0f17dbe4900020001954378762b11ff0d')), { ok: false, reason: 'not-uplink' });
  assert.deepEqual(parseUplink(hex('0001')), { ok: false, reason: 'malformed' });
});

test('counter reconstruction table', () => {
  const accepted: Array<[number, number, number]> = [
    [1, 1, 1],
    [65536, 0, 65536],
    [65537, 1, 65537],
    [0, 1, 1],
    [65537, 2, 65538],
    [4294967295, 0, 0],
  ];
  for (const [up, on, full] of accepted) {
    const r = reconstructFCnt(up, on);
    assert.equal(r.full, full, `${up}/${on}`);
    assert.ok(r.gap < MAX_FCNT_GAP);
  }
  for (const [up, on, replayed] of [
    [2, 1, 1],
    [65537, 0, 65536],
    [65536, 65535, 65535],
  ] as const) {
    assert.ok(reconstructFCnt(up, on).gap >= MAX_FCNT_GAP, `${up}/${on} refused`);
    assert.equal(replayedFCnt(up, on), replayed);
  }
  assert.ok(reconstructFCnt(10, 20010).gap >= MAX_FCNT_GAP);
  assert.equal(replayedFCnt(0, 5), undefined);
});

test('regions: data rates, RX1/RX2, payload limits', () => {
  assert.equal(dataRateIndex(EU868, 'SF12BW125'), 0);
  assert.equal(dataRateIndex(EU868, 'sf7bw125'), 5);
  assert.equal(dataRateIndex(EU868, 'SF7BW250'), 6);
  assert.equal(dataRateIndex(EU868, 'SF7BW500'), undefined);
  assert.deepEqual(EU868.rx1(868_100_000, 5, 0), { frequency: 868_100_000, dataRate: 5 });
  assert.equal(maxFrmPayload(EU868, 0), 51);
  assert.equal(maxFrmPayload(EU868, 3), 115);
  assert.equal(maxFrmPayload(EU868, 5), 222);
  assert.equal(maxFrmPayload(EU868, 0, 3), 48);
  assert.deepEqual(US915.rx1(904_300_000, 3, 0), { frequency: 924_500_000, dataRate: 13 });
  assert.equal(maxFrmPayload(US915, 0), 11);
  assert.equal(dataRateIndex(US915, 'SF12BW500'), 8);
});

test('time on air matches the reference table', () => {
  const table: Array<[number, boolean, number[]]> = [
    [12, false, [41.216, 72.192, 144.384, 288.768, 577.536, 991.232]],
    [13, true, [46.336, 82.432, 164.864, 288.768, 577.536, 1155.072]],
    [17, false, [46.336, 92.672, 164.864, 329.728, 659.456, 1155.072]],
    [23, true, [61.696, 113.152, 205.824, 370.688, 823.296, 1482.752]],
    [33, false, [71.936, 133.632, 246.784, 452.608, 905.216, 1810.432]],
    [64, true, [118.016, 215.552, 390.144, 698.368, 1560.576, 2793.472]],
  ];
  for (const [bytes, crc, values] of table) {
    values.forEach((ms, i) => assert.ok(Math.abs(timeOnAirMs(bytes, { spreadingFactor: 7 + i, bandwidth: 125 }, { crc }) - ms) < 0.001, `${bytes} B SF${7 + i}`));
  }
  assert.ok(Math.abs(timeOnAirMs(13, { spreadingFactor: 7, bandwidth: 250 }) - 23.168) < 0.001);
});

test('duty cycle: sub-bands and the one-hour budget', () => {
  assert.equal(subBandOf(868_100_000)?.name, 'M');
  assert.equal(subBandOf(867_100_000)?.name, 'L');
  assert.equal(subBandOf(869_525_000)?.name, 'P');
  assert.equal(subBandOf(868_650_000), undefined);
  const tracker = new DutyCycleTracker();
  const t0 = 1_000_000_000;
  const ack = timeOnAirMs(12, { spreadingFactor: 12, bandwidth: 125 }, { crc: false });
  let sent = 0;
  for (let i = 0; i < 400; i++) {
    const at = t0 + i * 1000;
    if (!tracker.check(869_525_000, ack, at).ok) break;
    tracker.record(869_525_000, ack, at);
    sent++;
  }
  assert.equal(sent, 363); // 360 s of band P budget / 991 ms
  const refused = tracker.check(869_525_000, ack, t0 + 400_000);
  assert.ok(!refused.ok && /sub-band P/.test(refused.reason));
  // An hour later the budget is back.
  assert.ok(tracker.check(869_525_000, ack, t0 + 3_700_000 + 400_000).ok);
  assert.ok(!tracker.check(868_650_000, 10, t0).ok);
});

test('LinkCheckAns margin and gateway count', () => {
  assert.deepEqual([...linkCheckAnswer(5, { spreadingFactor: 7, bandwidth: 125 }, 2)], [0x02, 12, 2]);
  assert.deepEqual([...linkCheckAnswer(-25, { spreadingFactor: 12, bandwidth: 125 }, 1)], [0x02, 0, 1]);
  // The first unknown command ends parsing.
  const { commands, unparsed } = parseUplinkMacCommands(hex('02 ff 02'));
  assert.equal(commands.length, 1);
  assert.equal(unparsed, 2);
});
