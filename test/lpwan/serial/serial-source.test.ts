import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { createLogger } from '../../../src/ops/logger.js';
import { systemClock } from '../../../src/core/time.js';
import { TransmitFailed, type RadioFrame, type RadioTransmission } from '../../../src/lpwan/radio.js';
import { SerialModemSource, type SerialModemOptions } from '../../../src/lpwan/serial/serial-modem-source.js';
import { SerialModemError } from '../../../src/lpwan/serial/modem.js';
import { ModemSimulator, randomModemLine, seeded, sleep, type SimulatedModem } from './modem-simulator.js';

// Public vector V1 (an unconfirmed LoRaWAN uplink) as the radio payload.
const UPLINK = Buffer.from('40f17dbe4900020001954378762b11ff0d', 'hex');
const DOWNLINK = Buffer.from('60f17dbe4920020001f9d65d27', 'hex');
/** A Class A transmission with one RX2 window (869.525 MHz SF12) `delayMs` after the uplink. */
const rx2 = (delayMs: number, replyTo: unknown): RadioTransmission => ({
  windows: [{ name: 'rx2', payload: DOWNLINK, frequency: 869525000, dataRate: 'SF12BW125', power: 14, delayMs }],
  invertIq: true,
  replyTo,
});
/** The modem's error code behind a transmission that went out in no window. */
const modemCode = (err: unknown) => (err instanceof TransmitFailed && err.causes[0] instanceof SerialModemError ? err.causes[0].code : undefined);
const logger = createLogger('silent');

async function setup(modem: SimulatedModem, options: Partial<SerialModemOptions> = {}) {
  const sim = new ModemSimulator(modem);
  await sim.start();
  const source = new SerialModemSource({
    path: sim.hostPath,
    modem,
    baudRate: modem === 'rn2483' ? 57600 : 115200,
    receive: { frequency: 868100000, spreadingFactor: 7, bandwidth: 125 },
    initTimeoutMs: 500,
    reopenMaxMs: 2000,
    clock: systemClock,
    logger,
    ...options,
  });
  const frames: RadioFrame[] = [];
  source.onFrame((f) => frames.push(f));
  await source.start();
  await sim.waitFor(() => source.state === 'receiving', 'the source to be receiving');
  return {
    sim,
    source,
    frames,
    async close() {
      await source.stop();
      await sim.close();
    },
  };
}

type Setup = Awaited<ReturnType<typeof setup>>;

/**
 * Answers a fresh uplink with a downlink in RX2 and returns when it was sent. The source refuses a
 * TX it could not start in time (TRANSMIT_TOO_LATE); on a machine too loaded to keep a timer within
 * a few SF12 symbols that can happen, so such an attempt is repeated (twice at most).
 */
async function downlinkAfterUplink(t: Setup, armCommand: string): Promise<{ writtenAt: number; mark: number }> {
  for (let attempt = 1; ; attempt++) {
    const count = t.frames.length;
    const writtenAt = t.sim.receivePacket(UPLINK, -61, 9);
    await t.sim.waitFor(() => t.frames.length === count + 1, 'the uplink frame');
    await t.sim.waitFor(() => t.sim.receiving && t.sim.commands.at(-1)?.text === armCommand, 'receive re-armed after the uplink');
    await sleep(20);
    const mark = t.sim.commands.length;
    try {
      await t.source.transmit(rx2(2000, t.frames[count]!.replyTo));
      return { writtenAt, mark };
    } catch (err) {
      if (modemCode(err) !== 'TRANSMIT_TOO_LATE' || attempt === 3) throw err;
      await t.sim.waitFor(() => t.sim.receiving && t.sim.commands.at(-1)?.text === armCommand, 'receive re-armed after the refused TX');
    }
  }
}

const RN2483_INIT = [
  'radio rxstop',
  'mac pause',
  'radio set mod lora',
  'radio set freq 868100000',
  'radio set sf sf7',
  'radio set bw 125',
  'radio set iqi off',
  'radio set cr 4/5',
  'radio set prlen 8',
  'radio set crc on',
  'radio set sync 34',
  'radio set wdt 0',
  'radio rx 0',
];

