// The LoRa Basics Station door against the compiled daemon, with a WebSocket client playing the
// station (test/lpwan/station.ts): discovery, auth, router_config, timesync, join, uplinks, Class A
// downlinks decoded byte for byte, dntxed, robustness.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Encoder } from 'cbor-x';
import { api, cli, cliJson, provision, removeDir, startDaemon } from '../helpers/daemon.js';
import { connectClient, eventually, sleep } from '../mqtt/helpers.js';
import { acceptJoin, joinRequest, readDownlink, uplinkFrame } from './frames.js';
import { discover, StationSimulator } from './station.js';
import { ForwarderSimulator } from './forwarder.js';

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });
const hex = (s: string) => Buffer.from(s, 'hex');
const EUI = 'B827EBFFFE6151B0';
const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

test('discovery, auth failures, router_config, timesync, malformed and unknown messages', { timeout: 60_000 }, async () => {
  const daemon = await startDaemon();
  try {
    assert.ok(daemon.basicStationPort > 0, 'ports.basicStation in the ready line');
    const base = `ws://127.0.0.1:${daemon.basicStationPort}`;
    const { token } = cliJson<{ eui: string; token: string }>(['station', 'create', '--eui', 'b827:ebff:fe61:51b0', '--name', 'roof'], daemon.dataDir);
    assert.match(token, /^station:[A-Za-z0-9]{40}$/);
    const again = cli(['station', 'create', '--eui', EUI, '--data', daemon.dataDir]);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /already registered/);
    assert.deepEqual(cliJson<Array<{ eui: string; name: string }>>(['station', 'list'], daemon.dataDir).map((s) => [s.eui, s.name]), [[EUI, 'roof']]);

    // Discovery: every EUI form the station may send.
    for (const router of ['b827:ebff:fe61:51b0', 'B8-27-EB-FF-FE-61-51-B0', 'b827ebfffe6151b0']) {
      const answer = await discover(`${base}/router-info`, router, bearer(token));
      assert.equal(answer.uri, `ws://127.0.0.1:${daemon.basicStationPort}/router-b827ebfffe6151b0`, JSON.stringify(answer));
      assert.equal(answer.router, router);
    }
    assert.match((await discover(`${base}/router-info`, 'nonsense', bearer(token))).error, /EUI/);
    assert.match((await discover(`${base}/router-info`, '0102030405060708', bearer(token))).error, /not registered/);
    assert.match((await discover(`${base}/router-info`, EUI)).error, /Authorization/);

    // The data socket: no token, a wrong token, an unregistered EUI get no socket.
    await assert.rejects(StationSimulator.open(`${base}/router-${EUI}`), { status: 401 });
    await assert.rejects(StationSimulator.open(`${base}/router-${EUI}`, bearer('station:' + 'x'.repeat(40))), { status: 401 });
    await assert.rejects(StationSimulator.open(`${base}/router-0102030405060708`, bearer(token)), { status: 403 });
    await assert.rejects(StationSimulator.open(`${base}/elsewhere`, bearer(token)), { status: 404 });

    const station = await StationSimulator.open(`${base}/router-b827ebfffe6151b0`, bearer(token));
    const config = await station.hello();
    assert.equal(config.region, 'EU863');
    assert.deepEqual(config.freq_range, [863_000_000, 870_000_000]);
    assert.deepEqual(config.DRs.slice(0, 8), [[12, 125, 0], [11, 125, 0], [10, 125, 0], [9, 125, 0], [8, 125, 0], [7, 125, 0], [7, 250, 0], [0, 0, 0]]);
    const board = config.sx1301_conf[0];
    const channels = Array.from({ length: 8 }, (_, i) => board[`chan_multiSF_${i}`]).map((c) => board[`radio_${c.radio}`].freq + c.if);
    assert.deepEqual(channels.sort(), [867_100_000, 867_300_000, 867_500_000, 867_700_000, 867_900_000, 868_100_000, 868_300_000, 868_500_000]);
    assert.equal(config.JoinEui, null);
    assert.equal(config.NetID, null);

    const before = Date.now();
    station.send({ msgtype: 'timesync', txtime: 1_234_567_890.5 });
    const sync = await station.waitFor((m) => m.msgtype === 'timesync');
    assert.equal(sync.txtime, 1_234_567_890.5);
    const gpsEpochMs = Date.UTC(1980, 0, 6) - 18_000;
    assert.ok(Math.abs(sync.gpstime / 1000 + gpsEpochMs - before) < 5000, `gpstime ${sync.gpstime}`);

    // Garbage is counted and the socket stays up.
    station.send('{not json');
    station.send(`{"msgtype":"updf","x":${'['.repeat(50)}${']'.repeat(50)}}`);
    station.send({ msgtype: 'updf', DR: 99, Freq: 'x' });
    station.send({ msgtype: 'rmtsh', user: 'x' });
    station.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    station.send({ msgtype: 'timesync', txtime: 1 });
    await station.waitFor((m) => m.msgtype === 'timesync' && m.txtime === 1);
    const metrics = (await api(daemon.url, 'GET', '/metrics')).text;
    assert.match(metrics, /outpost_bs_messages_total\{type="unknown"\} 1/);
    assert.match(metrics, /outpost_bs_messages_total\{type="malformed"\} 3/);
    assert.match(metrics, /outpost_bs_stations 1/);
    assert.match(metrics, /outpost_bs_refused_total\{reason="no-token"\} 1/);
    assert.match(metrics, /outpost_bs_refused_total\{reason="bad-token"\} 1/);
    assert.match(metrics, /outpost_bs_refused_total\{reason="unregistered"\} 1/);

    // /healthz and outpost status list it.
    const health = await api(daemon.url, 'GET', '/healthz');
    const bs = health.body.radio.sources.find((s: { source: string }) => s.source === 'basicStation');
    assert.equal(bs.detail.connected, 1);
    assert.equal(bs.detail.stations[0].eui, EUI);
    assert.equal(bs.detail.stations[0].name, 'roof');
    assert.equal(bs.detail.stations[0].lastUplinkAt, null);
    const status = JSON.parse(cli(['status', '--json', '--data', daemon.dataDir]).stdout);
    assert.equal(status.radio.sources.find((s: { source: string }) => s.source === 'basicStation').detail.stations[0].eui, EUI);

    // Reconnecting replaces the old socket; deleting the station closes the new one.
    const second = await StationSimulator.open(`${base}/router-${EUI}`, bearer(token));
    assert.equal(await station.closed(), 4000);
    const deleted = cli(['station', 'delete', EUI, '--data', daemon.dataDir]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(await second.closed(), 4003);
    await assert.rejects(StationSimulator.open(`${base}/router-${EUI}`, bearer(token)), { status: 403 });
  } finally {
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }
});

