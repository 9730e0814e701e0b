import { parseHexPayload, parseSignedNumber, type CommandSpec, type ModemDriver, type ModemEvent, type ModemLink, type ReceiveSettings, type TransmitSettings } from './modem.js';

// RAKwireless RAK3172 / RAK3272 with RUI3 firmware: AT commands in LoRa P2P mode (AT+NWM=0).
const isOk = (line: string) => line === 'OK';
const isError = (line: string) => /^AT_[A-Z_]+$/.test(line) || line === 'ERROR';
const okCommand = (text: string, timeoutMs?: number): CommandSpec => ({ text, ok: isOk, error: isError, timeoutMs });

/** How many `AT` probes to send while the module restarts after a network mode change. */
const RESTART_PROBES = 5;
const RESTART_PAUSE_MS = 200;

/** The P2P bandwidth field: kHz on current RUI3 builds, an index (0 = 125) on older ones. */
type BandwidthEncoding = 'khz' | 'index';
const BANDWIDTH_INDEX: Record<number, number> = { 125: 0, 250: 1, 500: 2 };

export class Rak3172Driver implements ModemDriver {
  readonly type = 'rak3172' as const;
  readonly canTransmit = true;
  #bandwidthEncoding: BandwidthEncoding = 'khz';
  #pendingMetadata: { rssi?: number; snr?: number } | undefined;

  parseEvent(line: string): ModemEvent | undefined {
    if (!line.startsWith('+EVT:')) return undefined;
    const body = line.slice(5);
    if (body.startsWith('RXP2P:')) {
      // `+EVT:RXP2P:<rssi>:<snr>:<HEX>`; some builds put a length before the payload, so the
      // payload is always the last field and RSSI/SNR the first two.
      const fields = body.slice(6).split(':');
      const payload = parseHexPayload(fields[fields.length - 1]!);
      if (!payload || fields.length < 3) return { kind: 'malformed', detail: `unreadable receive report ${JSON.stringify(line.slice(0, 80))}` };
      return { kind: 'packet', payload, rssi: parseSignedNumber(fields[0]), snr: parseSignedNumber(fields[1]) };
    }
    if (/^RXP2P[ ,]+RECEIVE TIMEOUT/i.test(body)) return { kind: 'receive-timeout' };
    if (/^RXP2P[ ,]+RECEIVE ERROR/i.test(body)) return { kind: 'radio-error', detail: body };
    if (body.startsWith('RXP2P,')) {
      // Very old builds: `+EVT:RXP2P, RSSI -60, SNR 11`, then `+EVT:<HEX>` on the next line.
      const rssi = /RSSI\s*(-?\d+)/i.exec(body);
      const snr = /SNR\s*(-?\d+)/i.exec(body);
      this.#pendingMetadata = { rssi: parseSignedNumber(rssi?.[1]), snr: parseSignedNumber(snr?.[1]) };
      return { kind: 'packet-metadata', ...this.#pendingMetadata };
    }
    if (/^TXP2P DONE/i.test(body)) return { kind: 'transmit-done' };
    if (this.#pendingMetadata) {
      const metadata = this.#pendingMetadata;
      this.#pendingMetadata = undefined;
      const payload = parseHexPayload(body);
      return payload ? { kind: 'packet', payload, ...metadata } : { kind: 'malformed', detail: `unreadable receive payload ${JSON.stringify(line.slice(0, 80))}` };
    }
    // Other RUI3 events (join, link check) do not concern P2P receive: skipped as noise.
    return undefined;
  }

  reset(): void {
    this.#pendingMetadata = undefined;
  }

  async initialise(link: ModemLink, settings: ReceiveSettings): Promise<void> {
    // Stop a continuous receive left running (else AT_BUSY_ERROR); in LoRaWAN mode this answers
    // AT_MODE_NO_SUPPORT, which also means "not receiving".
    await link.command({ text: 'AT+PRECV=0', ok: (l) => isOk(l) || isError(l), error: () => false });
    await link.command(okCommand('AT+NWM=0'));
    // Changing the network mode restarts the module: probe until it answers again.
    let alive = false;
    for (let i = 0; i < RESTART_PROBES && !alive; i++) {
      try {
        await link.command(okCommand('AT'));
        alive = true;
      } catch (err) {
        if (i === RESTART_PROBES - 1) throw err;
        await link.pause(RESTART_PAUSE_MS);
      }
    }
    await this.#probeBandwidthEncoding(link);
    await link.command(okCommand(this.#p2p(settings, 14)));
    await link.command(okCommand('AT+SYNCWORD=3444'));
    await link.command(okCommand('AT+IQINVER=0'));
    await link.command(okCommand('AT+PRECV=65534'));
  }

  async rearmReceive(link: ModemLink): Promise<void> {
    // 65534 keeps receiving, but a receive error or an older build's single-packet receive leaves
    // it idle; stopping first makes the re-arm answer OK in every case instead of AT_BUSY_ERROR.
    await link.command({ text: 'AT+PRECV=0', ok: (l) => isOk(l) || isError(l), error: () => false });
    await link.command(okCommand('AT+PRECV=65534'));
  }

  async prepareTransmit(link: ModemLink, tx: TransmitSettings): Promise<void> {
    await link.command({ text: 'AT+PRECV=0', ok: (l) => isOk(l) || isError(l), error: () => false });
    await link.command(okCommand(this.#p2p(tx, Math.max(5, Math.min(22, Math.round(tx.power))))));
    await link.command(okCommand(`AT+IQINVER=${tx.invertIq ? 1 : 0}`));
  }

  async startTransmit(link: ModemLink, payload: Buffer): Promise<void> {
    await link.command(okCommand(`AT+PSEND=${payload.toString('hex').toUpperCase()}`));
  }

  async restoreReceive(link: ModemLink, settings: ReceiveSettings): Promise<void> {
    await link.command(okCommand(this.#p2p(settings, 14)));
    await link.command(okCommand('AT+IQINVER=0'));
    await link.command(okCommand('AT+PRECV=65534'));
  }

  async #probeBandwidthEncoding(link: ModemLink): Promise<void> {
    try {
      const answer = await link.command({ text: 'AT+P2P=?', ok: isOk, error: isError, partial: (l) => /^(AT\+P2P=)?\d+:/.test(l) });
      const value = answer.lines.find((l) => /^(AT\+P2P=)?\d+:/.test(l));
      const fields = value?.replace(/^AT\+P2P=/, '').split(':');
      const bw = fields ? Number(fields[2]) : NaN;
      if (bw === 0 || bw === 1 || bw === 2) this.#bandwidthEncoding = 'index';
      else if (bw === 125 || bw === 250 || bw === 500) this.#bandwidthEncoding = 'khz';
    } catch (err) {
      // A build that cannot report its settings: keep the current RUI3 form (kHz).
      if ((err as { code?: string }).code !== 'COMMAND_FAILED') throw err;
    }
  }

  #p2p(s: ReceiveSettings, power: number): string {
    const bw = this.#bandwidthEncoding === 'index' ? BANDWIDTH_INDEX[s.bandwidth] : s.bandwidth;
    // CR 0 = 4/5, preamble 8: LoRaWAN's.
    return `AT+P2P=${s.frequency}:${s.spreadingFactor}:${bw}:0:8:${power}`;
  }
}
