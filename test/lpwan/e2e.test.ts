// The radio side end to end: the compiled daemon, a packet forwarder simulator over UDP, MQTT.js, HTTP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder } from 'cbor-x';
import { api, cliJson, provision } from '../helpers/daemon.js';
import { discardRig, killAndRestart, startRig, type Rig } from './daemon-rig.js';
import { ForwarderSimulator } from './forwarder.js';
import { acceptJoin, joinRequest, readDownlink, uplinkFrame, type DeviceKeys } from './frames.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const hex = (s: string) => Buffer.from(s, 'hex');
const ABP: DeviceKeys = { devAddr: '26011234', nwkSKey: hex('44024241ed4ce9a68c6a8bc055233fd3'), appSKey: hex('ec925802ae430ca77fd3dd73cb2cc588') };

/** The shared rig (./daemon-rig.ts), its MQTT client also on the device's feeds. */
async function withFeeds(r: Rig): Promise<Rig> {
  await r.mqtt.client.subscribeAsync([`device/${r.deviceId}/asset/+/feed`], { qos: 1 });
  return r;
}

const rig = async () => withFeeds(await startRig());

const feedOf = (r: Rig, asset: string, value: unknown) => r.mqtt.waitFor((m) => m.topic.endsWith(`/${asset}/feed`) && JSON.stringify(JSON.parse(m.text).value) === JSON.stringify(value), 8000);
const eventOf = (r: Rig, pred: (e: Record<string, any>) => boolean) =>
  r.mqtt.waitFor((m) => m.topic.endsWith('/events') && pred(JSON.parse(m.text)), 8000).then((m) => JSON.parse(m.text) as Record<string, any>);

