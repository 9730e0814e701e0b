/**
 * The boundary between radio hardware and the LoRaWAN network server. A source (the Semtech UDP
 * packet forwarder door, a serial LoRa modem, a Basics Station) turns what the hardware heard into
 * `RadioFrame`s and puts `RadioTransmission`s on the air; it knows nothing about LoRaWAN sessions,
 * devices or codecs. The network server (src/lpwan/) merges copies of one frame from every source
 * and answers through the source (and, for a forwarder, the gateway) that heard the best copy.
 */

/** `SF7BW125` style, as LoRa radios and packet forwarders name a data rate. */
export type LoraDataRate = string;

export interface RadioFrame {
  /** The PHYPayload bytes exactly as received (LoRaWAN MHDR … MIC, or a raw point-to-point payload). */
  payload: Buffer;
  /** When the daemon received it (ms since epoch); this becomes the states' `at`. */
  receivedAt: number;
  /** `gwmp:<gateway EUI>`, `serial:<configured path>` or `bs:<station EUI>`: the receiver that heard it. */
  source: string;
  /** Centre frequency in Hz. */
  frequency: number;
  dataRate: LoraDataRate;
  rssi?: number;
  snr?: number;
  /** The forwarder's own clock, kept for events only (forwarders without GPS are often wrong). */
  gatewayTime?: string;
  /**
   * Every receiver that heard this same frame. Set by the network server's deduplication (the
   * frame's own fields are then those of the best copy); sources leave it unset.
   */
  heardBy?: RadioReception[];
  /**
   * What the source needs to answer this frame (a concentrator `tmst` and the gateway EUI, or the
   * modem's line-arrival time). Opaque to the network server: it hands it back in
   * `RadioTransmission.replyTo`.
   */
  replyTo: unknown;
}

export interface RadioReception {
  source: string;
  rssi?: number;
  snr?: number;
  gatewayTime?: string;
}

/** Which window of a transmission: Class A RX1/RX2 after an uplink, or a Class C downlink sent at once. */
export type WindowName = 'rx1' | 'rx2' | 'rx2c';

/** One way to put a downlink on the air. */
export interface TransmitWindow {
  name: WindowName;
  payload: Buffer;
  frequency: number;
  dataRate: LoraDataRate;
  /** Transmit power in dBm. */
  power: number;
  /**
   * Transmit this long after the uplink's `receivedAt` (1 000 / 2 000 ms for RX1/RX2, 5 000 / 6 000
   * for a join accept); `undefined` = immediately (Class C).
   */
  delayMs: number | undefined;
}

/**
 * A downlink as an ordered list of windows: the source tries them in order and reports which one
 * went out (the network server has already checked size and duty cycle for each).
 */
export interface RadioTransmission {
  windows: TransmitWindow[];
  /** Downlinks to LoRaWAN end devices are sent with inverted IQ. */
  invertIq: boolean;
  /** The `replyTo` of the uplink being answered (for an immediate window: of the device's last uplink). */
  replyTo: unknown;
  /** The end device's DevEUI (16 hex digits) when the server knows it: a Basics Station's `dnmsg` names the device. */
  devEui?: string;
}

/** What the source did with a transmission: the index of the window that went out, and why earlier ones did not. */
export interface TransmitResult {
  window: number;
  problems: string[];
}

/** A transmission none of whose windows went out; `problems` says why, one per window tried. */
export class TransmitFailed extends Error {
  override name = 'TransmitFailed';
  constructor(
    readonly problems: string[],
    /** The source's own error for each window tried, in order. */
    readonly causes: unknown[] = [],
  ) {
    super(problems.join('; ') || 'no window to transmit in');
  }
}

/** What a source can do, so the network server never guesses from its name. */
export interface RadioCapabilities {
  /** Can put anything on the air (RAK811 modems cannot invert IQ: receive only). */
  transmit: boolean;
  /** Can hit RX1 (1 s after the uplink, short symbols): needs a concentrator timestamp, not host timing. */
  rx1: boolean;
  /** Can send at once, outside any Class A window (Class C). */
  immediate: boolean;
}

export interface RadioSourceHealth {
  source: string;
  up: boolean;
  framesReceived: number;
  framesSent: number;
  errors: number;
  detail?: Record<string, unknown>;
}

/** One piece of radio hardware (or one protocol door for many gateways); started and stopped with the daemon. */
export interface RadioSource {
  readonly name: string;
  readonly capabilities: RadioCapabilities;
  start(): Promise<void>;
  stop(): Promise<void>;
  onFrame(listener: (frame: RadioFrame) => void): void;
  /**
   * How many receivers behind this source can hear one uplink now (gateways online, 0 when none;
   * 1 for a modem): the network server stops waiting for copies of a frame once every receiver
   * delivered one.
   */
  receivers(): number;
  /** Resolves with the window that went out; rejects with `TransmitFailed` when none did. */
  transmit(transmission: RadioTransmission): Promise<TransmitResult>;
  health(): RadioSourceHealth;
}

/**
 * Tries the windows in order with `sendOne` (which resolves when the hardware took that window and
 * rejects with the reason it did not) and reports the first that went out. Every source's
 * `transmit` is this loop around its own single-window send.
 */
export async function transmitInOrder(t: RadioTransmission, sendOne: (window: TransmitWindow) => Promise<void>): Promise<TransmitResult> {
  const problems: string[] = [];
  const causes: unknown[] = [];
  for (const [i, w] of t.windows.entries()) {
    try {
      await sendOne(w);
      return { window: i, problems };
    } catch (err) {
      causes.push(err);
      problems.push(`${w.name}: ${(err as Error).message}`);
    }
  }
  throw new TransmitFailed(problems, causes);
}