const RAK3172_INIT = ['AT+PRECV=0', 'AT+NWM=0', 'AT', 'AT+P2P=?', 'AT+P2P=868100000:7:125:0:8:14', 'AT+SYNCWORD=3444', 'AT+IQINVER=0', 'AT+PRECV=65534'];

test('RN2483: init script, a packet becomes a RadioFrame with rssi/snr, receive re-armed, a downlink timed for RX2', async () => {
  const t = await setup('rn2483');
  try {
    assert.deepEqual(t.sim.commandTexts(), RN2483_INIT);
    assert.equal(t.sim.receiving, true);

    const before = Date.now();
    t.sim.receivePacket(UPLINK);
    await t.sim.waitFor(() => t.frames.length === 1, 'a frame');
    const frame = t.frames[0]!;
    assert.deepEqual(frame.payload, UPLINK);
    assert.equal(frame.source, `serial:${t.sim.hostPath}`);
    assert.equal(frame.frequency, 868100000);
    assert.equal(frame.dataRate, 'SF7BW125');
    assert.equal(frame.snr, -5);
    assert.equal(frame.rssi, -92);
    assert.ok(frame.receivedAt >= before - 5 && frame.receivedAt <= Date.now(), 'receivedAt is the arrival time');
    await t.sim.waitFor(() => t.sim.receiving, 'receive re-armed after the packet');
    assert.deepEqual(t.sim.commandTexts().slice(RN2483_INIT.length), ['radio get snr', 'radio get pktrssi', 'radio rx 0']);

    const { writtenAt, mark } = await downlinkAfterUplink(t, 'radio rx 0');
    await t.sim.waitFor(() => t.sim.receiving && t.sim.commands.at(-1)?.text === 'radio rx 0', 'receive re-armed after the transmission');
    const sequence = t.sim.commands.slice(mark);
    assert.deepEqual(
      sequence.map((c) => c.text),
      [
        'radio rxstop',
        'radio set freq 869525000',
        'radio set sf sf12',
        'radio set bw 125',
        'radio set iqi on',
        'radio set pwr 14',
        `radio tx ${DOWNLINK.toString('hex').toUpperCase()}`,
        'radio set freq 868100000',
        'radio set sf sf7',
        'radio set bw 125',
        'radio set iqi off',
        'radio rx 0',
      ],
    );
    // The TX command goes out txLeadMs (40) before 2 s after the uplink line's first byte.
    const txAt = sequence.find((c) => c.text.startsWith('radio tx'))!.at - writtenAt;
    assert.ok(txAt >= 2000 - 40 - 15 && txAt <= 2000 - 40 + 250, `TX command ${txAt.toFixed(1)} ms after the uplink line`);
    assert.equal(t.sim.iqInverted, false);
    const health = t.source.health();
    assert.equal(health.up, true);
    assert.equal(health.framesReceived, t.frames.length);
    assert.equal(health.framesSent, 1);
  } finally {
    await t.close();
  }
});

