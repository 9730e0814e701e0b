// The packet forwarder door over real UDP on loopback: acks, gateway tracking, dedup, PULL_RESP / TX_ACK, fuzz.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { GwmpDoor, type GwmpReplyTo } from '../../src/lpwan/gwmp/door.js';
import { parseDatagram } from '../../src/lpwan/gwmp/protocol.js';
import { MetricsRegistry } from '../../src/ops/metrics.js';
import { createLogger } from '../../src/ops/logger.js';
import { systemClock } from '../../src/core/time.js';
import type { RadioFrame } from '../../src/lpwan/radio.js';
import { ForwarderSimulator } from './forwarder.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const V1 = Buffer.from('QPF9vkkAAgABlUN4disR/w0=', 'base64');

async function withDoor(work: (door: GwmpDoor, frames: RadioFrame[], metrics: MetricsRegistry) => Promise<void>, options: { dedupWindowMs?: number } = {}) {
  const metrics = new MetricsRegistry();
  const door = new GwmpDoor({ port: 0, host: '127.0.0.1', clock: systemClock, logger: createLogger('silent'), metrics, ...options });
  const frames: RadioFrame[] = [];
  door.onFrame((f) => frames.push(f));
  await door.start();
  try {
    await work(door, frames, metrics);
  } finally {
    await door.stop();
  }
}

