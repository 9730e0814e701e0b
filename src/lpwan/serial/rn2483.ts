import { parseHexPayload, parseSignedNumber, type CommandSpec, type ModemDriver, type ModemEvent, type ModemLink, type ReceiveSettings, type TransmitSettings } from './modem.js';

// Microchip RN2483 (and RN2903): `radio` commands after `mac pause`, 57 600 baud, `\r\n` lines.
const ERRORS = new Set(['invalid_param', 'busy', 'not_joined', 'no_free_ch', 'silent', 'invalid_data_len', 'err', 'denied', 'frame_counter_err_rejoin_needed', 'mac_paused', 'keys_not_init']);
const isError = (line: string) => ERRORS.has(line.toLowerCase());
const isOk = (line: string) => line.toLowerCase() === 'ok';
const RX = /^radio_rx\s+(\S+)$/i;

function okCommand(text: string, timeoutMs?: number): CommandSpec {
  return { text, ok: isOk, error: isError, timeoutMs };
}

/** A `get` answers with its value; any non-error line that is not an event is that value. */
function valueCommand(text: string, value: RegExp): CommandSpec {
  return { text, ok: (line) => value.test(line), error: isError };
}

export class Rn2483Driver implements ModemDriver {
  readonly type = 'rn2483' as const;
  readonly canTransmit = true;

  parseEvent(line: string): ModemEvent | undefined {
    const lower = line.toLowerCase();
    if (lower.startsWith('radio_rx')) {
      const m = RX.exec(line);
      const payload = m ? parseHexPayload(m[1]!) : undefined;
      return payload ? { kind: 'packet', payload } : { kind: 'malformed', detail: `unreadable receive report ${JSON.stringify(line.slice(0, 80))}` };
    }
    if (lower === 'radio_err') return { kind: 'radio-error', detail: 'radio_err' };
    if (lower === 'radio_tx_ok') return { kind: 'transmit-done' };
    return undefined;
  }

  reset(): void {}

  async initialise(link: ModemLink, settings: ReceiveSettings): Promise<void> {
    // A receive left running by an earlier process makes every setting answer `busy`. When nothing
    // is receiving, some firmwares answer `invalid_param`: either answer means "not receiving now".
    await link.command({ text: 'radio rxstop', ok: (l) => isOk(l) || isError(l), error: () => false });
    // The LoRaWAN stack would otherwise take the radio back; the answer is how long it stays paused.
    await link.command(valueCommand('mac pause', /^\d+$/));
    for (const text of [
      'radio set mod lora',
      ...this.#channel(settings, false),
      'radio set cr 4/5',
      'radio set prlen 8',
      'radio set crc on',
      'radio set sync 34',
      'radio set wdt 0',
    ]) {
      await link.command(okCommand(text));
    }
    await link.command(okCommand('radio rx 0'));
  }

  async rearmReceive(link: ModemLink): Promise<void> {
    // After `radio_rx`/`radio_err` the radio is idle: one `radio rx 0` arms it again.
    await link.command(okCommand('radio rx 0'));
  }

  async packetMetadata(link: ModemLink): Promise<{ rssi?: number; snr?: number }> {
    const out: { rssi?: number; snr?: number } = {};
    // Both are optional: `pktrssi` exists only on newer firmware (older ones answer invalid_param).
    for (const [key, text] of [['snr', 'radio get snr'], ['rssi', 'radio get pktrssi']] as const) {
      try {
        const answer = await link.command({ text, ok: (l) => parseSignedNumber(l) !== undefined, error: isError });
        out[key] = parseSignedNumber(answer.final);
      } catch (err) {
        if ((err as { code?: string }).code !== 'COMMAND_FAILED') throw err;
      }
    }
    return out;
  }

  async prepareTransmit(link: ModemLink, tx: TransmitSettings): Promise<void> {
    await link.command({ text: 'radio rxstop', ok: (l) => isOk(l) || isError(l), error: () => false });
    for (const text of [...this.#channel(tx, tx.invertIq), `radio set pwr ${Math.max(-3, Math.min(15, Math.round(tx.power)))}`]) {
      await link.command(okCommand(text));
    }
  }

  async startTransmit(link: ModemLink, payload: Buffer): Promise<void> {
    await link.command(okCommand(`radio tx ${payload.toString('hex').toUpperCase()}`));
  }

  async restoreReceive(link: ModemLink, settings: ReceiveSettings): Promise<void> {
    for (const text of this.#channel(settings, false)) await link.command(okCommand(text));
    await link.command(okCommand('radio rx 0'));
  }

  #channel(s: ReceiveSettings, invertIq: boolean): string[] {
    return [`radio set freq ${s.frequency}`, `radio set sf sf${s.spreadingFactor}`, `radio set bw ${s.bandwidth}`, `radio set iqi ${invertIq ? 'on' : 'off'}`];
  }
}
