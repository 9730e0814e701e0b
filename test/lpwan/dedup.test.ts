// One deduplication for every source (docs/lpwan.md, "Several gateways"): copies of one uplink from
// two packet forwarders (UDP) and a serial modem (RAK3172 simulator on a socat pty) are merged in the
// network server; the answer goes through the best copy's source; every copy is in `gateways`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder } from 'cbor-x';
import { api } from '../helpers/daemon.js';
import { ForwarderSimulator } from './forwarder.js';
import { readDownlink, uplinkFrame, type DeviceKeys } from './frames.js';
import { ModemSimulator } from './serial/modem-simulator.js';
import { sleep, startRig, until } from './daemon-rig.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const KEYS: DeviceKeys = { devAddr: '26011239', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };

test('copies from two forwarders and a serial modem are one uplink; the ACK goes through the best copy\'s source', async () => {
  const sim = new ModemSimulator('rak3172');
  await sim.start();
  const second = new ForwarderSimulator('b827ebfffe000002');
  const r = await startRig({ serial: [{ path: sim.hostPath, modem: 'rak3172', baudRate: 115200, frequency: 868100000, spreadingFactor: 7, bandwidth: 125 }] });
  try {
    await sim.waitFor(() => sim.receiving, 'the modem armed by the daemon');
    await second.connect(r.daemon.gwmpPort);
    await second.pull();
    await r.lorawan({ activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex') });
    const serial = `serial:${sim.hostPath}`;

    // 1. The modem hears it best: the ACK goes out through the modem (RX2), not through a forwarder.
    let frame = uplinkFrame(KEYS, { fCnt: 0, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 1 })), confirmed: true });
    await r.fwd.push([{ payload: frame, lsnr: -8, rssi: -110, tmst: 100 }]);
    await second.push([{ payload: frame, lsnr: 3, rssi: -90, tmst: 200 }]);
    const mark = sim.commands.length;
    sim.receivePacket(frame, -70, 12);
    let up = await r.event((e) => e.type === 'uplink' && e.fCnt === 0);
    assert.equal(up.source, serial);
    assert.equal(up.snr, 12);
    assert.deepEqual(up.gateways.map((g: { source: string }) => g.source).sort(), ['gwmp:B827EBFFFE000001', 'gwmp:B827EBFFFE000002', serial].sort());
    await sim.waitFor(() => sim.commands.slice(mark).some((c) => c.text.startsWith('AT+PSEND=')), 'the ACK sent by the modem', 8000);
    const psend = sim.commands.slice(mark).find((c) => c.text.startsWith('AT+PSEND='))!.text;
    const ack = readDownlink(KEYS, Buffer.from(psend.slice('AT+PSEND='.length), 'hex'), 0);
    assert.ok(ack.micValid && ack.ack);
    assert.ok(sim.commands.slice(mark).some((c) => c.text.startsWith('AT+P2P=869525000:12:125')), 'RX2: 869.525 MHz SF12');

    // 2. The second forwarder hears it best: the ACK goes through it (RX1 at its tmst + 1 s).
    frame = uplinkFrame(KEYS, { fCnt: 1, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 2 })), confirmed: true });
    sim.receivePacket(frame, -100, -2);
    await r.fwd.push([{ payload: frame, lsnr: -8, tmst: 300 }]);
    await second.push([{ payload: frame, lsnr: 9, tmst: 400 }]);
    up = await r.event((e) => e.type === 'uplink' && e.fCnt === 1);
    assert.equal(up.source, 'gwmp:B827EBFFFE000002');
    assert.equal(up.gateways.length, 3);
    await until(() => second.pullResps().length === 1, 'the ACK through the second forwarder');
    assert.equal(second.pullResps()[0]!.txpk.tmst, 1_000_400);
    assert.ok(readDownlink(KEYS, Buffer.from(second.pullResps()[0]!.txpk.data, 'base64'), 1).micValid);

    // A late copy (a straggler) is dropped: a duplicate within the window, a refused replay after it; never a second uplink.
    await sleep(100);
    await r.fwd.push([{ payload: frame, lsnr: 0, tmst: 500 }]);
    await sleep(400);
    assert.equal(r.fwd.pullResps().length, 0, 'nothing through the worse forwarder');
    const history = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/states`, { token: r.app });
    assert.deepEqual(history.body.data.map((s: { value: number }) => s.value), [2, 1]);
    assert.equal(r.events().filter((e) => e.type === 'uplink').length, 2);
    const metrics = await api(r.daemon.url, 'GET', '/metrics');
    assert.match(metrics.text, /outpost_lpwan_refused_total\{reason="(duplicate|fcnt-replay)"\} 1/);
  } finally {
    second.close();
    await r.close();
    await sim.close();
  }
});

test('with one gateway online an uplink is handled at once, not held for radio.dedupMs; with two it waits for the second copy', async () => {
  // A long window, so waiting for it cannot be mistaken for a slow machine.
  const r = await startRig({ dedupMs: 2000 });
  const second = new ForwarderSimulator('b827ebfffe000002');
  try {
    await r.lorawan({ activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex') });
    let started = Date.now();
    await r.fwd.push([{ payload: uplinkFrame(KEYS, { fCnt: 0, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 1 })) }), tmst: 100 }]);
    await r.event((e) => e.type === 'uplink' && e.fCnt === 0);
    const alone = Date.now() - started;
    assert.ok(alone < 1000, `one gateway online: the uplink took ${alone} ms with a 2 000 ms dedup window`);

    // A second gateway online: a frame only the first one heard waits for the window to close.
    await second.connect(r.daemon.gwmpPort);
    await second.pull();
    started = Date.now();
    await r.fwd.push([{ payload: uplinkFrame(KEYS, { fCnt: 1, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 2 })) }), tmst: 200 }]);
    await r.event((e) => e.type === 'uplink' && e.fCnt === 1);
    const waited = Date.now() - started;
    assert.ok(waited >= 1900, `two gateways online: the uplink was handed on after ${waited} ms, before the window closed`);

    // Both heard it: the second copy closes the window at once.
    const frame = uplinkFrame(KEYS, { fCnt: 2, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 3 })) });
    started = Date.now();
    await r.fwd.push([{ payload: frame, tmst: 300 }]);
    await second.push([{ payload: frame, tmst: 300 }]);
    await r.event((e) => e.type === 'uplink' && e.fCnt === 2);
    const both = Date.now() - started;
    assert.ok(both < 1000, `every gateway online delivered its copy: handed on after ${both} ms`);
  } finally {
    second.close();
    await r.close();
  }
});
