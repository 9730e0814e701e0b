// A serial LoRa modem on the far end of a socat pty pair, speaking RN2483 or RAK3172 (RUI3) lines.
// The source under test opens the `host` link as it would open /dev/serial/by-id/…; killing socat
// is the modem being unplugged, starting it again on the same link paths is plugging it back.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SerialPort } from 'serialport';

export type SimulatedModem = 'rn2483' | 'rak3172';

export interface ReceivedCommand {
  text: string;
  /** performance.now() when the command line arrived. */
  at: number;
}

export class ModemSimulator {
  readonly dir: string;
  readonly hostPath: string;
  readonly modemPath: string;
  readonly commands: ReceivedCommand[] = [];
  /** Commands (by prefix) that get no answer, once each: a modem that hangs. */
  readonly silentOnce: string[] = [];
  /** Delay between accepting a TX command and reporting it done. */
  txDurationMs = 60;
  receiving = false;
  iqInverted = false;
  #socat: ChildProcess | undefined;
  #port: SerialPort | undefined;
  #buffer = '';

  constructor(readonly modem: SimulatedModem) {
    this.dir = mkdtempSync(join(tmpdir(), 'outpost-modem-'));
    this.hostPath = join(this.dir, 'usb-Simulated_LoRa_Modem-if00');
    this.modemPath = join(this.dir, 'modem-side');
  }

  async start(): Promise<void> {
    for (const p of [this.hostPath, this.modemPath]) if (existsSync(p)) unlinkSync(p);
    const socat = spawn('socat', ['-d', '-d', `pty,raw,echo=0,link=${this.modemPath}`, `pty,raw,echo=0,link=${this.hostPath}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.#socat = socat;
    let stderr = '';
    socat.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const deadline = Date.now() + 10_000;
    while (!stderr.includes('starting data transfer loop')) {
      if (socat.exitCode !== null) throw new Error(`socat exited: ${stderr}`);
      if (Date.now() > deadline) throw new Error(`socat did not start: ${stderr}`);
      await sleep(20);
    }
    const port = new SerialPort({ path: this.modemPath, baudRate: this.modem === 'rn2483' ? 57600 : 115200, autoOpen: false });
    await new Promise<void>((resolve, reject) => port.open((err) => (err ? reject(err) : resolve())));
    port.on('data', (chunk: Buffer) => this.#onData(chunk));
    port.on('error', () => {});
    this.#port = port;
    this.#buffer = '';
    this.receiving = false;
  }

  /** The modem vanishes: socat dies, both pty ends close. */
  async unplug(): Promise<void> {
    const socat = this.#socat;
    this.#socat = undefined;
    const port = this.#port;
    this.#port = undefined;
    if (socat && socat.exitCode === null) {
      const exited = new Promise((resolve) => socat.once('exit', resolve));
      socat.kill('SIGKILL');
      await exited;
    }
    if (port?.isOpen) await new Promise<void>((resolve) => port.close(() => resolve()));
    for (const p of [this.hostPath, this.modemPath]) if (existsSync(p)) unlinkSync(p);
  }

  async close(): Promise<void> {
    await this.unplug();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Writes raw text to the host (garbage, half lines, events); returns when the write was issued. */
  write(text: string | Buffer): number {
    const at = performance.now();
    // Any receive report (even a garbled one) means an RN2483 has stopped receiving.
    if (this.modem === 'rn2483' && /radio_(rx|err)/.test(text.toString())) this.receiving = false;
    this.#port?.write(text);
    return at;
  }

  /** The modem heard a packet: its receive report, as this modem prints it. Returns when it was written. */
  receivePacket(payload: Buffer, rssi = -87, snr = 7): number {
    const hex = payload.toString('hex').toUpperCase();
    // An RN2483 is idle after a report (write() notes it); a RAK3172 in continuous receive (65534) keeps receiving.
    return this.write(this.modem === 'rn2483' ? `radio_rx  ${hex}\r\n` : `+EVT:RXP2P:${rssi}:${snr}:${hex}\r\n`);
  }

  commandTexts(): string[] {
    return this.commands.map((c) => c.text);
  }

  async waitFor(predicate: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; commands: ${JSON.stringify(this.commandTexts().slice(-30))}`);
      await sleep(10);
    }
  }

