import { stat } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { SerialPort } from 'serialport';
import type { Clock } from '../../core/time.js';
import type { Logger } from '../../ops/logger.js';
import { transmitInOrder, type RadioCapabilities, type RadioFrame, type RadioSource, type RadioSourceHealth, type RadioTransmission, type TransmitResult, type TransmitWindow } from '../radio.js';
import { loraAirtimeMs } from './airtime.js';
import { CommandChannel } from './command-channel.js';
import { createModemDriver } from './drivers.js';
import { LineReader, type ModemLine } from './line-reader.js';
import {
  dataRateName,
  parseDataRate,
  SerialModemError,
  type CommandSpec,
  type ModemDriver,
  type ModemEvent,
  type ModemLink,
  type ModemType,
  type ReceiveSettings,
} from './modem.js';

export interface SerialModemOptions {
  /** Preferably `/dev/serial/by-id/…`: stable across re-plugging. */
  path: string;
  modem: ModemType;
  baudRate: number;
  receive: ReceiveSettings;
  /** How much earlier than the target start the TX command is written (serial time + modem latency). */
  txLeadMs?: number;
  /** Timeout of each settings command. */
  initTimeoutMs?: number;
  /** Upper bound of the reopen backoff (1 s, doubling). */
  reopenMaxMs?: number;
  clock: Clock;
  logger: Logger;
}

/** What a serial source hands the network server in `RadioFrame.replyTo`, and wants back in a transmission. */
export interface SerialReplyTo {
  source: string;
  /** Monotonic ms (`performance.now()`) when the first byte of the uplink's event line arrived. */
  firstByteAt: number;
}

type SourceState = 'stopped' | 'opening' | 'initialising' | 'receiving' | 'transmitting' | 'waiting';

/** First reopen delay after the port vanished or init failed; doubles up to `reopenMaxMs`. */
const REOPEN_MIN_MS = 1000;
/** A port that stayed up this long is healthy again: the next loss starts the backoff from 1 s. */
const HEALTHY_AFTER_MS = 30_000;
/** How often the configured path is checked: unplugging removes a by-id link before the fd reports it. */
const PATH_CHECK_MS = 1000;
/** Settings before a TX take a few commands; start them this long before the TX command is due. */
const TX_PREPARE_MS = 400;
/**
 * How late a TX may still start, in symbols of its data rate: a device keeps its receiver open for
 * a few symbols looking for the 8-symbol preamble, so a transmission that starts a little late is
 * still heard (at SF12/125 kHz four symbols are 131 ms, at SF7 only 4 ms).
 */
const TX_LATE_SYMBOLS = 4;

/**
 * One serial LoRa modem as a radio source: opens the port, runs the modem's init script, turns
 * receive reports into RadioFrames, times downlinks against the uplink line's arrival, and keeps
 * going when the modem misbehaves or is unplugged (reopen with backoff, init again).
 */