test('HTTP /stations: admin creates (token once), lists, deletes (the socket closes)', { timeout: 60_000 }, async () => {
  const daemon = await startDaemon();
  try {
    const { device, app } = provision(daemon.dataDir);
    assert.equal((await api(daemon.url, 'GET', '/stations', { token: device.token })).status, 403);
    const bad = await api(daemon.url, 'POST', '/stations', { token: app.token, json: { eui: 'xyz' } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error, /eui/);
    const created = await api(daemon.url, 'POST', '/stations', { token: app.token, json: { eui: EUI.toLowerCase(), name: 'mast' } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.eui, EUI);
    const list = await api(daemon.url, 'GET', '/stations', { token: app.token });
    assert.deepEqual(list.body.map((s: Record<string, unknown>) => [s.eui, s.name, s.token]), [[EUI, 'mast', undefined]]);
    const station = await StationSimulator.open(`ws://127.0.0.1:${daemon.basicStationPort}/router-${EUI}`, bearer(created.body.token));
    await station.hello();
    assert.equal((await api(daemon.url, 'DELETE', `/station/${EUI}`, { token: app.token })).status, 204);
    assert.equal(await station.closed(), 4003);
    assert.equal((await api(daemon.url, 'DELETE', `/station/${EUI}`, { token: app.token })).status, 404);
  } finally {
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }
});

test('join, uplinks and a Class A downlink through a station: dnmsg with both windows, xtime and rctx of the uplink; dntxed settles it', { timeout: 60_000 }, async () => {
  const daemon = await startDaemon();
  try {
    const { device, app } = provision(daemon.dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
      { name: 'led', is: 'actuator', profile: { type: 'boolean' } },
    ]);
    const appKey = hex('000102030405060708090a0b0c0d0e0f');
    cliJson(['device', 'lorawan', device.id, 'otaa', '--deveui', '0004A30B001F2A3C', '--joineui', '70B3D57ED0000010', '--appkey', appKey.toString('hex')], daemon.dataDir);
    const { token } = cliJson<{ token: string }>(['station', 'create', '--eui', EUI], daemon.dataDir);
    const mqtt = await connectClient(daemon.mqttPort, app.token);
    await mqtt.client.subscribeAsync([`device/${device.id}/events`, `device/${device.id}/asset/+/feed`], { qos: 1 });
    const events = () => mqtt.received.filter((m) => m.topic.endsWith('/events')).map((m) => JSON.parse(m.text) as Record<string, any>);
    await sleep(600); // the daemon notices the CLI's LoRaWAN settings
    const station = await StationSimulator.open(`ws://127.0.0.1:${daemon.basicStationPort}/router-${EUI}`, bearer(token));
    await station.hello();

    // A join request: the join accept comes back in one dnmsg, timed from the uplink's xtime (above 2^53: kept exact).
    const joinXtime = '36028797019975467';
    station.uplink(joinRequest(appKey, '70B3D57ED0000010', '0004A30B001F2A3C', 0x1234), { dr: 5, freq: 868_300_000, xtime: joinXtime, rctx: 3, rssi: -61, snr: 7.25 });
    const accept = await station.waitFor((m) => m.msgtype === 'dnmsg');
    assert.equal(accept.dC, 0);
    assert.equal(accept.RxDelay, 5);
    assert.equal(accept.RX1DR, 5);
    assert.equal(accept.RX1Freq, 868_300_000);
    assert.equal(accept.RX2DR, 0);
    assert.equal(accept.RX2Freq, 869_525_000);
    assert.equal(accept.rctx, 3);
    assert.equal(accept.DevEui, '00-04-a3-0b-00-1f-2a-3c');
    assert.match(station.raw.find((t) => t.includes('"dnmsg"'))!, new RegExp(`"xtime":${joinXtime}[,}]`));
    const session = acceptJoin(appKey, hex(accept.pdu), 0x1234);
    assert.ok(session.micValid, 'join accept MIC');
    station.send({ msgtype: 'dntxed', diid: accept.diid, DevEui: accept.DevEui, rctx: 3, xtime: `${BigInt(joinXtime) + 5_000_000n}`, txtime: 0, gpstime: 0 });
    await eventually(() => events().some((e) => e.type === 'join'), 5000, 'join event');
    const join = events().find((e) => e.type === 'join')!;
    assert.equal(join.source, `bs:${EUI}`);
    assert.equal(join.devAddr, session.devAddr);

    // An uplink becomes a feed message; its event names the station and the signal it reported.
    station.uplink(uplinkFrame(session, { fCnt: 0, fPort: 1, payload: Buffer.from(cbor.encode({ temperature: 19.25 })) }), { xtime: '36028797029975467', rssi: -57, snr: 8.5 });
    await mqtt.waitFor((m) => m.topic.endsWith('/temperature/feed') && JSON.parse(m.text).value === 19.25, 8000);
    await eventually(() => events().some((e) => e.type === 'uplink'), 5000, 'uplink event');
    const up = events().find((e) => e.type === 'uplink')!;
    assert.equal(up.rssi, -57);
    assert.equal(up.snr, 8.5);
    assert.equal(up.frequency, 868_100_000);
    assert.equal(up.dataRate, 'SF7BW125');

    // A command waits for the next uplink, then leaves as one dnmsg with both windows.
    const cmd = await api(daemon.url, 'PUT', `/device/${device.id}/asset/led/command`, { token: app.token, json: { value: true, meta: { port: 7 } } });
    assert.equal(cmd.status, 202, cmd.text);
    const dataXtime = '36028797039975467';
    station.uplink(uplinkFrame(session, { fCnt: 1, fPort: 1, payload: Buffer.from(cbor.encode({ temperature: 20 })), confirmed: true }), { dr: 4, freq: 867_500_000, xtime: dataXtime, rctx: 1 });
    const dn = await station.waitFor((m) => m.msgtype === 'dnmsg' && m.diid !== accept.diid);
    assert.equal(dn.RxDelay, 1);
    assert.equal(dn.RX1DR, 4);
    assert.equal(dn.RX1Freq, 867_500_000);
    assert.equal(dn.RX2DR, 0);
    assert.equal(dn.RX2Freq, 869_525_000);
    assert.equal(dn.rctx, 1);
    assert.equal(dn.dC, 0);
    assert.equal(dn.DevEui, '00-04-a3-0b-00-1f-2a-3c', 'a data downlink names its device too, not only the join accept');
    assert.match(station.raw.at(-1)!, new RegExp(`"xtime":${dataXtime}[,}]`));
    const down = readDownlink(session, hex(dn.pdu), 0);
    assert.ok(down.micValid, 'downlink MIC with FCntDown 0');
    assert.equal(down.fPort, 7);
    assert.ok(down.ack, 'the confirmed uplink is acknowledged');
    assert.deepEqual(cbor.decode(down.payload), { led: true });
    // Sent in RX2 (2 s after the uplink on the station's clock): the downlink event says so.
    station.send({ msgtype: 'dntxed', diid: dn.diid, DevEui: dn.DevEui, rctx: 1, xtime: `${BigInt(dataXtime) + 2_000_000n}`, txtime: 0, gpstime: 0 });
    await eventually(() => events().some((e) => e.type === 'downlink' && e.status === 'sent'), 5000, 'downlink sent');
    assert.equal(events().find((e) => e.type === 'downlink' && e.status === 'sent')!.window, 'rx2');
    const health = await api(daemon.url, 'GET', '/healthz');
    const bs = health.body.radio.sources.find((s: { source: string }) => s.source === 'basicStation');
    assert.ok(bs.framesReceived >= 3);
    assert.equal(bs.framesSent, 2);
    assert.ok(bs.detail.stations[0].lastUplinkAt);
    station.close();
    await mqtt.end();
  } finally {
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }
});

/** A CA, a server certificate for 127.0.0.1 and client certificates with the given CNs, made with openssl. */
function makeCertificates(dir: string, clientCns: string[]): void {
  const run = (args: string[]) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=outpost test CA']);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  const sign = (name: string, cn: string, ext?: string) => {
    run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
    run(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', ...(ext ? ['-extfile', ext] : [])]);
  };
  sign('server', 'localhost', 'server.ext');
  clientCns.forEach((cn, i) => sign(`client${i}`, cn));
}

test('TLS: wss with a token; mutual TLS where the client certificate CN is the station EUI', { timeout: 90_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bs-tls-'));
  makeCertificates(dir, ['b827:ebff:fe61:51b0', '0102030405060708']);
  const pem = (name: string) => readFileSync(join(dir, name));
  const startWith = (tls: Record<string, string>) => {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ radio: { basicStation: { tls } } }));
    return startDaemon({ args: ['--config', join(dir, 'config.json')] });
  };

  // Server TLS only: the token still decides.
  let daemon = await startWith({ cert: join(dir, 'server.pem'), key: join(dir, 'server.key') });
  try {
    const { token } = cliJson<{ token: string }>(['station', 'create', '--eui', EUI], daemon.dataDir);
    const base = `wss://127.0.0.1:${daemon.basicStationPort}`;
    const answer = await discover(`${base}/router-info`, EUI, { ...bearer(token), ca: pem('ca.pem') });
    assert.equal(answer.uri, `wss://127.0.0.1:${daemon.basicStationPort}/router-b827ebfffe6151b0`);
    await assert.rejects(StationSimulator.open(`${base}/router-${EUI}`, { ca: pem('ca.pem') }), { status: 401 });
    const station = await StationSimulator.open(answer.uri, { ...bearer(token), ca: pem('ca.pem') });
    assert.equal((await station.hello()).region, 'EU863');
    station.close();
    // A plain ws:// client gets nothing from a TLS listener.
    await assert.rejects(StationSimulator.open(`ws://127.0.0.1:${daemon.basicStationPort}/router-${EUI}`, bearer(token)));
  } finally {
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }

  // Mutual TLS: the client certificate is the credential, its CN must be the EUI of the path.
  daemon = await startWith({ cert: join(dir, 'server.pem'), key: join(dir, 'server.key'), ca: join(dir, 'ca.pem') });
  try {
    cliJson(['station', 'create', '--eui', EUI], daemon.dataDir);
    cliJson(['station', 'create', '--eui', '0102030405060708'], daemon.dataDir);
    const base = `wss://127.0.0.1:${daemon.basicStationPort}`;
    const client = (i: number) => ({ ca: pem('ca.pem'), cert: pem(`client${i}.pem`), key: pem(`client${i}.key`) });
    const station = await StationSimulator.open(`${base}/router-${EUI}`, client(0));
    assert.equal((await station.hello()).region, 'EU863');
    // Another station's certificate does not open this station's socket.
    await assert.rejects(StationSimulator.open(`${base}/router-${EUI}`, client(1)), { status: 403 });
    // No client certificate: the TLS handshake itself is refused.
    await assert.rejects(StationSimulator.open(`${base}/router-${EUI}`, { ca: pem('ca.pem') }));
    const health = await api(daemon.url, 'GET', '/healthz');
    const bs = health.body.radio.sources.find((s: { source: string }) => s.source === 'basicStation');
    assert.equal(bs.detail.tls, 'mutual');
    assert.equal(bs.detail.connected, 1);
    station.close();
  } finally {
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
    removeDir(dir);
  }
});

