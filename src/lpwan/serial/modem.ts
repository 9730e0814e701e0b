/**
 * What every serial LoRa modem driver provides. A driver knows its modem's command set and line
 * formats; the source (serial-modem-source.ts) owns the port, the one-command-at-a-time channel,
 * timing and recovery, so a new modem type is one small file.
 */

export type ModemType = 'rn2483' | 'rak3172' | 'rak811';

/** The modem's receive channel: LoRaWAN uplink settings, set explicitly on every init. */
export interface ReceiveSettings {
  frequency: number;
  spreadingFactor: number;
  /** kHz: 125, 250 or 500. */
  bandwidth: number;
}

/** One downlink as the modem sends it. */
export interface TransmitSettings extends ReceiveSettings {
  invertIq: boolean;
  /** dBm. */
  power: number;
}

/** An unsolicited line: never the answer to a command. */
export type ModemEvent =
  | { kind: 'packet'; payload: Buffer; rssi?: number; snr?: number }
  /** The first half of a two-line receive report (old RUI3 builds); the payload line follows. */
  | { kind: 'packet-metadata'; rssi?: number; snr?: number }
  /** Receive ended without a packet (watchdog, CRC error, a `radio_err` outside a transmission). */
  | { kind: 'radio-error'; detail: string }
  | { kind: 'receive-timeout' }
  | { kind: 'transmit-done' }
  /** It looked like a receive report but could not be read (odd hex, bad numbers): receive has ended. */
  | { kind: 'malformed'; detail: string };

/** A command and how to read its answer. Lines that match neither are noise and are skipped. */
export interface CommandSpec {
  text: string;
  /** The final answer that means success. */
  ok: (line: string) => boolean;
  /** The final answer that means failure. */
  error: (line: string) => boolean;
  /** Lines that belong to the answer before its final line (e.g. the value of a query). */
  partial?: (line: string) => boolean;
  timeoutMs?: number;
}

export interface CommandAnswer {
  /** The partial lines, then the final line. */
  lines: string[];
  final: string;
}

/** How a driver talks through the source: one command in flight at a time, each with a timeout. */
export interface ModemLink {
  command(spec: CommandSpec): Promise<CommandAnswer>;
  /** Waits `ms` milliseconds (a modem restarting after a mode change). */
  pause(ms: number): Promise<void>;
}

export interface ModemDriver {
  readonly type: ModemType;
  /** False for modems that cannot invert IQ (they cannot reach LoRaWAN end devices). */
  readonly canTransmit: boolean;
  /** Classifies a line: an unsolicited event, or undefined when it may answer a command. */
  parseEvent(line: string): ModemEvent | undefined;
  /** Forgets what a previous port's lines left behind (half of a two-line report). */
  reset(): void;
  /** Stop receive, leave the LoRaWAN stack, set the channel explicitly, arm continuous receive. */
  initialise(link: ModemLink, settings: ReceiveSettings): Promise<void>;
  /** Receive again after a packet or a receive error. */
  rearmReceive(link: ModemLink, settings: ReceiveSettings): Promise<void>;
  /** Signal quality of the last packet, for modems that only report it when asked. */
  packetMetadata?(link: ModemLink): Promise<{ rssi?: number; snr?: number }>;
  /** Stop receiving and switch to the downlink's channel and IQ. */
  prepareTransmit(link: ModemLink, tx: TransmitSettings): Promise<void>;
  /** The TX command itself; resolves when the modem accepted it (the `transmit-done` event follows). */
  startTransmit(link: ModemLink, payload: Buffer): Promise<void>;
  /** Back to the uplink channel, IQ normal, receive armed. */
  restoreReceive(link: ModemLink, settings: ReceiveSettings): Promise<void>;
}

export type SerialModemErrorCode =
  | 'COMMAND_TIMEOUT'
  | 'COMMAND_FAILED'
  | 'PORT_CLOSED'
  | 'MODEM_DOWN'
  | 'TRANSMIT_UNSUPPORTED'
  | 'TRANSMIT_TOO_LATE'
  | 'TRANSMIT_FAILED'
  | 'TRANSMIT_INVALID';

/** A modem failure as a value: `code` is what metrics, logs and callers branch on. */
export class SerialModemError extends Error {
  override name = 'SerialModemError';
  constructor(
    readonly code: SerialModemErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Even-length hex, either case (modems print upper case; some firmwares lower). */
export function parseHexPayload(text: string): Buffer | undefined {
  if (text.length === 0 || text.length % 2 !== 0 || !/^[0-9A-Fa-f]+$/.test(text)) return undefined;
  return Buffer.from(text, 'hex');
}

/** A signed decimal number as modems print RSSI and SNR, or undefined. */
export function parseSignedNumber(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = text.trim();
  if (!/^[+-]?\d{1,4}(\.\d+)?$/.test(t)) return undefined;
  return Number(t);
}

/** `SF7BW125` → its parts; undefined for anything else (FSK, typos). */
export function parseDataRate(dataRate: string): { spreadingFactor: number; bandwidth: number } | undefined {
  const m = /^SF(\d{1,2})BW(\d{3})$/.exec(dataRate);
  if (!m) return undefined;
  return { spreadingFactor: Number(m[1]), bandwidth: Number(m[2]) };
}

export function dataRateName(settings: { spreadingFactor: number; bandwidth: number }): string {
  return `SF${settings.spreadingFactor}BW${settings.bandwidth}`;
}