test('ABP: uplink → feed, a command leaves as an encrypted PULL_RESP at tmst + 1 s, replay and bad MIC refused', async () => {
  const r = await rig();
  try {
    const put = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/lorawan`, {
      token: r.app,
      json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex').toUpperCase(), fCntUp: 10, fCntDown: 5 },
    });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.devAddr, '26011234');
    assert.equal(put.body.nwkSKey, undefined);
    assert.equal(put.body.fCntUp, 10);

    const before = Date.now();
    await r.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 10, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 21.5 })) }), tmst: 1_000_000, rssi: -57, lsnr: 8.5, time: '2020-01-01T00:00:00.000000Z' }]);
    const feed = JSON.parse((await feedOf(r, 'temperature', 21.5)).text);
    const at = Date.parse(feed.at);
    assert.ok(at >= before - 5 && at <= Date.now(), 'at = when the daemon received the frame, not the forwarder clock');
    const up = await eventOf(r, (e) => e.type === 'uplink');
    assert.equal(up.fCnt, 10);
    assert.equal(up.fPort, 2);
    assert.equal(up.rssi, -57);
    assert.equal(up.snr, 8.5);
    assert.equal(up.frequency, 868_100_000);
    assert.equal(up.dataRate, 'SF7BW125');
    assert.equal(up.source, 'gwmp:B827EBFFFE000001');
    assert.equal(up.gatewayTime, '2020-01-01T00:00:00.000000Z');
    assert.equal(up.confirmed, false);

    // A command over HTTP: queued, then sent after the next uplink.
    const cmd = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true, meta: { port: 7 } } });
    assert.equal(cmd.status, 202, cmd.text);
    assert.equal(cmd.body.delivered.lpwan, 'queued');
    const badPort = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true, meta: { port: 224 } } });
    assert.equal(badPort.status, 422);
    assert.equal(badPort.body.code, 'FPORT_INVALID');
    const list = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/downlinks`, { token: r.app });
    assert.equal(list.body.data.length, 1);
    assert.equal(list.body.data[0].status, 'queued');

    await r.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 11, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 22 })), confirmed: true }), tmst: 4_294_000_000 }]);
    await r.fwd.waitFor((d) => d[3] === 0x03);
    const [resp] = r.fwd.pullResps();
    assert.equal(resp!.txpk.tmst, 32704, 'RX1: tmst + 1 000 000 µs, wrapped at 2^32');
    assert.equal(resp!.txpk.freq, 868.1);
    assert.equal(resp!.txpk.datr, 'SF7BW125');
    assert.equal(resp!.txpk.ipol, true);
    const down = readDownlink(ABP, Buffer.from(resp!.txpk.data, 'base64'), 5);
    assert.ok(down.micValid, 'downlink MIC with FCntDown 5');
    assert.equal(down.fCnt16, 5);
    assert.equal(down.devAddr, '26011234');
    assert.equal(down.fPort, 7);
    assert.ok(down.ack, 'the confirmed uplink is acknowledged');
    assert.equal(down.fPending, false);
    assert.deepEqual(cbor.decode(down.payload), { led: true });
    const sent = await eventOf(r, (e) => e.type === 'downlink' && e.status === 'sent');
    assert.equal(sent.fCnt, 5);
    assert.equal(sent.window, 'rx1');

    // Replay of fCnt 11 and a frame with a wrong key.
    await r.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 11, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 99 })) }), tmst: 5 }]);
    const replay = await eventOf(r, (e) => e.type === 'uplink_refused');
    assert.equal(replay.reason, 'fcnt-replay');
    await r.fwd.push([{ payload: uplinkFrame({ ...ABP, nwkSKey: hex('00000000000000000000000000000001') }, { fCnt: 12, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 98 })) }), tmst: 6 }]);
    const mic = await eventOf(r, (e) => e.type === 'uplink_refused' && e.reason === 'mic');
    assert.equal(mic.reason, 'mic');
    const history = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/states`, { token: r.app });
    assert.deepEqual(history.body.data.map((s: { value: number }) => s.value), [22, 21.5]);
    const settings = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/lorawan`, { token: r.app });
    assert.equal(settings.body.fCntUp, 12);
    assert.equal(settings.body.fCntDown, 6);
    assert.equal(settings.body.lastUplink.fCnt, 11);
    // The device list tells the radio link by its last uplink's signal (the console shows it).
    const listed = (await api(r.daemon.url, 'GET', '/devices', { token: r.app })).body.find((d: { id: string }) => d.id === r.deviceId);
    assert.deepEqual(listed.link, { type: 'lorawan', at: settings.body.lastUplink.at, rssi: settings.body.lastUplink.rssi, snr: settings.body.lastUplink.snr });
    const metrics = await api(r.daemon.url, 'GET', '/metrics');
    assert.match(metrics.text, /outpost_lpwan_refused_total\{reason="fcnt-replay"\} 1/);
    assert.match(metrics.text, /outpost_lpwan_refused_total\{reason="mic"\} 1/);
  } finally {
    await r.close();
  }
});