  #onData(chunk: Buffer): void {
    this.#buffer += chunk.toString('latin1');
    let nl: number;
    while ((nl = this.#buffer.indexOf('\n')) >= 0) {
      const line = this.#buffer.slice(0, nl).replace(/\r$/, '');
      this.#buffer = this.#buffer.slice(nl + 1);
      if (line.length === 0) continue;
      this.commands.push({ text: line, at: performance.now() });
      const silent = this.silentOnce.findIndex((prefix) => line.startsWith(prefix));
      if (silent >= 0) {
        this.silentOnce.splice(silent, 1);
        continue;
      }
      for (const reply of this.modem === 'rn2483' ? this.#rn2483(line) : this.#rak3172(line)) {
        if (typeof reply === 'string') this.write(`${reply}\r\n`);
        else setTimeout(() => this.write(`${reply.later}\r\n`), reply.afterMs);
      }
    }
  }

  #rn2483(line: string): Array<string | { later: string; afterMs: number }> {
    if (line === 'radio rxstop') {
      this.receiving = false;
      return ['ok'];
    }
    if (line === 'mac pause') return ['4294967245'];
    if (line === 'radio get snr') return ['-5'];
    if (line === 'radio get pktrssi') return ['-92'];
    if (line === 'radio set iqi on') this.iqInverted = true;
    if (line === 'radio set iqi off') this.iqInverted = false;
    if (/^radio set (mod lora|freq \d+|sf sf\d+|bw \d+|cr 4\/5|prlen \d+|crc on|crc off|sync 34|wdt 0|iqi on|iqi off|pwr -?\d+)$/.test(line)) {
      return [this.receiving ? 'busy' : 'ok'];
    }
    if (line === 'radio rx 0') {
      if (this.receiving) return ['busy'];
      this.receiving = true;
      return ['ok'];
    }
    const tx = /^radio tx ([0-9A-F]+)$/.exec(line);
    if (tx) {
      if (this.receiving) return ['busy'];
      return ['ok', { later: 'radio_tx_ok', afterMs: this.txDurationMs }];
    }
    return ['invalid_param'];
  }

  #rak3172(line: string): Array<string | { later: string; afterMs: number }> {
    if (line === 'AT' || line === 'AT+NWM=0' || line === 'AT+SYNCWORD=3444') return ['OK'];
    if (line === 'AT+PRECV=0') {
      this.receiving = false;
      return ['OK'];
    }
    if (line === 'AT+P2P=?') return ['AT+P2P=868000000:7:125:0:8:14', 'OK'];
    if (/^AT\+P2P=\d+:\d+:(125|250|500):0:8:\d+$/.test(line)) return [this.receiving ? 'AT_BUSY_ERROR' : 'OK'];
    const iq = /^AT\+IQINVER=([01])$/.exec(line);
    if (iq) {
      this.iqInverted = iq[1] === '1';
      return ['OK'];
    }
    if (line === 'AT+PRECV=65534') {
      if (this.receiving) return ['AT_BUSY_ERROR'];
      this.receiving = true;
      return ['OK'];
    }
    const tx = /^AT\+PSEND=([0-9A-F]+)$/.exec(line);
    if (tx) {
      if (this.receiving) return ['AT_BUSY_ERROR'];
      return ['OK', { later: '+EVT:TXP2P DONE', afterMs: this.txDurationMs }];
    }
    return ['AT_COMMAND_NOT_FOUND'];
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A small deterministic generator: the same noise on every run. */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = Math.imul(s ^ (s >>> 15), 1 | s);
    x ^= x + Math.imul(x ^ (x >>> 7), 61 | x);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const PREFIXES = ['radio_rx  ', 'radio_rx ', 'radio_err', 'radio_tx_ok', 'ok', 'busy', 'invalid_param', '+EVT:RXP2P:', '+EVT:RXP2P, RSSI ', '+EVT:', '+EVT:TXP2P DONE', 'at+recv=', 'OK', 'AT_ERROR', 'RN2483 1.0.4', ''];

export function randomModemLine(random: () => number): string {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const len = Math.floor(random() * 80);
  let tail = '';
  const alphabet = random() < 0.5 ? '0123456789ABCDEFabcdef' : '0123456789ABCDEF:,-+ xyz\x00\x7f\xff\t';
  for (let i = 0; i < len; i++) tail += alphabet[Math.floor(random() * alphabet.length)];
  if (random() < 0.01) tail += 'Z'.repeat(2000);
  return pick(PREFIXES) + tail;
}
