// The network server in-process over a real SQLite store: shared DevAddrs, MAC answers, downlink
// sizes, duty cycle, expiry, frames for the raw hook, and 100 000 random frames.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { DEFAULT_CONFIG, type OutpostConfig } from '../../src/core/config.js';
import { Store } from '../../src/store/store.js';
import { Catalog } from '../../src/store/catalog.js';
import { StateWriter } from '../../src/ingest/state-writer.js';
import { StatePipeline } from '../../src/ingest/ingest.js';
import { DeviceCodecs } from '../../src/device-codecs/device-codecs.js';
import { DeviceStateDecoder } from '../../src/ingest/decoders.js';
import { DeviceEvents, type DeviceEvent } from '../../src/ingest/device-events.js';
import { MetricsRegistry } from '../../src/ops/metrics.js';
import { createLogger } from '../../src/ops/logger.js';
import { RadioService } from '../../src/lpwan/radio-service.js';
import { transmitInOrder, type RadioCapabilities, type RadioFrame, type RadioSource, type RadioSourceHealth, type TransmitWindow, type RadioTransmission } from '../../src/lpwan/radio.js';
import { removeDir, tempDataDir } from '../helpers/daemon.js';
import { readDownlink, uplinkFrame, type DeviceKeys } from './frames.js';

/** A radio source for in-process tests: frames are injected, transmissions recorded (or refused). */
class LoopbackRadio implements RadioSource {
  readonly name = 'loopback';
  capabilities: RadioCapabilities = { transmit: true, rx1: true, immediate: true };
  /** The windows that went out, with the transmission's replyTo. */
  readonly sent: Array<TransmitWindow & { replyTo: unknown }> = [];
  refuse: string | undefined;
  receivers() {
    return 1;
  }
  #listener: ((f: RadioFrame) => void) | undefined;
  async start() {}
  async stop() {}
  onFrame(listener: (f: RadioFrame) => void) {
    this.#listener = listener;
  }
  hear(payload: Buffer, extra: Partial<RadioFrame> = {}) {
    this.#listener!({ payload, receivedAt: Date.now(), source: 'gwmp:0000000000000001', frequency: 868_100_000, dataRate: 'SF7BW125', rssi: -80, snr: 5, replyTo: { tmst: 1 }, ...extra });
  }
  transmit(t: RadioTransmission) {
    return transmitInOrder(t, async (w) => {
      if (this.refuse) throw new Error(this.refuse);
      this.sent.push({ ...w, replyTo: t.replyTo });
    });
  }
  health(): RadioSourceHealth {
    return { source: this.name, up: true, framesReceived: 0, framesSent: this.sent.length, errors: 0 };
  }
}

function setup() {
  const dataDir = tempDataDir();
  const config: OutpostConfig = { ...structuredClone(DEFAULT_CONFIG), dataDir, radio: { ...DEFAULT_CONFIG.radio, gwmp: false, basicStation: false } };
  const store = Store.open(dataDir);
  const catalog = new Catalog(store);
  const writer = new StateWriter(store);
  const logger = createLogger('silent');
  const codecs = new DeviceCodecs(config, logger);
  const pipeline = new StatePipeline(catalog, writer, store.uplinks, { now: () => Date.now() }, { decoder: new DeviceStateDecoder(codecs) });
  const events = new DeviceEvents();
  const metrics = new MetricsRegistry();
  const radio = new RadioService({ config, store, catalog, pipeline, codecs, events, clock: { now: () => Date.now() }, logger, metrics });
  const source = new LoopbackRadio();
  radio.addSource(source);
  const seen: Array<[string, DeviceEvent]> = [];
  events.on('event', (id, e) => seen.push([id, e]));
  const device = (name: string) => {
    const { device } = store.devices.create({ name }, Date.now());
    store.assets.create({ deviceId: device.id, name: 'led', title: null, description: null, is: 'actuator', profile: { type: 'string' } }, Date.now());
    catalog.invalidate();
    return device.id;
  };
  return {
    store,
    radio,
    source,
    metrics,
    seen,
    device,
    abp: (id: string, keys: DeviceKeys) =>
      radio.provisioning.put(id, { activation: 'abp', devAddr: keys.devAddr, nwkSKey: keys.nwkSKey.toString('hex'), appSKey: keys.appSKey.toString('hex') }),
    close: async () => {
      await radio.stop();
      writer.flush();
      codecs.dispose();
      store.close();
      removeDir(dataDir);
    },
  };
}

