import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LineReader, type ModemLine } from '../../../src/lpwan/serial/line-reader.js';
import { CommandChannel } from '../../../src/lpwan/serial/command-channel.js';
import { createModemDriver, MODEM_TYPES } from '../../../src/lpwan/serial/drivers.js';
import { SerialModemError, type ModemEvent } from '../../../src/lpwan/serial/modem.js';
import { randomModemLine, seeded } from './modem-simulator.js';

test('100 000 random modem lines through the line reader, every driver and the command channel crash nothing', async () => {
  const random = seeded(2026);
  for (const type of MODEM_TYPES) {
    const driver = createModemDriver(type);
    const written: string[] = [];
    const channel = new CommandChannel((text) => written.push(text), 50);
    const events: ModemEvent[] = [];
    const answers: string[] = [];
    let failures = 0;
    const reader = new LineReader((line: ModemLine) => {
      const event = driver.parseEvent(line.text);
      if (event) events.push(event);
      else channel.handleLine(line.text);
    });
    const ask = () =>
      channel
        .send({ text: 'probe', ok: (l) => l === 'OK' || l === 'ok', error: (l) => /^(AT_|ERROR|invalid_param|busy)/.test(l), partial: (l) => /^\d+:/.test(l) })
        .then((a) => answers.push(a.final))
        .catch((err: unknown) => {
          assert.ok(err instanceof SerialModemError, String(err));
          failures++;
        });
    let pending = ask();
    const lines = type === 'rn2483' ? 40_000 : 30_000;
    let chunk = '';
    for (let i = 0; i < lines; i++) {
      chunk += randomModemLine(random) + (random() < 0.95 ? (random() < 0.5 ? '\r\n' : '\n') : '');
      // Chunks cut at random places: lines arrive split as a UART driver delivers them.
      if (random() < 0.2) {
        const cut = Math.floor(random() * chunk.length);
        reader.push(Buffer.from(chunk.slice(0, cut), 'latin1'), i, i);
        reader.push(chunk.slice(cut), i, i);
        chunk = '';
      }
      if (i % 500 === 0) {
        await pending;
        pending = ask();
      }
    }
    reader.push(chunk + '\n', lines, lines);
    await pending;
    // Every packet event holds bytes; every line that looked like a receive report was classified.
    for (const e of events) if (e.kind === 'packet') assert.ok(Buffer.isBuffer(e.payload) && e.payload.length > 0);
    assert.ok(events.length > 100, `${type}: events were recognised among the noise (${events.length})`);
    assert.ok(answers.length + failures > 50, `${type}: commands were answered or failed, never stuck`);

    // After all that noise, the same reader and driver still read a real report exactly.
    const before = events.length;
    const real = { rn2483: 'radio_rx  40F17DBE49\r\n', rak3172: '+EVT:RXP2P:-60:8:40F17DBE49\r\n', rak811: 'at+recv=-60,8,5:40F17DBE49\r\n' }[type];
    reader.push('\r\n' + real, 0, 0);
    const last = events[events.length - 1]!;
    assert.equal(events.length, before + 1, type);
    assert.equal(last.kind, 'packet');
    assert.equal((last as { payload: Buffer }).payload.toString('hex'), '40f17dbe49');
    channel.close(new SerialModemError('PORT_CLOSED', 'test over'));
  }
});

test('driver line formats: RN2483 one or two spaces and either hex case, RUI3 length field and two-line reports, RAK811 length check', () => {
  const rn = createModemDriver('rn2483');
  assert.deepEqual(rn.parseEvent('radio_rx  0A0b'), { kind: 'packet', payload: Buffer.from([10, 11]) });
  assert.deepEqual(rn.parseEvent('radio_rx 0A0B'), { kind: 'packet', payload: Buffer.from([10, 11]) });
  assert.equal(rn.parseEvent('radio_rx  0A0')?.kind, 'malformed');
  assert.equal(rn.parseEvent('radio_err')?.kind, 'radio-error');
  assert.equal(rn.parseEvent('radio_tx_ok')?.kind, 'transmit-done');
  assert.equal(rn.parseEvent('ok'), undefined);
  assert.equal(rn.parseEvent('4294967245'), undefined);

  const rak = createModemDriver('rak3172');
  assert.deepEqual(rak.parseEvent('+EVT:RXP2P:-60:11:0A0B'), { kind: 'packet', payload: Buffer.from([10, 11]), rssi: -60, snr: 11 });
  assert.deepEqual(rak.parseEvent('+EVT:RXP2P:-61:-3:2:0a0b'), { kind: 'packet', payload: Buffer.from([10, 11]), rssi: -61, snr: -3 });
  assert.equal(rak.parseEvent('+EVT:RXP2P RECEIVE TIMEOUT')?.kind, 'receive-timeout');
  assert.equal(rak.parseEvent('+EVT:TXP2P DONE')?.kind, 'transmit-done');
  assert.equal(rak.parseEvent('+EVT:RXP2P:-60:11:0A0')?.kind, 'malformed');
  assert.equal(rak.parseEvent('+EVT:RXP2P, RSSI -60, SNR 11')?.kind, 'packet-metadata');
  assert.deepEqual(rak.parseEvent('+EVT:0A0B'), { kind: 'packet', payload: Buffer.from([10, 11]), rssi: -60, snr: 11 });
  assert.equal(rak.parseEvent('+EVT:JOINED'), undefined, 'other RUI3 events are noise, not packets');
  assert.equal(rak.parseEvent('OK'), undefined);

  const rak811 = createModemDriver('rak811');
  assert.deepEqual(rak811.parseEvent('at+recv=-30,7,2:0A0B'), { kind: 'packet', payload: Buffer.from([10, 11]), rssi: -30, snr: 7 });
  assert.equal(rak811.parseEvent('at+recv=-30,7,3:0A0B')?.kind, 'malformed', 'length field disagrees');
  assert.equal(rak811.canTransmit, false);
});

test('the command channel: one command in flight, answers in order, a timeout fails only its command', async () => {
  const written: string[] = [];
  const channel = new CommandChannel((text) => written.push(text), 100);
  const spec = (text: string) => ({ text, ok: (l: string) => l === 'ok', error: (l: string) => l === 'invalid_param' });
  const first = channel.send(spec('one'));
  const second = channel.send(spec('two'));
  const third = channel.send(spec('three'));
  assert.deepEqual(written, ['one'], 'the second command waits for the first answer');
  channel.handleLine('noise');
  channel.handleLine('ok');
  assert.equal((await first).final, 'ok');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(written, ['one', 'two']);
  await assert.rejects(second, (err: unknown) => err instanceof SerialModemError && err.code === 'COMMAND_TIMEOUT');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(written, ['one', 'two', 'three']);
  channel.handleLine('invalid_param');
  await assert.rejects(third, (err: unknown) => err instanceof SerialModemError && err.code === 'COMMAND_FAILED');
  assert.equal(channel.timeouts, 1);
  assert.equal(channel.skippedLines, 1);
  channel.handleLine('late ok');
  assert.equal(channel.unexpectedLines, 1);
  channel.close(new SerialModemError('PORT_CLOSED', 'gone'));
  await assert.rejects(channel.send(spec('four')), (err: unknown) => err instanceof SerialModemError && err.code === 'PORT_CLOSED');
});
