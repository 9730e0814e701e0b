// The LNS protocol pieces on their own: EUI forms, PHYPayloads rebuilt from updf/jreq fields,
// exact 64-bit xtime, and the channel plans of router_config per region.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseEui } from '../../src/doors/basic-station/eui.js';
import { readStationMessage, stationJson } from '../../src/doors/basic-station/messages.js';
import { routerConfig } from '../../src/doors/basic-station/router-config.js';
import { AU915, EU868, US915 } from '../../src/lpwan/lorawan/regions.js';
import { joinRequest, uplinkFrame } from './frames.js';
import { jreqFields, updfFields } from './station.js';

test('EUIs in every form a station writes them', () => {
  for (const form of ['b827:ebff:fe61:51b0', 'B8-27-EB-FF-FE-61-51-B0', 'b8:27:eb:ff:fe:61:51:b0', 'b827ebfffe6151b0']) assert.equal(parseEui(form), 'B827EBFFFE6151B0', form);
  assert.equal(parseEui('::1'), '0000000000000001');
  assert.equal(parseEui('1::'), '0001000000000000');
  assert.equal(parseEui('b827::51b0'), 'B8270000000051B0');
  assert.equal(parseEui(1), '0000000000000001');
  for (const bad of ['', ':::', '1:2:3:4:5', 'g827ebfffe6151b0', 'b827ebfffe6151b', -1, 1.5, null, {}, 'x'.repeat(100)]) assert.equal(parseEui(bad), undefined, String(bad));
});

test('updf and jreq fields give back the exact PHYPayload (DevAddr and MIC as signed 32-bit)', () => {
  const keys = { devAddr: 'F6011234', nwkSKey: Buffer.alloc(16, 7), appSKey: Buffer.alloc(16, 9) };
  for (const frame of [
    uplinkFrame(keys, { fCnt: 65535, fPort: 2, payload: Buffer.from('hello'), confirmed: true, fOpts: Buffer.from([0x02]) }),
    uplinkFrame(keys, { fCnt: 3 }),
    uplinkFrame(keys, { fCnt: 4, fPort: 0, payload: Buffer.from([0x02]) }),
  ]) {
    const text = JSON.stringify({ msgtype: 'updf', ...updfFields(frame), DR: 5, Freq: 868_100_000, upinfo: { rctx: 0, xtime: 1, rssi: -50, snr: 5 } });
    const read = readStationMessage(text);
    assert.ok(read.ok && read.message.msgtype === 'updf');
    assert.deepEqual(read.message.payload, frame);
  }
  const join = joinRequest(Buffer.alloc(16, 1), '70B3D57ED0000010', '0004A30B001F2A3C', 0xfffe);
  const read = readStationMessage(JSON.stringify({ msgtype: 'jreq', ...jreqFields(join), DR: 0, Freq: 868_500_000, upinfo: {} }));
  assert.ok(read.ok && read.message.msgtype === 'jreq');
  assert.deepEqual(read.message.payload, join);
  assert.equal(read.message.devEui, '0004A30B001F2A3C');
});

test('xtime beyond 2^53 is kept exact both ways', () => {
  const read = readStationMessage('{"msgtype":"dntxed","diid":7,"xtime":36028797019975467}');
  assert.ok(read.ok && read.message.msgtype === 'dntxed');
  assert.equal(read.message.xtime, '36028797019975467');
  assert.equal(stationJson({ msgtype: 'dnmsg', xtime: '36028797019975467', diid: 1 }), '{"msgtype":"dnmsg","xtime":36028797019975467,"diid":1}');
});

test('router_config channel plans: EU868 defaults, US915/AU915 sub-band and its 500 kHz channel', () => {
  const plan = (conf: Record<string, any>) => {
    const board = conf.sx1301_conf[0];
    const multi = Array.from({ length: 8 }, (_, i) => board[`chan_multiSF_${i}`]).filter(Boolean).map((c) => board[`radio_${c.radio}`].freq + c.if);
    const std = board.chan_Lora_std.enable ? board[`radio_${board.chan_Lora_std.radio}`].freq + board.chan_Lora_std.if : undefined;
    return { region: conf.region, multi: multi.sort(), std };
  };
  assert.deepEqual(plan(routerConfig(EU868, 1, 0)), { region: 'EU863', multi: [867_100_000, 867_300_000, 867_500_000, 867_700_000, 867_900_000, 868_100_000, 868_300_000, 868_500_000], std: 868_300_000 });
  assert.deepEqual(plan(routerConfig(US915, 2, 0)), { region: 'US902', multi: [903_900_000, 904_100_000, 904_300_000, 904_500_000, 904_700_000, 904_900_000, 905_100_000, 905_300_000], std: 904_600_000 });
  assert.deepEqual(plan(routerConfig(AU915, 1, 0)), { region: 'AU915', multi: [915_200_000, 915_400_000, 915_600_000, 915_800_000, 916_000_000, 916_200_000, 916_400_000, 916_600_000], std: 915_900_000 });
  const us = routerConfig(US915, 2, 0);
  assert.deepEqual((us.DRs as number[][])[4], [8, 500, 0]);
  assert.deepEqual((us.DRs as number[][])[8], [12, 500, 1]);
  assert.deepEqual((us.DRs as number[][])[5], [-1, 0, 0]);
});