test('OTAA: join request → join accept at tmst + 5 s; the first uplink on the new session becomes a feed message', async () => {
  const r = await rig();
  try {
    const appKey = hex('000102030405060708090a0b0c0d0e0f');
    cliJson(['device', 'lorawan', r.deviceId, 'otaa', '--deveui', '0004A30B001F2A3C', '--joineui', '70B3D57ED0000010', '--appkey', appKey.toString('hex')], r.dataDir);
    const shown = cliJson<Record<string, unknown>>(['device', 'lorawan', r.deviceId, 'show'], r.dataDir);
    assert.equal(shown.joined, false);
    assert.equal(shown.appKey, undefined);
    // The daemon notices the CLI's change on its own.
    await new Promise((res) => setTimeout(res, 600));
    await r.fwd.push([{ payload: joinRequest(appKey, '70B3D57ED0000010', '0004A30B001F2A3C', 0x1234), tmst: 3_512_348_611, datr: 'SF7BW125' }]);
    await r.fwd.waitFor((d) => d[3] === 0x03);
    const [resp] = r.fwd.pullResps();
    assert.equal(resp!.txpk.tmst, 3_517_348_611);
    assert.equal(resp!.txpk.size, 17);
    const session = acceptJoin(appKey, Buffer.from(resp!.txpk.data, 'base64'), 0x1234);
    assert.ok(session.micValid);
    assert.equal(parseInt(session.devAddr, 16) >>> 25, 0, 'NetID 000000: NwkID 0');
    const join = await eventOf(r, (e) => e.type === 'join');
    assert.equal(join.devAddr, session.devAddr);
    assert.equal(join.devNonce, 0x1234);
    await r.fwd.push([{ payload: uplinkFrame(session, { fCnt: 0, fPort: 1, payload: Buffer.from(cbor.encode({ temperature: 19.25 })) }) }]);
    await feedOf(r, 'temperature', 19.25);
    // The same DevNonce again is a replay (sent after the forwarder dedup window, or it would be a mere duplicate).
    await new Promise((res) => setTimeout(res, 300));
    await r.fwd.push([{ payload: joinRequest(appKey, '70B3D57ED0000010', '0004A30B001F2A3C', 0x1234), tmst: 7 }]);
    const refused = await eventOf(r, (e) => e.type === 'join_refused');
    assert.equal(refused.reason, 'devnonce-replay');
    const settings = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/lorawan`, { token: r.app });
    assert.equal(settings.body.joined, true);
    assert.equal(settings.body.devAddr, session.devAddr);
    assert.equal(settings.body.fCntUp, 1);
  } finally {
    await r.close();
  }
});

test('the same uplink from two forwarders is stored once and answered through the better one', async () => {
  const r = await rig();
  const second = new ForwarderSimulator('b827ebfffe000002');
  try {
    await second.connect(r.daemon.gwmpPort);
    await second.pull();
    const put = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/lorawan`, { token: r.app, json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex') } });
    assert.equal(put.status, 200);
    const frame = uplinkFrame(ABP, { fCnt: 0, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 5 })), confirmed: true });
    await r.fwd.push([{ payload: frame, rssi: -115, lsnr: -8, tmst: 100 }]);
    await second.push([{ payload: frame, rssi: -60, lsnr: 9, tmst: 200 }]);
    await feedOf(r, 'temperature', 5);
    const up = await eventOf(r, (e) => e.type === 'uplink');
    assert.deepEqual(up.gateways.map((g: { source: string }) => g.source).sort(), ['gwmp:B827EBFFFE000001', 'gwmp:B827EBFFFE000002']);
    assert.equal(up.source, 'gwmp:B827EBFFFE000002');
    // The ACK for the confirmed uplink goes through the second (better) gateway only.
    await second.waitFor((d) => d[3] === 0x03);
    assert.equal(second.pullResps()[0]!.txpk.tmst, 1_000_200);
    await new Promise((res) => setTimeout(res, 500));
    assert.equal(r.fwd.pullResps().length, 0);
    const history = await api(r.daemon.url, 'GET', `/device/${r.deviceId}/asset/temperature/states`, { token: r.app });
    assert.equal(history.body.data.length, 1);
    const noReplay = r.events().filter((e) => e.type === 'uplink_refused');
    assert.equal(noReplay.length, 0);
  } finally {
    second.close();
    await r.close();
  }
});

