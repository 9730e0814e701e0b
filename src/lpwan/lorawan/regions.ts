/**
 * Regional parameters Outpost supports (docs/lpwan.md, "Regions"): data rates, the RX1/RX2 windows,
 * the largest payload per data rate, TX power indexes and the channel masks ADR sends. EU868 is the
 * default; US915, AU915 and AS923 (RP002-1.0.4) are chosen by `radio.region`.
 */
export type RegionName = 'EU868' | 'US915' | 'AU915' | 'AS923';

/** One LinkADRReq's channel mask: `chMaskCntl` says which 16 channels (or which rule) `chMask` covers. */
export interface ChannelMask {
  chMaskCntl: number;
  chMask: number;
}

export interface LoraModulation {
  spreadingFactor: number;
  /** kHz. */
  bandwidth: number;
}

export interface DownlinkWindow {
  frequency: number;
  dataRate: number;
  dataRateName: string;
  delayMs: number;
}

export interface Region {
  name: RegionName;
  /** DR index → modulation; undefined for FSK/RFU rates. */
  dataRates: ReadonlyArray<LoraModulation | undefined>;
  /** Largest MACPayload (M) per DR (repeater-compatible table). */
  maxMacPayload: ReadonlyArray<number>;
  rx2: { frequency: number; dataRate: number };
  /** Whether ETSI sub-band duty cycles apply to what the gateway transmits. */
  dutyCycle: boolean;
  /** Transmit power (dBm) for a downlink on this frequency. */
  downlinkPower(frequency: number): number;
  /** The RX1 frequency and data rate for an uplink. */
  rx1(uplinkFrequency: number, uplinkDataRate: number, rx1DrOffset: number): { frequency: number; dataRate: number } | undefined;
  /** The highest uplink data rate ADR may give a device (the fastest 125 kHz rate). */
  maxAdrDataRate: number;
  /** The highest TX power index (index i = max EIRP − 2·i dB; 0 = full power). */
  maxTxPowerIndex: number;
  /**
   * The channel masks of the LinkADRReq block ADR sends: the region's default channels, or for
   * the 72-channel plans the configured 8-channel sub-band (1–8) and its 500 kHz channel.
   */
  linkAdrMasks(subBand: number): ChannelMask[];
}

/**
 * Demodulation floor per spreading factor (dB), the same at every bandwidth: ADR and LinkCheckAns
 * measure the margin above it (EU868 DR0…DR5 = −20 … −7.5 dB).
 */
const REQUIRED_SNR: Record<number, number> = { 7: -7.5, 8: -10, 9: -12.5, 10: -15, 11: -17.5, 12: -20 };

export function requiredSnr(m: LoraModulation): number {
  return REQUIRED_SNR[m.spreadingFactor] ?? -20;
}

/** The two-request mask block of a 72-channel plan: 500 kHz channel of the sub-band, then its eight 125 kHz channels. */
function subBandMasks(subBand: number): ChannelMask[] {
  const i = subBand - 1;
  // ChMaskCntl 7: every 125 kHz channel off, ChMask applies to the 500 kHz channels 64–71.
  // ChMaskCntl n (0–3): ChMask enables 125 kHz channels 16n … 16n+15.
  return [
    { chMaskCntl: 7, chMask: 1 << i },
    { chMaskCntl: i >> 1, chMask: 0xff << (8 * (i & 1)) },
  ];
}

export const RECEIVE_DELAY1_MS = 1000;
export const RECEIVE_DELAY2_MS = 2000;
export const JOIN_ACCEPT_DELAY1_MS = 5000;
export const JOIN_ACCEPT_DELAY2_MS = 6000;

/** `SF7BW125` → {7, 125}; undefined for anything else (FSK, garbage). */
export function parseDataRateName(name: string): LoraModulation | undefined {
  const m = /^SF(\d{1,2})BW(\d{3})$/i.exec(name);
  if (!m) return undefined;
  const spreadingFactor = Number(m[1]);
  const bandwidth = Number(m[2]);
  if (spreadingFactor < 5 || spreadingFactor > 12 || ![125, 250, 500].includes(bandwidth)) return undefined;
  return { spreadingFactor, bandwidth };
}