test('Class C through a station (dC 2, RX2 only, at once); one uplink heard by a station and a packet forwarder is handled once', { timeout: 60_000 }, async () => {
  const daemon = await startDaemon();
  const fwd = new ForwarderSimulator('aa555a0000000009');
  try {
    const { device, app } = provision(daemon.dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
      { name: 'led', is: 'actuator', profile: { type: 'boolean' } },
    ]);
    const keys = { devAddr: '26011234', nwkSKey: hex('44024241ed4ce9a68c6a8bc055233fd3'), appSKey: hex('ec925802ae430ca77fd3dd73cb2cc588') };
    const put = await api(daemon.url, 'PUT', `/device/${device.id}/lorawan`, {
      token: app.token,
      json: { activation: 'abp', devEui: '70B3D57ED0001234', devAddr: keys.devAddr, nwkSKey: keys.nwkSKey.toString('hex'), appSKey: keys.appSKey.toString('hex'), class: 'C' },
    });
    assert.equal(put.status, 200, put.text);
    const { token } = cliJson<{ token: string }>(['station', 'create', '--eui', EUI], daemon.dataDir);
    const mqtt = await connectClient(daemon.mqttPort, app.token);
    await mqtt.client.subscribeAsync(`device/${device.id}/events`, { qos: 1 });
    const events = () => mqtt.received.filter((m) => m.topic.endsWith('/events')).map((m) => JSON.parse(m.text) as Record<string, any>);
    const station = await StationSimulator.open(`ws://127.0.0.1:${daemon.basicStationPort}/router-${EUI}`, bearer(token));
    await station.hello();
    await fwd.connect(daemon.gwmpPort);
    await fwd.pull();

    // The same frame from both: one uplink, both receivers listed, the better signal (the station) answers.
    const frame = uplinkFrame(keys, { fCnt: 1, fPort: 1, payload: Buffer.from(cbor.encode({ temperature: 18 })) });
    await fwd.push([{ payload: frame, rssi: -110, lsnr: -6 }]);
    station.uplink(frame, { xtime: '1000000000', rctx: 2, rssi: -60, snr: 9 });
    await eventually(() => events().some((e) => e.type === 'uplink'), 5000, 'uplink event');
    await sleep(400);
    const ups = events().filter((e) => e.type === 'uplink');
    assert.equal(ups.length, 1, 'handled once');
    assert.deepEqual(ups[0]!.gateways.map((g: { source: string }) => g.source).sort(), [`bs:${EUI}`, 'gwmp:AA555A0000000009']);
    assert.equal(ups[0]!.source, `bs:${EUI}`);

    // Class C: a command goes out at once through the station that heard the device best.
    const t0 = Date.now();
    const cmd = await api(daemon.url, 'PUT', `/device/${device.id}/asset/led/command`, { token: app.token, json: { value: true, meta: { port: 7 } } });
    assert.equal(cmd.status, 202, cmd.text);
    const dn = await station.waitFor((m) => m.msgtype === 'dnmsg');
    assert.ok(Date.now() - t0 < 2000, `dnmsg after ${Date.now() - t0} ms`);
    assert.equal(dn.dC, 2);
    assert.equal(dn.DevEui, '70-b3-d5-7e-d0-00-12-34', "an ABP device's DevEUI, given at provisioning");
    assert.equal(dn.RX2DR, 0);
    assert.equal(dn.RX2Freq, 869_525_000);
    assert.equal(dn.rctx, 2);
    assert.equal(dn.RX1DR, undefined);
    assert.equal(dn.xtime, undefined);
    const down = readDownlink(keys, hex(dn.pdu), 0);
    assert.ok(down.micValid);
    assert.deepEqual(cbor.decode(down.payload), { led: true });
    assert.equal(fwd.pullResps().length, 0, 'nothing through the packet forwarder');
    station.send({ msgtype: 'dntxed', diid: dn.diid, DevEui: dn.DevEui, rctx: 2, xtime: '1500000000', txtime: 0, gpstime: 0 });
    await eventually(() => events().some((e) => e.type === 'downlink' && e.status === 'sent'), 5000, 'downlink sent');
    assert.equal(events().find((e) => e.type === 'downlink' && e.status === 'sent')!.window, 'rx2c');
    station.close();
    await mqtt.end();
  } finally {
    fwd.close();
    assert.equal(await daemon.stop(), 0);
    removeDir(daemon.dataDir);
  }
});

