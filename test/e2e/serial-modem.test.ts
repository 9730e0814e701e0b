import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, cli, provision, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { ModemSimulator, sleep } from '../lpwan/serial/modem-simulator.js';

// A raw point-to-point sensor: byte 0..1 temperature in 0.1 °C (signed, big-endian), byte 2 humidity %.
const CODEC = {
  uplink: {
    format: 'js',
    script: `function decodeUplink(input) {
      var b = input.bytes;
      if (b.length !== 3) return { errors: ['expected 3 bytes, got ' + b.length] };
      var t = (b[0] << 8) | b[1];
      if (t & 0x8000) t -= 0x10000;
      return { data: { temperature: t / 10, humidity: b[2] } };
    }`,
  },
};

test('a raw P2P frame heard by a serial modem is decoded by the modem codec into states of its device; unclaimed frames of a modem without a device are counted and dropped', async () => {
  const dataDir = tempDataDir();
  const rn2483 = new ModemSimulator('rn2483');
  const rak3172 = new ModemSimulator('rak3172');
  await rn2483.start();
  await rak3172.start();
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  try {
    const { device, app } = provision(dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
      { name: 'humidity', is: 'sensor', profile: { type: 'integer', minimum: 0, maximum: 100 } },
    ]);
    const configFile = join(dataDir, 'outpost.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        version: 1,
        radio: {
          serial: [
            { path: rn2483.hostPath, modem: 'rn2483', baudRate: 57600, frequency: 869525000, spreadingFactor: 9, bandwidth: 125, codec: CODEC, device: device.id, initTimeoutMs: 500 },
            { path: rak3172.hostPath, modem: 'rak3172', baudRate: 115200, frequency: 868100000, spreadingFactor: 7, bandwidth: 125 },
          ],
        },
      }),
    );
    daemon = await startDaemon({ dataDir, args: ['--config', configFile] });
    const d = daemon;
    await rn2483.waitFor(() => rn2483.receiving, 'the RN2483 armed by the daemon');
    await rak3172.waitFor(() => rak3172.receiving, 'the RAK3172 armed by the daemon');
    assert.ok(rn2483.commandTexts().includes('radio set freq 869525000') && rn2483.commandTexts().includes('radio set sf sf9'));
    for (let i = 0; i < 100; i++) {
      const health = await api(d.url, 'GET', '/healthz');
      if (health.body?.serial?.every((s: { up: boolean }) => s.up)) break;
      await sleep(50);
    }

    rn2483.receivePacket(Buffer.from('00E741', 'hex')); // 23.1 °C, 65 %
    let temperature: { status: number; body: any } | undefined;
    for (let i = 0; i < 200; i++) {
      temperature = await api(d.url, 'GET', `/device/${device.id}/asset/temperature/state`, { token: app.token });
      if (temperature.status === 200) break;
      await sleep(50);
    }
    assert.equal(temperature!.status, 200);
    assert.equal(temperature!.body.state.value, 23.1);
    const humidity = await api(d.url, 'GET', `/device/${device.id}/asset/humidity/state`, { token: app.token });
    assert.equal(humidity.body.state.value, 65);
    await rn2483.waitFor(() => rn2483.receiving, 're-armed after the packet');

    // Bytes the codec refuses are kept raw and reported; the source is serial:<path>.
    rn2483.receivePacket(Buffer.from('FFFF', 'hex'));
    let uplinks: { body: any } | undefined;
    for (let i = 0; i < 200; i++) {
      uplinks = await api(d.url, 'GET', `/device/${device.id}/uplinks`, { token: app.token });
      if (uplinks.body?.data?.length === 2) break;
      await sleep(50);
    }
    assert.equal(uplinks!.body.data.length, 2, JSON.stringify(uplinks!.body));
    const sources = uplinks!.body.data.map((u: { source: string }) => u.source);
    assert.deepEqual(sources, [`serial:${rn2483.hostPath}`, `serial:${rn2483.hostPath}`]);
    assert.ok(uplinks!.body.data.some((u: { payload: string }) => u.payload === 'FFFF'));

    // The RAK3172 has no raw device: its frame (LoRaWAN or not, no network server claims it) is counted and dropped.
    rak3172.receivePacket(Buffer.from('40f17dbe4900020001954378762b11ff0d', 'hex'), -70, 5);
    const dropped = `outpost_serial_raw_frames_total{source="serial:${rak3172.hostPath}",outcome="dropped_no_device"} 1`;
    let metrics = '';
    for (let i = 0; i < 200 && !metrics.includes(dropped); i++) {
      metrics = (await api(d.url, 'GET', '/metrics', { token: app.token })).text;
      await sleep(50);
    }
    assert.ok(metrics.includes(dropped), metrics.split('\n').filter((l) => l.includes('serial')).join('\n'));
    assert.ok(metrics.includes(`outpost_serial_raw_frames_total{source="serial:${rn2483.hostPath}",outcome="stored"} 1`));
    assert.ok(metrics.includes(`outpost_serial_modem_up{source="serial:${rak3172.hostPath}"} 1`));

    assert.equal(await d.stop(), 0);
    daemon = undefined;
  } finally {
    await daemon?.stop();
    await rn2483.close();
    await rak3172.close();
    removeDir(dataDir);
  }
});

test('an invalid radio.serial entry stops the daemon with exit 2 naming the key', async () => {
  const dataDir = tempDataDir();
  try {
    const write = (serial: unknown) => {
      const file = join(dataDir, 'bad.json');
      writeFileSync(file, JSON.stringify({ version: 1, radio: { serial } }));
      return cli(['run', '--config', file, '--data', dataDir], { OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' });
    };
    const base = { path: '/dev/serial/by-id/usb-x', modem: 'rn2483', baudRate: 57600, frequency: 868100000, spreadingFactor: 7, bandwidth: 125 };
    const cases: Array<[unknown, RegExp]> = [
      [[{ ...base, modem: 'sx1276' }], /radio\.serial\.0\.modem: must be one of "rn2483", "rak3172", "rak811"/],
      [[{ ...base, spreadingFactor: 13 }], /radio\.serial\.0\.spreadingFactor: must be <= 12/],
      [[{ ...base, bandwidth: 62 }], /radio\.serial\.0\.bandwidth/],
      [[{ path: base.path, modem: 'rak3172', baudRate: 115200, spreadingFactor: 7, bandwidth: 125 }], /radio\.serial\.0\.frequency: is required/],
      [[base, { ...base }], /radio\.serial\.1\.path: .* configured twice/],
      [[{ ...base, codec: { uplink: { format: 'js', script: 'x' } } }], /radio\.serial\.0\.device: is required with radio\.serial\.0\.codec/],
      [[{ ...base, device: 'dev1', codec: { uplink: { format: 'abcl', document: '{"not": "abcl"' } } }], /radio\.serial\.0\.codec: /],
      [[{ ...base, txLeadMs: -1 }], /radio\.serial\.0\.txLeadMs/],
      [[{ ...base, colour: 'red' }], /radio\.serial\.0: unknown key "colour"/],
    ];
    for (const [serial, message] of cases) {
      const r = write(serial);
      assert.equal(r.code, 2, `${JSON.stringify(serial)}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
  } finally {
    removeDir(dataDir);
  }
});