test('RAK3172: init script, +EVT:RXP2P with rssi/snr, AT+PSEND in RX2 with IQ inverted, receive re-armed', async () => {
  const t = await setup('rak3172');
  try {
    assert.deepEqual(t.sim.commandTexts(), RAK3172_INIT);
    t.sim.receivePacket(UPLINK, -61, 9);
    await t.sim.waitFor(() => t.frames.length === 1, 'a frame');
    assert.deepEqual(t.frames[0]!.payload, UPLINK);
    assert.equal(t.frames[0]!.rssi, -61);
    assert.equal(t.frames[0]!.snr, 9);
    await t.sim.waitFor(() => t.sim.commandTexts().length === RAK3172_INIT.length + 2, 're-arm');
    assert.deepEqual(t.sim.commandTexts().slice(RAK3172_INIT.length), ['AT+PRECV=0', 'AT+PRECV=65534']);

    // Some builds put a length field before the payload: the payload is the last field.
    t.sim.write(`+EVT:RXP2P:-70:3:${UPLINK.length}:${UPLINK.toString('hex')}\r\n`);
    await t.sim.waitFor(() => t.frames.length === 2, 'the second frame');
    assert.deepEqual(t.frames[1]!.payload, UPLINK);
    assert.equal(t.frames[1]!.rssi, -70);

    const { writtenAt, mark } = await downlinkAfterUplink(t, 'AT+PRECV=65534');
    await t.sim.waitFor(() => t.sim.commands.at(-1)?.text === 'AT+PRECV=65534' && t.sim.receiving, 'receive re-armed after TX');
    const sequence = t.sim.commands.slice(mark).map((c) => c.text);
    const psend = sequence.lastIndexOf(`AT+PSEND=${DOWNLINK.toString('hex').toUpperCase()}`);
    assert.ok(psend > 0, JSON.stringify(sequence));
    assert.deepEqual(sequence.slice(psend - 3, psend), ['AT+PRECV=0', 'AT+P2P=869525000:12:125:0:8:14', 'AT+IQINVER=1']);
    assert.deepEqual(sequence.slice(psend + 1), ['AT+P2P=868100000:7:125:0:8:14', 'AT+IQINVER=0', 'AT+PRECV=65534']);
    const txAt = t.sim.commands.slice(mark).find((c) => c.text.startsWith('AT+PSEND'))!.at - writtenAt;
    assert.ok(txAt >= 2000 - 40 - 15 && txAt <= 2000 - 40 + 250, `TX command ${txAt.toFixed(1)} ms after the uplink line`);
  } finally {
    await t.close();
  }
});

test('a command that times out fails init: the port is reopened after the backoff and initialised again', async () => {
  const sim = new ModemSimulator('rn2483');
  sim.silentOnce.push('radio set sf');
  await sim.start();
  const source = new SerialModemSource({
    path: sim.hostPath,
    modem: 'rn2483',
    baudRate: 57600,
    receive: { frequency: 868300000, spreadingFactor: 9, bandwidth: 125 },
    initTimeoutMs: 1000,
    clock: systemClock,
    logger,
  });
  try {
    const started = performance.now();
    await source.start();
    await sim.waitFor(() => source.state === 'receiving', 'receiving after the second init');
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 1000 + 1000, `reopened after the 1 s backoff (${elapsed.toFixed(0)} ms)`);
    // Lower bounds: on a loaded machine another command may miss its timeout too.
    assert.ok(sim.commandTexts().filter((c) => c === 'mac pause').length >= 2, 'the init script ran again');
    const detail = source.health().detail!;
    assert.ok((detail.commandTimeouts as number) >= 1);
    assert.ok((detail.reopens as number) >= 1);
    assert.match(String(detail.lastError), /radio set sf/);

    // A TX that the modem never reports done: the transmission fails, receive comes back.
    const frames: RadioFrame[] = [];
    source.onFrame((f) => frames.push(f));
    sim.receivePacket(UPLINK);
    await sim.waitFor(() => frames.length === 1 && sim.receiving, 'a frame');
    sim.silentOnce.push('radio tx');
    await assert.rejects(
      source.transmit(rx2(1000, frames[0]!.replyTo)),
      (err: unknown) => modemCode(err) === 'COMMAND_TIMEOUT',
    );
    await sim.waitFor(() => sim.receiving && sim.commands.at(-1)?.text === 'radio rx 0', 'receive re-armed after the failed TX');
    assert.equal(source.state, 'receiving');
  } finally {
    await source.stop();
    await sim.close();
  }
});

