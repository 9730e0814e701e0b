// A serial modem as the LoRaWAN network server's radio: the compiled daemon, an RN2483 simulator on a
// socat pty, an ABP device pinned to the modem's channel, HTTP for provisioning and commands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Encoder } from 'cbor-x';
import { api, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { ModemSimulator, sleep } from '../lpwan/serial/modem-simulator.js';
import { readDownlink, uplinkFrame, type DeviceKeys } from '../lpwan/frames.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const ABP: DeviceKeys = { devAddr: '26011234', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };

test('an ABP device heard by a serial modem: uplink through the network server into a state, the queued command sent by the modem in RX2 with IQ inverted', async () => {
  const dataDir = tempDataDir();
  const sim = new ModemSimulator('rn2483');
  await sim.start();
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  try {
    const { device, app } = provision(dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
      { name: 'led', is: 'actuator', profile: { type: 'boolean' } },
    ]);
    const configFile = join(dataDir, 'outpost.json');
    writeFileSync(
      configFile,
      JSON.stringify({ version: 1, radio: { gwmp: false, serial: [{ path: sim.hostPath, modem: 'rn2483', baudRate: 57600, frequency: 868100000, spreadingFactor: 7, bandwidth: 125 }] } }),
    );
    daemon = await startDaemon({ dataDir, args: ['--config', configFile] });
    const d = daemon;
    await sim.waitFor(() => sim.receiving, 'the modem armed by the daemon');
    const put = await api(d.url, 'PUT', `/device/${device.id}/lorawan`, {
      token: app.token,
      json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex') },
    });
    assert.equal(put.status, 200, put.text);
    const cmd = await api(d.url, 'PUT', `/device/${device.id}/asset/led/command`, { token: app.token, json: { value: true } });
    assert.equal(cmd.status, 202, cmd.text);

    // The network server may refuse a downlink the loaded machine could not start in time; each
    // uplink (a new counter) gives it another chance, as a real device's next uplink would.
    let txAt: number | undefined;
    let writtenAt = 0;
    let fCnt = 0;
    for (; fCnt < 3 && txAt === undefined; fCnt++) {
      const mark = sim.commands.length;
      writtenAt = sim.receivePacket(uplinkFrame(ABP, { fCnt, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 21 + fCnt })) }));
      await sim.waitFor(() => sim.commands.slice(mark).some((c) => c.text.startsWith('radio tx')) || sim.commands.slice(mark).filter((c) => c.text === 'radio rx 0').length >= 2, 'a downlink or a second re-arm', 10_000).catch(() => {});
      await sleep(200);
      txAt = sim.commands.slice(mark).find((c) => c.text.startsWith('radio tx'))?.at;
      if (txAt !== undefined) {
        const sequence = sim.commands.slice(mark).map((c) => c.text);
        const tx = sequence.findIndex((c) => c.startsWith('radio tx'));
        assert.deepEqual(sequence.slice(tx - 6, tx - 1), ['radio rxstop', 'radio set freq 869525000', 'radio set sf sf12', 'radio set bw 125', 'radio set iqi on']);
        const bytes = Buffer.from(sequence[tx]!.slice('radio tx '.length), 'hex');
        const down = readDownlink(ABP, bytes, 0);
        assert.equal(down.devAddr, '26011234');
        assert.equal(down.micValid, true);
        assert.deepEqual(cbor.decode(down.payload), { led: true });
      }
    }
    assert.ok(txAt !== undefined, `a downlink went out: ${JSON.stringify(sim.commandTexts().slice(-20))}`);
    assert.ok(txAt! - writtenAt >= 2000 - 40 - 20 && txAt! - writtenAt <= 2000 + 200, `TX command ${(txAt! - writtenAt).toFixed(0)} ms after the uplink line`);
    await sim.waitFor(() => sim.receiving && !sim.iqInverted && sim.commands.at(-1)?.text === 'radio rx 0', 'receive re-armed on the uplink channel');

    const state = await api(d.url, 'GET', `/device/${device.id}/asset/temperature/state`, { token: app.token });
    assert.equal(state.status, 200);
    assert.equal(typeof state.body.state.value, 'number');
    let downlinks: { body: any } | undefined;
    for (let i = 0; i < 100; i++) {
      downlinks = await api(d.url, 'GET', `/device/${device.id}/downlinks`, { token: app.token });
      if (downlinks.body?.data?.[0]?.status === 'sent') break;
      await sleep(50);
    }
    assert.equal(downlinks!.body.data[0].status, 'sent', JSON.stringify(downlinks!.body));
    assert.equal(await d.stop(), 0);
    daemon = undefined;
  } finally {
    await daemon?.stop();
    await sim.close();
    removeDir(dataDir);
  }
});