export class SerialModemSource implements RadioSource {
  readonly name: string;
  readonly #options: Required<Omit<SerialModemOptions, 'clock' | 'logger'>>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #driver: ModemDriver;
  readonly #reader: LineReader;
  readonly #listeners: Array<(frame: RadioFrame) => void> = [];
  #state: SourceState = 'stopped';
  #port: SerialPort | undefined;
  #channel: CommandChannel | undefined;
  /** Bumped on every open: callbacks of an earlier port see a different number and do nothing. */
  #generation = 0;
  #jobs: Promise<void> = Promise.resolve();
  #rearmQueued = false;
  /** Packets reported since the last re-arm, emitted by the re-arm job (after asking for their signal quality). */
  #heard: RadioFrame[] = [];
  #backoffMs = REOPEN_MIN_MS;
  #reopenTimer: NodeJS.Timeout | undefined;
  #healthyTimer: NodeJS.Timeout | undefined;
  #pathTimer: NodeJS.Timeout | undefined;
  #txWaiter: { resolve: () => void; reject: (err: Error) => void; timer: NodeJS.Timeout } | undefined;
  /** Transmissions waiting for their moment; stop() wakes them so they fail instead of hanging. */
  readonly #sleeping = new Map<NodeJS.Timeout, () => void>();
  #lastError: string | undefined;
  readonly #counts = {
    framesReceived: 0,
    framesSent: 0,
    errors: 0,
    opens: 0,
    reopens: 0,
    inits: 0,
    commandTimeouts: 0,
    commandFailures: 0,
    malformedReports: 0,
    receiveErrors: 0,
    transmitFailures: 0,
  };

  constructor(options: SerialModemOptions) {
    this.name = `serial:${options.path}`;
    this.#options = {
      path: options.path,
      modem: options.modem,
      baudRate: options.baudRate,
      receive: { ...options.receive },
      txLeadMs: options.txLeadMs ?? 40,
      initTimeoutMs: options.initTimeoutMs ?? 1000,
      reopenMaxMs: Math.max(REOPEN_MIN_MS, options.reopenMaxMs ?? 30_000),
    };
    this.#clock = options.clock;
    this.#logger = options.logger.child({ source: this.name, modem: options.modem });
    this.#driver = createModemDriver(options.modem);
    this.#reader = new LineReader((line) => this.#onLine(line));
  }

  get state(): SourceState {
    return this.#state;
  }

  onFrame(listener: (frame: RadioFrame) => void): void {
    this.#listeners.push(listener);
  }

  /** Starts opening the port and returns: a modem missing at boot is retried, it never stops the daemon. */
  async start(): Promise<void> {
    if (this.#state !== 'stopped') return;
    this.#open();
  }

  async stop(): Promise<void> {
    this.#state = 'stopped';
    this.#generation++;
    clearTimeout(this.#reopenTimer);
    clearTimeout(this.#healthyTimer);
    clearInterval(this.#pathTimer);
    for (const [timer, wake] of this.#sleeping) {
      clearTimeout(timer);
      wake();
    }
    this.#sleeping.clear();
    this.#failTransmitWait(new SerialModemError('PORT_CLOSED', 'the source stopped'));
    this.#channel?.close(new SerialModemError('PORT_CLOSED', 'the source stopped'));
    await closePort(this.#port);
    this.#port = undefined;
  }

  health(): RadioSourceHealth {
    const channel = this.#channel;
    return {
      source: this.name,
      up: this.#state === 'receiving' || this.#state === 'transmitting',
      framesReceived: this.#counts.framesReceived,
      framesSent: this.#counts.framesSent,
      errors: this.#counts.errors,
      detail: {
        modem: this.#options.modem,
        state: this.#state,
        frequency: this.#options.receive.frequency,
        dataRate: dataRateName(this.#options.receive),
        opens: this.#counts.opens,
        reopens: this.#counts.reopens,
        inits: this.#counts.inits,
        commandTimeouts: this.#counts.commandTimeouts,
        commandFailures: this.#counts.commandFailures,
        malformedReports: this.#counts.malformedReports,
        receiveErrors: this.#counts.receiveErrors,
        transmitFailures: this.#counts.transmitFailures,
        ignoredLines: this.#reader.overlongLines + (channel ? channel.skippedLines + channel.unexpectedLines : 0) + this.#ignoredOnEarlierPorts,
        lastError: this.#lastError,
      },
    };
  }

  #ignoredOnEarlierPorts = 0;

  /**
   * Host timing cannot hit RX1 (1 ms symbols at SF7 against USB and scheduler jitter): RX2 only
   * (docs/lpwan.md, "Serial modems"). RAK811 firmware cannot invert IQ: receive only.
   */
  get capabilities(): RadioCapabilities {
    const canTransmit = this.#driver.canTransmit;
    return { transmit: canTransmit, rx1: false, immediate: canTransmit };
  }

  /** One modem hears one copy. */
  receivers(): number {
    return 1;
  }

  /** Tries each window in order; see `#transmitWindow`. */
  transmit(t: RadioTransmission): Promise<TransmitResult> {
    return transmitInOrder(t, (w) => this.#transmitWindow(t, w));
  }

  /**
   * Sends a downlink: the TX command is written `txLeadMs` before `replyTo.firstByteAt + delayMs`
   * (or as soon as the modem is switched, for an immediate Class C window), after the modem was
   * switched to the window's channel; receive is re-armed afterwards whatever happened. Resolves
   * when the modem reports the transmission done.
   */
  async #transmitWindow(t: RadioTransmission, tx: TransmitWindow): Promise<void> {
    if (!this.#driver.canTransmit) {
      throw new SerialModemError('TRANSMIT_UNSUPPORTED', `${this.#options.modem} modems cannot send LoRaWAN downlinks (no IQ inversion)`);
    }
    const replyTo = t.replyTo as Partial<SerialReplyTo> | undefined;
    if (!replyTo || replyTo.source !== this.name || typeof replyTo.firstByteAt !== 'number') {
      throw new SerialModemError('TRANSMIT_INVALID', `replyTo does not name an uplink heard by ${this.name}`);
    }
    const rate = parseDataRate(tx.dataRate);
    if (!rate || ![125, 250, 500].includes(rate.bandwidth) || rate.spreadingFactor < 7 || rate.spreadingFactor > 12) {
      throw new SerialModemError('TRANSMIT_INVALID', `data rate ${JSON.stringify(tx.dataRate)} is not a LoRa SF7–12 / BW125–500 rate`);
    }
    if (tx.payload.length === 0 || tx.payload.length > 255) throw new SerialModemError('TRANSMIT_INVALID', `payload of ${tx.payload.length} bytes (1–255)`);
    if (this.#state !== 'receiving' && this.#state !== 'transmitting') throw new SerialModemError('MODEM_DOWN', `${this.name} is ${this.#state}`);
    const issueAt = tx.delayMs === undefined ? performance.now() + TX_PREPARE_MS : replyTo.firstByteAt + tx.delayMs - this.#options.txLeadMs;
    const lateToleranceMs = (TX_LATE_SYMBOLS * 2 ** rate.spreadingFactor) / rate.bandwidth;
    if (performance.now() > issueAt) throw new SerialModemError('TRANSMIT_TOO_LATE', `the window started ${Math.round(performance.now() - issueAt)} ms ago`);
    await this.#sleepUntil(issueAt - TX_PREPARE_MS);
    const generation = this.#generation;
    return this.#exclusive(async () => {
      if (generation !== this.#generation || this.#state !== 'receiving') throw new SerialModemError('MODEM_DOWN', `${this.name} is ${this.#state}`);
      if (performance.now() > issueAt + lateToleranceMs) throw new SerialModemError('TRANSMIT_TOO_LATE', `queued behind other commands until ${Math.round(performance.now() - issueAt)} ms after the window`);
      this.#state = 'transmitting';
      try {
        await this.#driver.prepareTransmit(this.#link, { frequency: tx.frequency, ...rate, invertIq: t.invertIq, power: tx.power });
        await this.#sleepUntil(issueAt);
        if (performance.now() > issueAt + lateToleranceMs) {
          throw new SerialModemError('TRANSMIT_TOO_LATE', `the modem took until ${Math.round(performance.now() - issueAt)} ms after the window to switch channels`);
        }
        const done = this.#waitForTransmitDone(loraAirtimeMs(tx.payload.length, rate.spreadingFactor, rate.bandwidth, true) + this.#options.initTimeoutMs + 1000);
        try {
          await this.#driver.startTransmit(this.#link, tx.payload);
        } catch (err) {
          this.#failTransmitWait(err as Error);
          await done.catch(() => {});
          throw err;
        }
        await done;
        this.#counts.framesSent++;
      } catch (err) {
        this.#counts.transmitFailures++;
        this.#noteError(err);
        throw err instanceof SerialModemError && err.code === 'COMMAND_FAILED' ? new SerialModemError('TRANSMIT_FAILED', err.message) : err;
      } finally {
        if (generation === this.#generation) {
          // Receive comes back on the uplink channel whatever happened to the transmission.
          try {
            await this.#driver.restoreReceive(this.#link, this.#options.receive);
            this.#state = 'receiving';
          } catch (err) {
            this.#afterFailure(err, generation);
          }
        }
      }
    });
  }

  /** The link drivers use: the current port's command channel. */
  readonly #link: ModemLink = {
    command: (spec: CommandSpec) => {
      const channel = this.#channel;
      if (!channel) return Promise.reject(new SerialModemError('PORT_CLOSED', `${this.name} is not open`));
      return channel.send(spec).catch((err: unknown) => {
        if (err instanceof SerialModemError && err.code === 'COMMAND_TIMEOUT') this.#counts.commandTimeouts++;
        if (err instanceof SerialModemError && err.code === 'COMMAND_FAILED') this.#counts.commandFailures++;
        throw err;
      });
    },
    pause: (ms: number) => new Promise((resolve) => setTimeout(resolve, ms)),
  };

  #open(): void {
    const generation = ++this.#generation;
    this.#state = 'opening';
    this.#counts.opens++;
    const port = new SerialPort({ path: this.#options.path, baudRate: this.#options.baudRate, autoOpen: false });
    this.#port = port;
    port.open((err) => {
      if (generation !== this.#generation) {
        if (!err) void closePort(port);
        return;
      }
      if (err) {
        this.#lost(generation, err);
        return;
      }
      this.#reader.reset();
      this.#driver.reset();
      this.#channel = new CommandChannel((text) => {
        port.write(`${text}\r\n`);
      }, this.#options.initTimeoutMs);
      port.on('data', (chunk: Buffer) => {
        if (generation === this.#generation) this.#reader.push(chunk, performance.now(), this.#clock.now());
      });
      port.on('close', (closeErr: Error | null) => this.#lost(generation, closeErr ?? new Error('port closed')));
      port.on('error', (portErr: Error) => this.#lost(generation, portErr));
      this.#logger.info({ baudRate: this.#options.baudRate }, 'serial modem port open');
      this.#watchPath(generation);
      this.#initialise(generation);
    });
  }

  /**
   * The fd does not always report an unplug at once (and a re-plugged modem may come back as
   * another tty while the old fd stays open): the device behind the configured path is checked,
   * and a path that vanished or now names another device counts as the port lost.
   */
  #watchPath(generation: number): void {
    clearInterval(this.#pathTimer);
    let openedDevice: number | undefined;
    void stat(this.#options.path).then(
      (s) => (openedDevice = s.rdev),
      () => {},
    );
    this.#pathTimer = setInterval(() => {
      if (generation !== this.#generation) return;
      stat(this.#options.path).then(
        (s) => {
          if (openedDevice !== undefined && s.rdev !== openedDevice) this.#lost(generation, new Error('the path names another device now'));
        },
        (err: NodeJS.ErrnoException) => this.#lost(generation, new Error(`the path vanished (${err.code ?? err.message})`)),
      );
    }, PATH_CHECK_MS);
    this.#pathTimer.unref();
  }

  #initialise(generation: number): void {
    this.#state = 'initialising';
    void this.#exclusive(async () => {
      if (generation !== this.#generation) return;
      this.#counts.inits++;
      await this.#driver.initialise(this.#link, this.#options.receive);
      if (generation !== this.#generation) return;
      this.#state = 'receiving';
      this.#logger.info({ frequency: this.#options.receive.frequency, dataRate: dataRateName(this.#options.receive) }, 'serial modem receiving');
      clearTimeout(this.#healthyTimer);
      this.#healthyTimer = setTimeout(() => {
        if (generation === this.#generation) this.#backoffMs = REOPEN_MIN_MS;
      }, HEALTHY_AFTER_MS);
      this.#healthyTimer.unref();
    }).catch((err: unknown) => this.#lost(generation, err as Error));
  }

  /** The port is gone or the modem does not answer its init: close, wait, open again by path. */
  #lost(generation: number, err: Error): void {
    if (generation !== this.#generation || this.#state === 'stopped') return;
    this.#generation++;
    this.#noteError(err);
    const channel = this.#channel;
    if (channel) this.#ignoredOnEarlierPorts += channel.skippedLines + channel.unexpectedLines;
    const reason = new SerialModemError('PORT_CLOSED', `${this.name}: ${err.message}`);
    channel?.close(reason);
    this.#channel = undefined;
    this.#failTransmitWait(reason);
    clearTimeout(this.#healthyTimer);
    clearInterval(this.#pathTimer);
    const port = this.#port;
    this.#port = undefined;
    void closePort(port);
    this.#state = 'waiting';
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.#options.reopenMaxMs);
    this.#logger.warn({ err: err.message, reopenInMs: delay }, 'serial modem lost; reopening');
    this.#reopenTimer = setTimeout(() => {
      if (this.#state !== 'waiting') return;
      this.#counts.reopens++;
      this.#open();
    }, delay);
  }

  /** A command failed outside init: initialise again on the same port; if that fails too, reopen. */
  #afterFailure(err: unknown, generation: number): void {
    this.#noteError(err);
    if (generation !== this.#generation || this.#state === 'stopped') return;
    this.#logger.warn({ err: (err as Error).message }, 'serial modem command failed; initialising again');
    this.#initialise(generation);
  }

  #onLine(line: ModemLine): void {
    let event: ModemEvent | undefined;
    try {
      event = this.#driver.parseEvent(line.text);
    } catch (err) {
      event = { kind: 'malformed', detail: (err as Error).message };
    }
    if (!event) {
      this.#channel?.handleLine(line.text);
      return;
    }
    switch (event.kind) {
      case 'packet':
        this.#counts.framesReceived++;
        this.#received(event, line);
        return;
      case 'packet-metadata':
        return;
      case 'transmit-done':
        this.#resolveTransmitWait();
        return;
      case 'radio-error':
        // The same line ends a transmission that failed and a receive that failed.
        if (this.#txWaiter) {
          this.#failTransmitWait(new SerialModemError('TRANSMIT_FAILED', `the modem reported ${event.detail}`));
          return;
        }
        this.#counts.receiveErrors++;
        this.#requestRearm();
        return;
      case 'receive-timeout':
        this.#requestRearm();
        return;
      case 'malformed':
        this.#counts.malformedReports++;
        this.#noteError(new Error(event.detail));
        this.#requestRearm();
        return;
    }
  }

  #received(event: Extract<ModemEvent, { kind: 'packet' }>, line: ModemLine): void {
    const replyTo: SerialReplyTo = { source: this.name, firstByteAt: line.firstByteAt };
    const frame: RadioFrame = {
      payload: event.payload,
      receivedAt: line.firstByteWallAt,
      source: this.name,
      frequency: this.#options.receive.frequency,
      dataRate: dataRateName(this.#options.receive),
      replyTo,
    };
    if (event.rssi !== undefined) frame.rssi = event.rssi;
    if (event.snr !== undefined) frame.snr = event.snr;
    if (this.#state !== 'receiving') {
      // Heard in the middle of init or a transmission: that sequence arms receive at its end.
      this.#emit(frame);
      return;
    }
    this.#heard.push(frame);
    this.#requestRearm();
  }

  #emit(frame: RadioFrame): void {
    for (const listener of this.#listeners) {
      try {
        listener(frame);
      } catch (err) {
        this.#logger.error({ err }, 'radio frame listener failed');
      }
    }
  }

  /**
   * Receive has ended (packet, error, timeout): emit what was heard and arm receive again, in one
   * job queued once however many reports arrive before it runs, so the arm is always the last step.
   */
  #requestRearm(): void {
    // During init or a transmission, the sequence in progress arms receive itself at its end.
    if (this.#state !== 'receiving' || this.#rearmQueued) return;
    this.#rearmQueued = true;
    const generation = this.#generation;
    void this.#exclusive(async () => {
      this.#rearmQueued = false;
      const frames = this.#heard.splice(0);
      const last = frames[frames.length - 1];
      if (last && this.#driver.packetMetadata && generation === this.#generation) {
        // The modem reports signal quality only when asked, and only for the last packet.
        try {
          const metadata = await this.#driver.packetMetadata(this.#link);
          if (metadata.rssi !== undefined) last.rssi = metadata.rssi;
          if (metadata.snr !== undefined) last.snr = metadata.snr;
        } catch (err) {
          this.#noteError(err);
        }
      }
      for (const frame of frames) this.#emit(frame);
      if (generation !== this.#generation || this.#state !== 'receiving') return;
      try {
        await this.#driver.rearmReceive(this.#link, this.#options.receive);
      } catch (err) {
        this.#afterFailure(err, generation);
      }
    });
  }

  /** Runs `job` after every job queued before it: driver sequences never interleave their commands. */
  #exclusive<T>(job: () => Promise<T>): Promise<T> {
    const run = this.#jobs.then(job);
    this.#jobs = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  #waitForTransmitDone(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#txWaiter = undefined;
        this.#counts.commandTimeouts++;
        reject(new SerialModemError('COMMAND_TIMEOUT', `no end-of-transmission report within ${Math.round(timeoutMs)} ms`));
      }, timeoutMs);
      this.#txWaiter = { resolve, reject, timer };
    });
  }

  #resolveTransmitWait(): void {
    const waiter = this.#txWaiter;
    if (!waiter) return;
    this.#txWaiter = undefined;
    clearTimeout(waiter.timer);
    waiter.resolve();
  }

  #failTransmitWait(err: Error): void {
    const waiter = this.#txWaiter;
    if (!waiter) return;
    this.#txWaiter = undefined;
    clearTimeout(waiter.timer);
    waiter.reject(err);
  }

  #sleepUntil(monotonicAt: number): Promise<void> {
    const ms = monotonicAt - performance.now();
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#sleeping.delete(timer);
        resolve();
      }, ms);
      this.#sleeping.set(timer, resolve);
    });
  }

  #noteError(err: unknown): void {
    this.#counts.errors++;
    this.#lastError = err instanceof Error ? err.message : String(err);
  }
}

function closePort(port: SerialPort | undefined): Promise<void> {
  if (!port || !port.isOpen) return Promise.resolve();
  return new Promise((resolve) => port.close(() => resolve()));
}