export function dataRateName(m: LoraModulation): string {
  return `SF${m.spreadingFactor}BW${m.bandwidth}`;
}

/** The DR index of a modulation in a region, or undefined. */
export function dataRateIndex(region: Region, name: string): number | undefined {
  const m = parseDataRateName(name);
  if (!m) return undefined;
  const i = region.dataRates.findIndex((d) => d && d.spreadingFactor === m.spreadingFactor && d.bandwidth === m.bandwidth);
  return i < 0 ? undefined : i;
}

/** Largest FRMPayload a downlink at this DR can carry with `fOptsLength` bytes of MAC commands. */
export function maxFrmPayload(region: Region, dataRate: number, fOptsLength = 0): number {
  const m = region.maxMacPayload[dataRate] ?? 0;
  return Math.max(0, m - 7 - fOptsLength - 1);
}

const sf = (spreadingFactor: number, bandwidth = 125): LoraModulation => ({ spreadingFactor, bandwidth });

export const EU868: Region = {
  name: 'EU868',
  dataRates: [sf(12), sf(11), sf(10), sf(9), sf(8), sf(7), sf(7, 250), undefined],
  maxMacPayload: [59, 59, 59, 123, 230, 230, 230, 230],
  rx2: { frequency: 869_525_000, dataRate: 0 },
  dutyCycle: true,
  // EIRP limits: 16 dBm below 869.2 MHz, 27 dBm in the 869.4–869.65 MHz sub-band (2 dBi antenna margin).
  downlinkPower: (frequency) => (frequency >= 869_400_000 && frequency < 869_650_000 ? 27 : 14),
  rx1: (frequency, dataRate, offset) => ({ frequency, dataRate: Math.max(0, dataRate - offset) }),
  maxAdrDataRate: 5,
  maxTxPowerIndex: 7,
  // The three mandatory channels 868.1, 868.3, 868.5 MHz every EU868 device has.
  linkAdrMasks: () => [{ chMaskCntl: 0, chMask: 0x0007 }],
};

const US915_RX1_DR: ReadonlyArray<ReadonlyArray<number>> = [
  [10, 9, 8, 8],
  [11, 10, 9, 8],
  [12, 11, 10, 9],
  [13, 12, 11, 10],
  [13, 13, 12, 11],
];

/** The uplink channel index of a US915 frequency (125 kHz channels 0–63, 500 kHz channels 64–71). */
function us915Channel(frequency: number, dataRate: number): number | undefined {
  if (dataRate === 4) {
    const n = Math.round((frequency - 903_000_000) / 1_600_000);
    return n >= 0 && n < 8 ? 64 + n : undefined;
  }
  const n = Math.round((frequency - 902_300_000) / 200_000);
  return n >= 0 && n < 64 ? n : undefined;
}

export const US915: Region = {
  name: 'US915',
  dataRates: [sf(10), sf(9), sf(8), sf(7), sf(8, 500), undefined, undefined, undefined, sf(12, 500), sf(11, 500), sf(10, 500), sf(9, 500), sf(8, 500), sf(7, 500)],
  maxMacPayload: [19, 61, 134, 250, 250, 0, 0, 0, 41, 117, 230, 230, 230, 230],
  rx2: { frequency: 923_300_000, dataRate: 8 },
  dutyCycle: false,
  downlinkPower: () => 20,
  rx1: (frequency, dataRate, offset) => {
    const channel = us915Channel(frequency, dataRate);
    const dr = US915_RX1_DR[dataRate]?.[offset];
    if (channel === undefined || dr === undefined) return undefined;
    return { frequency: 923_300_000 + 600_000 * (channel % 8), dataRate: dr };
  },
  maxAdrDataRate: 3,
  maxTxPowerIndex: 14,
  linkAdrMasks: subBandMasks,
};

/** RP002 AU915 RX1 data rate by uplink DR (0–6) and RX1DROffset (0–5). */
const AU915_RX1_DR: ReadonlyArray<ReadonlyArray<number>> = [
  [8, 8, 8, 8, 8, 8],
  [9, 8, 8, 8, 8, 8],
  [10, 9, 8, 8, 8, 8],
  [11, 10, 9, 8, 8, 8],
  [12, 11, 10, 9, 8, 8],
  [13, 12, 11, 10, 9, 8],
  [13, 13, 12, 11, 10, 9],
];