test('a TLS file that cannot be used is a configuration error naming its key (exit 2), and so is a taken port', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bs-config-'));
  try {
    writeFileSync(join(dir, 'not-a-cert.pem'), 'hello\n');
    for (const [tls, key] of [
      [{ cert: join(dir, 'missing.pem'), key: join(dir, 'missing.key') }, 'radio.basicStation.tls.cert'],
      [{ cert: join(dir, 'not-a-cert.pem'), key: join(dir, 'not-a-cert.pem') }, 'radio.basicStation.tls.key'],
      [{ key: join(dir, 'not-a-cert.pem') }, 'radio.basicStation.tls'],
    ] as const) {
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ radio: { basicStation: { tls } } }));
      const r = cli(['run', '--config', join(dir, 'config.json'), '--data', join(dir, 'data')], { OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' });
      assert.equal(r.code, 2, `${JSON.stringify(tls)}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(key.replace(/\./g, '\\.')));
    }
    const first = await startDaemon();
    try {
      const r = cli(['run', '--data', join(dir, 'data2')], { OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: String(first.basicStationPort) });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /radio\.basicStation\.port: port \d+ on 0\.0\.0\.0 is already in use/);
    } finally {
      await first.stop();
      removeDir(first.dataDir);
    }
  } finally {
    removeDir(dir);
  }
});
