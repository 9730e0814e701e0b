import type { Region } from '../lorawan/regions.js';

/** A LinkADRReq decided by ADR and waiting for the device's LinkADRAns. */
export interface PendingLinkAdr {
  dataRate: number;
  txPower: number;
  nbTrans: number;
  /** Whether a downlink carried it: an unsent request rides the next downlink; a sent one waits for its answer. */
  sent: boolean;
}

/**
 * What the network server knows about a device's radio between uplinks (docs/lpwan.md, "ADR").
 * Saved in the same transaction as the uplink counters, so a restart (or `kill -9`) changes
 * nothing: a LinkADRAns that arrives afterwards still finds its request.
 */
export interface MacState {
  /** The uplink data rate index the device uses (null until its first uplink). */
  dataRate: number | null;
  /** TX power index (0 = the region's maximum EIRP; each step 2 dB less). */
  txPower: number;
  /** How many times the device sends each unconfirmed uplink. */
  nbTrans: number;
  /** Best SNR of each of the last uplinks at `dataRate` (oldest first, at most 20). */
  history: number[];
  adrPending: PendingLinkAdr | null;
  /** Uplinks still to pass before ADR may send another request (after a NACK or an unanswered one). */
  adrHoldoff: number;
  /** LinkADRReqs the device refused. */
  adrNacks: number;
  /** LinkADRReqs that got no answer. */
  adrUnanswered: number;
  /** The device's receive windows: what the server believes it uses. */
  rx: { rx1DrOffset: number; rx2DataRate: number; rx2Frequency: number; rxDelay: number };
}

/** A fresh session's state: full power, one transmission, the region's RX2 (or the configured RX2 data rate). */
export function initialMacState(region: Region, rx2DataRate: number = region.rx2.dataRate): MacState {
  return {
    dataRate: null,
    txPower: 0,
    nbTrans: 1,
    history: [],
    adrPending: null,
    adrHoldoff: 0,
    adrNacks: 0,
    adrUnanswered: 0,
    rx: { rx1DrOffset: 0, rx2DataRate, rx2Frequency: region.rx2.frequency, rxDelay: 1 },
  };
}

/** Reads a stored state; anything missing or malformed falls back to the initial value (an older row, a hand edit). */
export function readMacState(json: string | null, region: Region, rx2DataRate?: number): MacState {
  const fresh = initialMacState(region, rx2DataRate);
  if (!json) return fresh;
  try {
    const stored = JSON.parse(json) as Partial<MacState>;
    return { ...fresh, ...stored, rx: { ...fresh.rx, ...(stored.rx ?? {}) } };
  } catch {
    return fresh;
  }
}