test('frame counters survive kill -9: a replay after the restart is refused', async () => {
  const first = await rig();
  const { deviceId, app } = first;
  let second: Rig | undefined;
  try {
    await api(first.daemon.url, 'PUT', `/device/${deviceId}/lorawan`, { token: app, json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex') } });
    for (let fCnt = 0; fCnt < 5; fCnt++) {
      await first.fwd.push([{ payload: uplinkFrame(ABP, { fCnt, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: fCnt })) }) }]);
      await feedOf(first, 'temperature', fCnt);
    }
    // Queue a confirmed downlink and let it go out, so the downlink counter moved too.
    await api(first.daemon.url, 'PUT', `/device/${deviceId}/command`, { token: app, json: { values: { led: false }, meta: { confirmed: true } } });
    await first.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 5, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 5 })) }) }]);
    await first.fwd.waitFor((d) => d[3] === 0x03);
    await feedOf(first, 'temperature', 5);
    second = await withFeeds(await killAndRestart(first));
    await second.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 5, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 55 })) }) }]);
    const refused = await eventOf(second, (e) => e.type === 'uplink_refused');
    assert.equal(refused.reason, 'fcnt-replay');
    // The confirmed downlink was not acknowledged: it goes again, with a counter never used before.
    await second.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 6, fPort: 2, payload: Buffer.from(cbor.encode({ temperature: 6 })) }), tmst: 10 }]);
    await second.fwd.waitFor((d) => d[3] === 0x03);
    const down = readDownlink(ABP, Buffer.from(second.fwd.pullResps()[0]!.txpk.data, 'base64'), 1);
    assert.ok(down.micValid, 'FCntDown 1 after 0 was used before the kill');
    assert.ok(down.confirmed);
    // The device acknowledges: the item leaves the queue.
    await second.fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 7, ack: true }), tmst: 20 }]);
    const acked = await eventOf(second, (e) => e.type === 'downlink' && e.status === 'acknowledged');
    assert.ok(acked.id);
    const history = await api(second.daemon.url, 'GET', `/device/${deviceId}/asset/temperature/states`, { token: app });
    assert.deepEqual(history.body.data.map((s: { value: number }) => s.value), [6, 5, 4, 3, 2, 1, 0]);
  } finally {
    // Failed before the kill: the first daemon is still running and must not outlive the test.
    await (second ? second.close() : discardRig(first));
  }
});

test('provisioning: validation names the field, DevEUIs are unique, DELETE removes session and queue', async () => {
  const r = await rig();
  try {
    const url = `/device/${r.deviceId}/lorawan`;
    const bad = await api(r.daemon.url, 'PUT', url, { token: r.app, json: { activation: 'abp', devAddr: '2601', nwkSKey: '00'.repeat(16), appSKey: '00'.repeat(16) } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, 'LORAWAN_INVALID');
    assert.match(bad.body.error, /devAddr/);
    const badKey = await api(r.daemon.url, 'PUT', url, { token: r.app, json: { activation: 'otaa', devEui: '0004A30B001F2A3C', joinEui: '70B3D57ED0000010', appKey: 'zz'.repeat(16) } });
    assert.equal(badKey.status, 400);
    assert.match(badKey.body.error, /appKey/);
    assert.equal((await api(r.daemon.url, 'GET', url, { token: r.app })).body.code, 'NOT_LORAWAN');
    const ok = await api(r.daemon.url, 'PUT', url, { token: r.app, json: { Activation: 'otaa', DevEUI: '0004a30b001f2a3c', JoinEUI: '70B3D57ED0000010', AppKey: '00'.repeat(16), usedDevNonces: [1, 2] } });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.devEui, '0004A30B001F2A3C');
    const other = provision(r.dataDir, []);
    const dup = await api(r.daemon.url, 'PUT', `/device/${other.device.id}/lorawan`, { token: r.app, json: { activation: 'otaa', devEui: '0004A30B001F2A3C', joinEui: '70B3D57ED0000010', appKey: '00'.repeat(16) } });
    assert.equal(dup.status, 400);
    assert.equal(dup.body.code, 'DEVEUI_EXISTS');
    const readOnly = cliJson<{ token: string }>(['token', 'create', '--name', 'reader', '--scopes', 'read'], r.dataDir);
    assert.equal((await api(r.daemon.url, 'GET', url, { token: readOnly.token })).status, 403);
    assert.equal((await api(r.daemon.url, 'DELETE', url, { token: r.app })).status, 204);
    assert.equal((await api(r.daemon.url, 'GET', url, { token: r.app })).status, 404);
    // Not a LoRaWAN device any more: commands report no radio delivery.
    const cmd = await api(r.daemon.url, 'PUT', `/device/${r.deviceId}/asset/led/command`, { token: r.app, json: { value: true } });
    assert.equal(cmd.body.delivered.lpwan, 'none');
  } finally {
    await r.close();
  }
});
