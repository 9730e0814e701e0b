import { parseHexPayload, parseSignedNumber, SerialModemError, type CommandSpec, type ModemDriver, type ModemEvent, type ModemLink, type ReceiveSettings } from './modem.js';

// RAKwireless RAK811 with firmware 3.x in LoRa P2P mode. Its firmware has no IQ inversion
// command, so it cannot reach LoRaWAN end devices: receive only (docs/lpwan.md, "Serial modems").
const isOk = (line: string) => /^OK\b/.test(line);
const isError = (line: string) => /^ERROR\b/i.test(line);
const okCommand = (text: string): CommandSpec => ({ text, ok: isOk, error: isError });
const BANDWIDTH_INDEX: Record<number, number> = { 125: 0, 250: 1, 500: 2 };
const RECV = /^at\+recv=(-?\d+),(-?\d+),(\d+):([0-9A-Fa-f]*)$/;

export class Rak811Driver implements ModemDriver {
  readonly type = 'rak811' as const;
  readonly canTransmit = false;

  parseEvent(line: string): ModemEvent | undefined {
    if (!line.startsWith('at+recv=')) return undefined;
    const m = RECV.exec(line);
    const payload = m ? parseHexPayload(m[4]!) : undefined;
    if (!m || !payload || payload.length !== Number(m[3])) return { kind: 'malformed', detail: `unreadable receive report ${JSON.stringify(line.slice(0, 80))}` };
    return { kind: 'packet', payload, rssi: parseSignedNumber(m[1]), snr: parseSignedNumber(m[2]) };
  }

  reset(): void {}

  async initialise(link: ModemLink, settings: ReceiveSettings): Promise<void> {
    // Switching to send mode is the only way this firmware stops a receive in progress; a firmware
    // that does not know transfer_mode answers ERROR, which is fine here.
    await link.command({ text: 'at+set_config=lorap2p:transfer_mode:2', ok: (l) => isOk(l) || isError(l), error: () => false });
    await link.command(okCommand('at+set_config=lora:work_mode:1'));
    // CR 1 = 4/5, preamble 8, 14 dBm (unused: receive only).
    await link.command(okCommand(`at+set_config=lorap2p:${settings.frequency}:${settings.spreadingFactor}:${BANDWIDTH_INDEX[settings.bandwidth]}:1:8:14`));
    await this.rearmReceive(link);
  }

  async rearmReceive(link: ModemLink): Promise<void> {
    await link.command(okCommand('at+set_config=lorap2p:transfer_mode:1'));
  }

  async prepareTransmit(): Promise<void> {
    throw new SerialModemError('TRANSMIT_UNSUPPORTED', 'the RAK811 firmware cannot invert IQ, so it cannot send LoRaWAN downlinks');
  }

  async startTransmit(): Promise<void> {
    throw new SerialModemError('TRANSMIT_UNSUPPORTED', 'the RAK811 firmware cannot invert IQ, so it cannot send LoRaWAN downlinks');
  }

  async restoreReceive(link: ModemLink, settings: ReceiveSettings): Promise<void> {
    await this.initialise(link, settings);
  }
}