const until = async (check: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

test('a bind address given by name is resolved, and replies still go to the sender', async () => {
  const metrics = new MetricsRegistry();
  const door = new GwmpDoor({ port: 0, host: 'localhost', clock: systemClock, logger: createLogger('silent'), metrics });
  await door.start();
  const sock = createSocket('udp4');
  try {
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    const ack = new Promise<Buffer>((resolve) => sock.once('message', resolve));
    sock.send(hex('027b0002 0102030405060708'), door.port, '127.0.0.1');
    assert.deepEqual(await ack, hex('027b0004'), 'PULL_ACK with the token');
  } finally {
    sock.close();
    await door.stop();
  }
});

test('protocol vectors parse as documented', () => {
  const push = parseDatagram(hex('027b00000102030405060708 7b7d'));
  assert.ok(push.ok && push.datagram.type === 'push-data' && push.datagram.gatewayEui === '0102030405060708');
  const pull = parseDatagram(hex('027b00020102030405060708'));
  assert.ok(pull.ok && pull.datagram.type === 'pull-data');
  for (const [bytes, error] of [
    ['027b00050807060504030201', undefined],
    ['027b0005080706050403020100', undefined],
    ['027b00050000000000000000' + Buffer.from('{"txpk_ack":{"error":"COLLISION_BEACON"}}').toString('hex'), 'COLLISION_BEACON'],
    ['027b00050000000000000000' + Buffer.from('{"txpk_ack":{"error":"NONE"}}').toString('hex'), undefined],
  ] as const) {
    const r = parseDatagram(hex(bytes));
    assert.ok(r.ok && r.datagram.type === 'tx-ack');
    assert.equal((r.datagram as { error?: string }).error, error);
  }
  assert.deepEqual(parseDatagram(hex('027b')), { ok: false, reason: 'too-short' });
  assert.equal((parseDatagram(hex('037b00020102030405060708')) as { reason: string }).reason, 'unknown-version');
  assert.equal((parseDatagram(hex('027b00090102030405060708')) as { reason: string }).reason, 'unknown-type');
  assert.equal((parseDatagram(hex('027b0000010203040506070841')) as { reason: string }).reason, 'bad-json');
});

test('PUSH_DATA is acked with its token and becomes a frame; the composed example byte for byte', async () => {
  await withDoor(async (door, frames) => {
    const sock = createSocket('udp4');
    const acks: Buffer[] = [];
    sock.on('message', (m) => acks.push(m));
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    const json = '{"rxpk":[{"time":"2013-03-31T16:21:17.528002Z","tmst":3512348611,"chan":2,"rfch":0,"freq":866.349812,"stat":1,"modu":"LORA","datr":"SF7BW125","codr":"4/6","rssi":-35,"lsnr":5.1,"size":17,"data":"QPF9vkkAAgABlUN4disR/w0="}]}';
    const datagram = Buffer.concat([hex('02abcd000102030405060708'), Buffer.from(json)]);
    assert.equal(datagram.length, 235);
    sock.send(datagram, door.port, '127.0.0.1');
    await until(() => acks.length === 1 && frames.length === 1);
    assert.equal(acks[0]!.toString('hex'), '02abcd01');
    const f = frames[0]!;
    assert.deepEqual(f.payload, V1);
    assert.equal(f.source, 'gwmp:0102030405060708');
    assert.equal(f.frequency, 866_349_812);
    assert.equal(f.dataRate, 'SF7BW125');
    assert.equal(f.rssi, -35);
    assert.equal(f.snr, 5.1);
    assert.equal(f.gatewayTime, '2013-03-31T16:21:17.528002Z');
    assert.deepEqual(f.replyTo, { gatewayEui: '0102030405060708', tmst: 3512348611 });
    // Unparseable JSON gets no PUSH_ACK.
    sock.send(hex('02abce000102030405060708 7b7b'), door.port, '127.0.0.1');
    // A PUSH_DATA of version 1 is answered in version 1.
    sock.send(Buffer.concat([hex('01abcf000102030405060708'), Buffer.from('{}')]), door.port, '127.0.0.1');
    await until(() => acks.length === 2);
    assert.equal(acks[1]!.toString('hex'), '01abcf01');
    sock.close();
  });
});

// Copies from several gateways are merged in the network server (every source's copies in one place): the door hands on each.
test('two forwarders hearing one uplink give one frame per gateway; a repeated datagram too', async () => {
  await withDoor(async (door, frames) => {
    const a = new ForwarderSimulator('aa555a0000000001');
    const b = new ForwarderSimulator('aa555a0000000002');
    await a.connect(door.port);
    await b.connect(door.port);
    await a.pull();
    await b.pull();
    await a.push([{ payload: V1, rssi: -110, lsnr: -5, tmst: 100 }]);
    await b.push([{ payload: V1, rssi: -70, lsnr: 9, tmst: 200 }]);
    await until(() => frames.length === 2);
    assert.deepEqual(frames.map((f) => f.source), ['gwmp:AA555A0000000001', 'gwmp:AA555A0000000002']);
    assert.deepEqual(frames.map((f) => f.snr), [-5, 9]);
    assert.equal(frames[0]!.heardBy, undefined);
    assert.equal(door.receivers(), 2);
    a.close();
    b.close();
  });
});

test('PULL_RESP goes to the PULL_DATA address with tmst + delay; TX_ACK errors reject', async () => {
  await withDoor(async (door, frames) => {
    const fwd = new ForwarderSimulator('0102030405060708');
    await fwd.connect(door.port);
    // No PULL_DATA yet: no downlink path.
    await fwd.push([{ payload: V1, tmst: 4_294_000_000 }]);
    await until(() => frames.length === 1);
    const replyTo = frames[0]!.replyTo as GwmpReplyTo;
    const window = { name: 'rx1' as const, payload: hex('60f17dbe492005000a3fad619b89a57007'), frequency: 868_100_000, dataRate: 'SF7BW125', power: 14, delayMs: 1000 };
    const tx = { windows: [window], invertIq: true, replyTo };
    await assert.rejects(door.transmit(tx), /no PULL_DATA/);
    await fwd.pull();
    await door.transmit(tx);
    const [resp] = fwd.pullResps();
    assert.deepEqual(resp!.txpk, { tmst: 32704, freq: 868.1, rfch: 0, powe: 14, modu: 'LORA', datr: 'SF7BW125', codr: '4/5', ipol: true, size: 17, data: 'YPF9vkkgBQAKP61hm4mlcAc=' });
    fwd.txAck = 'TOO_LATE';
    await assert.rejects(door.transmit({ ...tx, windows: [{ ...window, delayMs: 2000 }] }), /TOO_LATE/);
    const health = door.health();
    assert.equal((health.detail!.gateways as { recent: Array<{ txErrors: number }> }).recent[0]!.txErrors, 1);
    fwd.close();
  });
});

test('a TX_ACK counts only from the address the PULL_RESP went to: spoofed ones are ignored and counted', async () => {
  await withDoor(async (door, frames, metrics) => {
    const fwd = new ForwarderSimulator('0102030405060708');
    const other = new ForwarderSimulator('1111111111111111');
    await fwd.connect(door.port);
    await other.connect(door.port);
    await fwd.pull();
    await other.pull();
    await fwd.push([{ payload: V1, tmst: 1_000_000 }]);
    await until(() => frames.length === 1);
    const replyTo = frames[0]!.replyTo as GwmpReplyTo;
    const rx1 = { name: 'rx1' as const, payload: hex('60f17dbe492005000a3fad619b89a57007'), frequency: 868_100_000, dataRate: 'SF7BW125', power: 14, delayMs: 1000 };
    const rx2 = { ...rx1, name: 'rx2' as const, frequency: 869_525_000, dataRate: 'SF12BW125', delayMs: 2000 };
    fwd.txAck = false; // the real forwarder answers by hand below
    const txAck = (token: Buffer, eui: Buffer, error?: string) =>
      Buffer.concat([Buffer.from([2, token[0]!, token[1]!, 0x05]), eui, error ? Buffer.from(JSON.stringify({ txpk_ack: { error } })) : Buffer.alloc(0)]);

    // A forged TX_ACK error (another gateway's address, the right EUI and token) must not give up RX1.
    const first = door.transmit({ windows: [rx1, rx2], invertIq: true, replyTo });
    await fwd.waitFor((d) => d[3] === 0x03);
    const token1 = fwd.pullResps()[0]!.token;
    other.send(txAck(token1, fwd.eui, 'TOO_LATE'));
    // The same token from the right host but another source port is forged too.
    const sameHost = createSocket('udp4');
    await new Promise<void>((r) => sameHost.bind(0, '127.0.0.1', () => r()));
    sameHost.send(txAck(token1, fwd.eui, 'COLLISION_PACKET'), door.port, '127.0.0.1');
    await until(() => /outpost_gwmp_tx_ack_spoofed_total 2/.test(metrics.render()));
    fwd.send(txAck(token1, fwd.eui));
    assert.equal((await first).window, 0, 'RX1 went out');

    // A forged success must not mark a refused downlink as sent: the real TOO_LATE moves it to RX2.
    const second = door.transmit({ windows: [rx1, rx2], invertIq: true, replyTo });
    await fwd.waitFor((d) => d[3] === 0x03, 5000, fwd.received.length);
    const token2 = fwd.pullResps()[1]!.token;
    other.send(txAck(token2, other.eui));
    await until(() => /outpost_gwmp_tx_ack_spoofed_total 3/.test(metrics.render()));
    fwd.send(txAck(token2, fwd.eui, 'TOO_LATE'));
    await until(() => fwd.pullResps().length === 3);
    fwd.send(txAck(fwd.pullResps()[2]!.token, fwd.eui));
    const result = await second;
    assert.equal(result.window, 1, 'RX1 refused by the gateway, RX2 sent');
    assert.match(result.problems[0]!, /TOO_LATE/);
    assert.equal(fwd.pullResps()[2]!.txpk.freq, 869.525);
    sameHost.close();
    fwd.close();
    other.close();
  });
});

test('100 000 random datagrams crash nothing and the door keeps serving', async () => {
  await withDoor(async (door, frames, metrics) => {
    const sock = createSocket('udp4');
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    const templates = [
      () => randomBytes(Math.floor(Math.random() * 64)),
      () => Buffer.concat([Buffer.from([2]), randomBytes(2), Buffer.from([Math.floor(Math.random() * 8)]), randomBytes(Math.floor(Math.random() * 40))]),
      () => Buffer.concat([hex('02000000aabbccddeeff0011'), Buffer.from(JSON.stringify({ rxpk: [{ stat: 1, modu: 'LORA', datr: Math.random() < 0.5 ? 'SF7BW125' : 7, freq: Math.random() < 0.5 ? 868.1 : 'x', data: randomBytes(Math.floor(Math.random() * 30)).toString('base64').slice(Math.floor(Math.random() * 3)) + (Math.random() < 0.2 ? '!!' : ''), tmst: Math.random() < 0.5 ? -1 : 5 }] }))]),
      () => Buffer.concat([hex('02000000aabbccddeeff0011'), Buffer.from(JSON.stringify({ rxpk: 'nope', stat: [1] }))]),
    ];
    let sent = 0;
    while (sent < 100_000) {
      for (let i = 0; i < 500; i++, sent++) sock.send(templates[sent % templates.length]!(), door.port, '127.0.0.1');
      // Let the loop breathe so the socket buffer is not simply overrun.
      await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setTimeout(r, 500));
    // Still serving: a well-formed PUSH_DATA gets its ack and its frame.
    const fwd = new ForwarderSimulator('0102030405060708');
    await fwd.connect(door.port);
    const before = frames.length;
    await fwd.push([{ payload: V1 }]);
    await until(() => frames.some((f, i) => i >= before && f.payload.equals(V1)));
    const text = metrics.render();
    assert.match(text, /outpost_gwmp_dropped_total\{reason="(too-short|unknown-type|bad-json|bad-data)"\} \d+/);
    fwd.close();
    sock.close();
  });
});