const key = (b: number) => Buffer.alloc(16, b);

test('two devices sharing a DevAddr are told apart by the MIC', async () => {
  const t = setup();
  try {
    const a = t.device('a');
    const b = t.device('b');
    const keysA = { devAddr: '01020304', nwkSKey: key(1), appSKey: key(2) };
    const keysB = { devAddr: '01020304', nwkSKey: key(3), appSKey: key(4) };
    t.abp(a, keysA);
    t.abp(b, keysB);
    t.source.hear(uplinkFrame(keysB, { fCnt: 0 }));
    t.source.hear(uplinkFrame(keysA, { fCnt: 0 }));
    t.source.hear(uplinkFrame(keysB, { fCnt: 1 }));
    await t.radio.server.settle();
    const ups = t.seen.filter(([, e]) => e.type === 'uplink').map(([id, e]) => [id, e.fCnt]);
    assert.deepEqual(ups, [[b, 0], [a, 0], [b, 1]]);
    // A MIC failure with two candidates names neither (the usual cause, a wrong key, cannot be pinned).
    t.source.hear(uplinkFrame({ ...keysA, nwkSKey: key(9) }, { fCnt: 5 }));
    await t.radio.server.settle();
    assert.equal(t.seen.filter(([, e]) => e.type === 'uplink_refused').length, 0);
    assert.match(t.metrics.render(), /outpost_lpwan_refused_total\{reason="mic"\} 1/);
  } finally {
    await t.close();
  }
});

test('LinkCheckReq gets a LinkCheckAns in FOpts; ADRACKReq gets a downlink', async () => {
  const t = setup();
  try {
    const id = t.device('d');
    const keys = { devAddr: '26000001', nwkSKey: key(5), appSKey: key(6) };
    t.abp(id, keys);
    t.source.hear(uplinkFrame(keys, { fCnt: 0, fOpts: Buffer.from([0x02]) }), { snr: 5, dataRate: 'SF7BW125' });
    await t.radio.server.settle();
    assert.equal(t.source.sent.length, 1);
    const down = readDownlink(keys, t.source.sent[0]!.payload, 0);
    assert.ok(down.micValid);
    assert.deepEqual([...down.fOpts], [0x02, 12, 1]);
    assert.equal(t.source.sent[0]!.delayMs, 1000);
    const up = t.seen.find(([, e]) => e.type === 'uplink')![1];
    assert.deepEqual(up.macCommands, [{ cid: 'LinkCheckReq' }]);
    t.source.hear(uplinkFrame(keys, { fCnt: 1, adrAckReq: true }));
    await t.radio.server.settle();
    assert.equal(t.source.sent.length, 2);
    assert.ok(readDownlink(keys, t.source.sent[1]!.payload, 1).micValid);
    // MAC commands in FOpts and FPort 0 at once: malformed, counters untouched.
    t.source.hear(uplinkFrame(keys, { fCnt: 2, fOpts: Buffer.from([0x02]), fPort: 0, payload: Buffer.from([0x02]) }));
    await t.radio.server.settle();
    assert.equal(t.seen.at(-1)![1].reason, 'malformed');
    assert.equal(t.radio.provisioning.get(id).fCntUp, 2);
  } finally {
    await t.close();
  }
});

