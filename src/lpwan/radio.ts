/**
 * The boundary between radio hardware and the LoRaWAN network server. A source (the Semtech UDP
 * packet forwarder door, a serial LoRa modem) turns what the hardware heard into `RadioFrame`s and
 * puts `RadioTransmission`s on the air; it knows nothing about LoRaWAN sessions, devices or codecs.
 * The network server (src/lpwan/) consumes frames from any number of sources and answers through
 * the source (and, for a forwarder, the gateway) that heard the uplink.
 */

/** `SF7BW125` style, as LoRa radios and packet forwarders name a data rate. */
export type LoraDataRate = string;

export interface RadioFrame {
  /** The PHYPayload bytes exactly as received (LoRaWAN MHDR … MIC, or a raw point-to-point payload). */
  payload: Buffer;
  /** When the daemon received it (ms since epoch); this becomes the states' `at`. */
  receivedAt: number;
  /** `gwmp:<gateway EUI>` or `serial:<configured path>`. */
  source: string;
  /** Centre frequency in Hz. */
  frequency: number;
  dataRate: LoraDataRate;
  rssi?: number;
  snr?: number;
  /** The forwarder's own clock, kept for events only (forwarders without GPS are often wrong). */
  gatewayTime?: string;
  /**
   * Every receiver that heard this same frame (a source that deduplicates copies from several
   * gateways reports them all here; the frame's own fields are those of the best one).
   */
  heardBy?: RadioReception[];
  /**
   * What the source needs to answer this frame in RX1/RX2 (a concentrator `tmst` and the gateway
   * EUI, or the modem's line-arrival time). Opaque to the network server: it hands it back in
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

export interface RadioTransmission {
  payload: Buffer;
  frequency: number;
  dataRate: LoraDataRate;
  /** Downlinks to LoRaWAN end devices are sent with inverted IQ. */
  invertIq: boolean;
  /** Transmit this long after the uplink's `receivedAt` (1 000 / 2 000 ms for RX1/RX2, 5 000 / 6 000 for a join accept). */
  delayMs: number;
  /** Transmit power in dBm, when the network server chooses one. */
  power?: number;
  /** The `replyTo` of the uplink being answered. */
  replyTo: unknown;
}

export interface RadioSourceHealth {
  source: string;
  up: boolean;
  framesReceived: number;
  framesSent: number;
  errors: number;
  detail?: Record<string, unknown>;
}

/** One piece of radio hardware; started and stopped with the daemon like any door. */
export interface RadioSource {
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  onFrame(listener: (frame: RadioFrame) => void): void;
  /** Resolves when the hardware took the transmission; rejects with the reason it could not. */
  transmit(transmission: RadioTransmission): Promise<void>;
  health(): RadioSourceHealth;
}
