import { requiredSnr, type LoraModulation } from '../lorawan/regions.js';

/** CID of LinkCheckReq / LinkCheckAns. */
export const LINK_CHECK = 0x02;

/**
 * LinkCheckAns: margin = best SNR above the demodulation floor of the uplink's spreading factor
 * (0..254 dB), and how many gateways heard the uplink.
 */
export function linkCheckAnswer(bestSnr: number | undefined, modulation: LoraModulation, gatewayCount: number): Buffer {
  const margin = bestSnr === undefined ? 0 : Math.min(254, Math.max(0, Math.trunc(bestSnr - requiredSnr(modulation))));
  return Buffer.from([LINK_CHECK, margin, Math.min(255, Math.max(1, gatewayCount))]);
}