/** The uplink channel index of an AU915 frequency (125 kHz channels 0–63 from 915.2 MHz, 500 kHz 64–71 from 915.9 MHz). */
function au915Channel(frequency: number, dataRate: number): number | undefined {
  if (dataRate === 6) {
    const n = Math.round((frequency - 915_900_000) / 1_600_000);
    return n >= 0 && n < 8 ? 64 + n : undefined;
  }
  const n = Math.round((frequency - 915_200_000) / 200_000);
  return n >= 0 && n < 64 ? n : undefined;
}

/**
 * AU915-928 (RP002-1.0.4): 64 + 8 uplink channels like US915 but from 915.2 MHz, DR0–5 = SF12–SF7
 * at 125 kHz, DR6 = SF8/500 kHz, downlinks on the eight 500 kHz channels from 923.3 MHz.
 */
export const AU915: Region = {
  name: 'AU915',
  dataRates: [sf(12), sf(11), sf(10), sf(9), sf(8), sf(7), sf(8, 500), undefined, sf(12, 500), sf(11, 500), sf(10, 500), sf(9, 500), sf(8, 500), sf(7, 500)],
  maxMacPayload: [59, 59, 59, 123, 250, 250, 250, 0, 61, 137, 250, 250, 250, 250],
  rx2: { frequency: 923_300_000, dataRate: 8 },
  dutyCycle: false,
  downlinkPower: () => 27,
  rx1: (frequency, dataRate, offset) => {
    const channel = au915Channel(frequency, dataRate);
    const dr = AU915_RX1_DR[dataRate]?.[offset];
    if (channel === undefined || dr === undefined) return undefined;
    return { frequency: 923_300_000 + 600_000 * (channel % 8), dataRate: dr };
  },
  maxAdrDataRate: 5,
  maxTxPowerIndex: 14,
  linkAdrMasks: subBandMasks,
};

/**
 * AS923-1 (RP002-1.0.4, dwell time off): EU868's data rates, default channels 923.2 and 923.4 MHz,
 * RX1 on the uplink frequency, RX2 923.2 MHz at DR2. Listen-before-talk rules differ by country:
 * no ETSI duty cycle tracker.
 */
export const AS923: Region = {
  name: 'AS923',
  dataRates: [sf(12), sf(11), sf(10), sf(9), sf(8), sf(7), sf(7, 250), undefined],
  maxMacPayload: [59, 59, 123, 123, 250, 250, 250, 250],
  rx2: { frequency: 923_200_000, dataRate: 2 },
  dutyCycle: false,
  downlinkPower: () => 14,
  rx1: (frequency, dataRate, offset) => ({ frequency, dataRate: Math.min(5, Math.max(0, dataRate - offset)) }),
  maxAdrDataRate: 5,
  maxTxPowerIndex: 7,
  linkAdrMasks: () => [{ chMaskCntl: 0, chMask: 0x0003 }],
};

export function regionByName(name: RegionName): Region {
  switch (name) {
    case 'US915':
      return US915;
    case 'AU915':
      return AU915;
    case 'AS923':
      return AS923;
    default:
      return EU868;
  }
}

/**
 * LoRa time on air in ms (Semtech's formula): preamble 8, explicit header, CR 4/5 unless given,
 * low data rate optimisation when a symbol lasts more than 16 ms.
 */
export function timeOnAirMs(payloadBytes: number, m: LoraModulation, options: { crc?: boolean; codingRate?: number; preamble?: number } = {}): number {
  const { spreadingFactor: s, bandwidth } = m;
  const tSym = 2 ** s / bandwidth; // ms, bandwidth in kHz
  const de = tSym > 16 ? 1 : 0;
  const crc = options.crc === false ? 0 : 1;
  const cr = options.codingRate ?? 1;
  const tPreamble = ((options.preamble ?? 8) + 4.25) * tSym;
  const nPayload = 8 + Math.max(Math.ceil((8 * payloadBytes - 4 * s + 28 + 16 * crc) / (4 * (s - 2 * de))) * (cr + 4), 0);
  return tPreamble + nPayload * tSym;
}
