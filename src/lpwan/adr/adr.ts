import { requiredSnr, type Region } from '../lorawan/regions.js';
import type { MacState } from '../mac/state.js';

/** How many uplinks ADR looks at (and waits for, at a new data rate, before deciding). */
export const ADR_HISTORY = 20;
/** Uplinks without a new request after the device refused one. */
export const ADR_NACK_HOLDOFF = 20;
/** Uplinks without a new request after one went unanswered (the downlink was probably lost). */
export const ADR_UNANSWERED_HOLDOFF = 3;

export interface AdrSettings {
  /** dB kept in reserve above the demodulation floor (default 10). */
  installationMargin: number;
  /** The highest data rate ADR gives a device (default DR5, capped by the region). */
  maxDataRate: number;
}

export interface AdrTarget {
  dataRate: number;
  txPower: number;
}

/**
 * The network side of ADR (LoRaWAN 1.0.4 §4.3.1.1; docs/lpwan.md, "ADR"): from the best SNR of the
 * last 20 uplinks at the device's data rate, `margin = maxSNR − requiredSNR(DR) − installationMargin`
 * and `steps = floor(margin / 3)`. Positive steps raise the data rate one DR per step up to the
 * maximum, then lower the power one index per step; negative steps raise the power and never lower
 * the data rate. Returns the target, or undefined when there is not enough history yet.
 */
export function adrTarget(state: Pick<MacState, 'dataRate' | 'txPower' | 'history'>, region: Region, settings: AdrSettings): AdrTarget | undefined {
  if (state.dataRate === null || state.history.length < ADR_HISTORY) return undefined;
  const modulation = region.dataRates[state.dataRate];
  if (!modulation) return undefined;
  const maxSnr = Math.max(...state.history);
  const margin = maxSnr - requiredSnr(modulation) - settings.installationMargin;
  let steps = Math.floor(margin / 3);
  const maxDr = Math.min(settings.maxDataRate, region.maxAdrDataRate);
  let dataRate = state.dataRate;
  let txPower = Math.min(state.txPower, region.maxTxPowerIndex);
  while (steps > 0 && dataRate < maxDr) {
    dataRate++;
    steps--;
  }
  while (steps > 0 && txPower < region.maxTxPowerIndex) {
    txPower++;
    steps--;
  }
  while (steps < 0 && txPower > 0) {
    txPower--;
    steps++;
  }
  return { dataRate, txPower };
}