test('downlink size is checked against the data rate of the window: too_large when no window fits, the ACK still goes; TX errors keep the item', async () => {
  const t = setup();
  try {
    const id = t.device('d');
    const keys = { devAddr: '26000002', nwkSKey: key(7), appSKey: key(8) };
    t.abp(id, keys);
    // 100 bytes: too much for SF12 (51) but fits SF9 (115): heard at SF9, RX1 at DR3 carries it.
    t.radio.queue.enqueue(id, { fPort: 3, confirmed: false, payload: Buffer.alloc(100, 1), ttlSeconds: undefined });
    t.source.hear(uplinkFrame(keys, { fCnt: 0 }), { dataRate: 'SF9BW125' });
    await t.radio.server.settle();
    assert.equal(t.source.sent.at(-1)!.dataRate, 'SF9BW125');
    assert.equal(readDownlink(keys, t.source.sent.at(-1)!.payload, 0).payload.length, 100);
    // 300 bytes fit no EU868 window: dropped as too_large, the confirmed uplink still gets its ACK.
    t.radio.queue.enqueue(id, { fPort: 3, confirmed: false, payload: Buffer.alloc(300, 1), ttlSeconds: undefined });
    t.source.hear(uplinkFrame(keys, { fCnt: 1, confirmed: true }));
    await t.radio.server.settle();
    const tooLarge = t.seen.find(([, e]) => e.type === 'downlink' && e.status === 'too_large');
    assert.ok(tooLarge);
    const ack = readDownlink(keys, t.source.sent.at(-1)!.payload, 1);
    assert.ok(ack.ack && ack.micValid && ack.fPort === undefined);
    // The gateway refuses both windows: tx_error, the item stays queued, the next uplink retries.
    t.radio.queue.enqueue(id, { fPort: 4, confirmed: false, payload: Buffer.from('hi'), ttlSeconds: undefined });
    t.source.refuse = 'TOO_LATE';
    t.source.hear(uplinkFrame(keys, { fCnt: 2 }));
    await t.radio.server.settle();
    assert.equal(t.seen.at(-1)![1].status, 'tx_error');
    t.source.refuse = undefined;
    t.source.hear(uplinkFrame(keys, { fCnt: 3 }));
    await t.radio.server.settle();
    const sent = readDownlink(keys, t.source.sent.at(-1)!.payload, 3);
    assert.ok(sent.micValid, 'counter 2 was reserved for the refused attempt; 3 is next');
    assert.equal(sent.payload.toString(), 'hi');
  } finally {
    await t.close();
  }
});

test('an exhausted duty cycle keeps the item queued and says why; expired items leave the queue', async () => {
  const t = setup();
  try {
    const id = t.device('d');
    const keys = { devAddr: '26000003', nwkSKey: key(9), appSKey: key(10) };
    t.abp(id, keys);
    let fCnt = 0;
    // RX1 at SF12 on 868.1 MHz (band M, 36 s/h) and RX2 (band P, 360 s/h): fill both with ACKs.
    for (let i = 0; i < 420; i++) {
      t.source.hear(uplinkFrame(keys, { fCnt: fCnt++, confirmed: true }), { dataRate: 'SF12BW125' });
      await t.radio.server.settle();
    }
    const before = t.source.sent.length;
    t.radio.queue.enqueue(id, { fPort: 1, confirmed: false, payload: Buffer.from('x'), ttlSeconds: undefined });
    t.source.hear(uplinkFrame(keys, { fCnt: fCnt++ }), { dataRate: 'SF12BW125' });
    await t.radio.server.settle();
    assert.equal(t.source.sent.length, before);
    const waiting = t.seen.at(-1)![1];
    assert.equal(waiting.status, 'queued');
    assert.match(String(waiting.reason), /duty cycle/);
    assert.equal(t.radio.queue.openCount(id), 1);
    assert.match(t.metrics.render(), /outpost_lpwan_duty_cycle_used_seconds\{source="gwmp:0000000000000001",band="P"\}/);
    // An item whose ttl passed is dropped as expired at the next look.
    t.radio.queue.enqueue(id, { fPort: 1, confirmed: false, payload: Buffer.from('y'), ttlSeconds: 0.001 });
    await new Promise((r) => setTimeout(r, 10));
    t.radio.queue.open(id);
    assert.ok(t.seen.some(([, e]) => e.type === 'downlink' && e.status === 'expired'));
  } finally {
    await t.close();
  }
});