test('garbage, malformed reports and half lines are skipped; the packets among them still arrive', async () => {
  const t = await setup('rn2483');
  try {
    t.sim.write('\x00\xff\xfe garbage \x1b[2J\r\n');
    t.sim.write('radio_rx  ABC\r\n'); // odd hex: receive ended, re-armed, no frame
    await t.sim.waitFor(() => t.sim.receiving, 're-armed after the malformed report');
    // A report split over two writes: the simulator cannot see it as one, so say the receive ended.
    t.sim.receiving = false;
    t.sim.write('radio_r');
    await sleep(50);
    t.sim.write('x  0102A0\r\n'); // completes the half line: a packet
    await t.sim.waitFor(() => t.frames.length === 1, 'the packet split over two writes');
    assert.deepEqual(t.frames[0]!.payload, Buffer.from('0102a0', 'hex'));
    await t.sim.waitFor(() => t.sim.receiving, 're-armed');
    t.sim.write('x'.repeat(5000)); // an endless line without a newline
    t.sim.write('\n\r\n\r\nok\r\nradio_tx_ok\r\n');
    t.sim.write(`radio_rx ${UPLINK.toString('hex')}\r\n`); // one space, lower case
    await t.sim.waitFor(() => t.frames.length === 2, 'the packet after the noise');
    assert.deepEqual(t.frames[1]!.payload, UPLINK);
    await t.sim.waitFor(() => t.sim.receiving, 're-armed');
    t.sim.write('radio_err\r\n'); // the receive failed: armed again
    await t.sim.waitFor(() => t.sim.receiving, 're-armed after radio_err');
    const detail = t.source.health().detail!;
    assert.equal(detail.receiveErrors, 1);
    assert.equal(detail.malformedReports, 1);
    assert.equal(detail.inits, 1, 'the noise never made the modem need a new init');
    assert.ok((detail.ignoredLines as number) >= 3, JSON.stringify(detail));
    assert.equal(t.source.state, 'receiving');
  } finally {
    await t.close();
  }
});

test('the port vanishing and coming back on the same path: reopened with backoff and initialised again', async () => {
  const t = await setup('rak3172');
  try {
    await t.sim.unplug();
    await t.sim.waitFor(() => t.source.state === 'waiting' || t.source.state === 'opening', 'the source to notice');
    assert.equal(t.source.health().up, false);
    await assert.rejects(
      t.source.transmit(rx2(2000, { source: t.source.name, firstByteAt: performance.now() })),
      (err: unknown) => modemCode(err) === 'MODEM_DOWN',
    );
    // Attempts at +1 s and +2 s find no port (backoff 1 s, 2 s, capped at reopenMaxMs 2 s).
    await sleep(3200);
    assert.ok((t.source.health().detail!.reopens as number) >= 2, JSON.stringify(t.source.health()));
    await t.sim.start();
    await t.sim.waitFor(() => t.source.state === 'receiving', 'receiving again', 10_000);
    assert.deepEqual(t.sim.commandTexts().slice(-RAK3172_INIT.length), RAK3172_INIT, 'the init script ran on the new port');
    t.sim.receivePacket(UPLINK, -50, 4);
    await t.sim.waitFor(() => t.frames.length === 1, 'a frame after the reopen');
    assert.equal(t.frames[0]!.rssi, -50);
  } finally {
    await t.close();
  }
});

test('2 000 random modem lines over the pty: nothing crashes and the modem keeps receiving', async () => {
  const t = await setup('rn2483');
  try {
    const random = seeded(7);
    for (let batch = 0; batch < 20; batch++) {
      let text = '';
      for (let i = 0; i < 100; i++) text += randomModemLine(random) + (random() < 0.9 ? '\r\n' : '');
      t.sim.write(text + '\r\n');
      await sleep(20);
    }
    await sleep(500);
    await t.sim.waitFor(() => t.source.state === 'receiving', 'receiving after the noise', 20_000);
    const before = t.frames.length;
    await t.sim.waitFor(() => t.sim.receiving, 'armed');
    t.sim.receivePacket(UPLINK);
    await t.sim.waitFor(() => t.frames.some((f, i) => i >= before && f.payload.equals(UPLINK)), 'the real packet after the noise');
  } finally {
    await t.close();
  }
});