test('frames no LoRaWAN device claims go to the raw hook; 100 000 random frames crash nothing', async () => {
  const t = setup();
  try {
    const id = t.device('d');
    const keys = { devAddr: '26000004', nwkSKey: key(11), appSKey: key(12) };
    t.abp(id, keys);
    const raw: string[] = [];
    t.radio.server.unclaimed = (frame, _source, reason) => {
      raw.push(reason);
      return frame.payload[0] === 0xff;
    };
    t.source.hear(Buffer.from('ff0102', 'hex'));
    t.source.hear(Buffer.from('hello world'));
    assert.deepEqual(raw, ['unsupported-major', 'not-uplink']);
    const known = Buffer.from([0x26, 0x00, 0x00, 0x04]).reverse();
    for (let i = 0; i < 100_000; i++) {
      const kind = i % 4;
      let bytes: Buffer;
      if (kind === 0) bytes = randomBytes(Math.floor(Math.random() * 64));
      else if (kind === 1) bytes = Buffer.concat([Buffer.from([0x40 | (Math.random() < 0.5 ? 0x80 : 0)]), known, randomBytes(Math.floor(Math.random() * 40))]);
      else if (kind === 2) bytes = Buffer.concat([Buffer.from([0x00]), randomBytes(22)]);
      else bytes = Buffer.concat([Buffer.from([0x40]), known, Buffer.from([Math.floor(Math.random() * 256)]), randomBytes(Math.floor(Math.random() * 20))]);
      t.source.hear(bytes);
    }
    await t.radio.server.settle();
    // Still serving: a real frame is accepted, and nothing random was.
    t.source.hear(uplinkFrame(keys, { fCnt: 0 }));
    await t.radio.server.settle();
    const ups = t.seen.filter(([, e]) => e.type === 'uplink');
    assert.equal(ups.length, 1);
    assert.doesNotMatch(t.metrics.render(), /internal-error/);
    assert.equal(t.radio.provisioning.get(id).fCntUp, 1);
  } finally {
    await t.close();
  }
});

test('copies through two sources are one uplink; a receive-only source with the better copy does not answer, the other does', async () => {
  const t = setup();
  const receiveOnly = new LoopbackRadio();
  receiveOnly.capabilities = { transmit: false, rx1: false, immediate: false };
  t.radio.addSource(receiveOnly);
  try {
    const id = t.device('d');
    const keys = { devAddr: '26000005', nwkSKey: key(13), appSKey: key(14) };
    t.abp(id, keys);
    const frame = uplinkFrame(keys, { fCnt: 0, confirmed: true });
    receiveOnly.hear(frame, { source: 'serial:/dev/rak811', snr: 9, replyTo: { modem: true } });
    t.source.hear(frame, { source: 'gwmp:0000000000000001', snr: -3 });
    await t.radio.server.settle();
    const ups = t.seen.filter(([, e]) => e.type === 'uplink').map(([, e]) => e);
    assert.equal(ups.length, 1);
    assert.equal(ups[0]!.source, 'serial:/dev/rak811', 'the best copy names the uplink');
    assert.deepEqual((ups[0]!.gateways as Array<{ source: string }>).map((g) => g.source), ['serial:/dev/rak811', 'gwmp:0000000000000001']);
    assert.equal(receiveOnly.sent.length, 0);
    assert.equal(t.source.sent.length, 1, 'the ACK goes through the source that can transmit');
    assert.deepEqual(t.source.sent[0]!.replyTo, { tmst: 1 });
    assert.ok(readDownlink(keys, t.source.sent[0]!.payload, 0).ack);
  } finally {
    await t.close();
  }
});

test('MAC answers that do not all fit in FOpts: whole commands only, never one cut in two', async () => {
  const t = setup();
  try {
    const id = t.device('d');
    const keys = { devAddr: '26000006', nwkSKey: key(15), appSKey: key(16) };
    t.abp(id, keys);
    // Four LinkCheckReq then a DeviceTimeReq: answers of 4 × 3 + 6 = 18 bytes; the DeviceTimeAns does not fit whole.
    t.source.hear(uplinkFrame(keys, { fCnt: 0, fOpts: Buffer.from([0x02, 0x02, 0x02, 0x02, 0x0d]) }), { snr: 5 });
    await t.radio.server.settle();
    const down = readDownlink(keys, t.source.sent[0]!.payload, 0);
    assert.ok(down.micValid);
    assert.equal(down.fOpts.length, 12);
    assert.deepEqual([down.fOpts[0], down.fOpts[3], down.fOpts[6], down.fOpts[9]], [0x02, 0x02, 0x02, 0x02]);
    const sent = t.seen.find(([, e]) => e.type === 'downlink')![1];
    assert.deepEqual((sent.macCommands as Array<{ cid: string }>).map((c) => c.cid), ['LinkCheckAns', 'LinkCheckAns', 'LinkCheckAns', 'LinkCheckAns']);
  } finally {
    await t.close();
  }
});
