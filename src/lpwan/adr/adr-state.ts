import type { Region } from '../lorawan/regions.js';
import type { MacState } from '../mac/state.js';
import { ADR_HISTORY, ADR_NACK_HOLDOFF, ADR_UNANSWERED_HOLDOFF, adrTarget, type AdrSettings } from './adr.js';

/** What ADR needs to know of one accepted uplink. */
export interface AdrUplink {
  /** The uplink's data rate index (undefined: not a data rate of the region). */
  dataRate: number | undefined;
  /** FCtrl.ADR of the uplink: the device lets the network choose its data rate. */
  adrBit: boolean;
  /** Best SNR over every gateway that heard it. */
  bestSnr: number | undefined;
  /** What the uplink's LinkADRAns commands say. */
  verdict: 'none' | 'accepted' | 'refused';
}

/**
 * One uplink's effect on a device's ADR state (docs/lpwan.md, "ADR"); true when a LinkADRReq should
 * ride the answer to this uplink.
 *
 * - LinkADRAns: all bits set → the requested DR/TX power/NbTrans are the device's and the history
 *   restarts; any bit clear → nothing changes, and no new request for the next 20 uplinks.
 * - A sent request that the next uplink does not answer was lost (or ignored): it expires, and a
 *   new one may go a few uplinks later — the device is never left waiting on a request forever.
 * - The history holds the best SNR of each of the last 20 uplinks at the device's current data
 *   rate; a device that changes data rate on its own (ADR backoff) starts a new history.
 * - Nothing is requested of a device whose uplinks do not set the ADR bit, or with ADR off.
 */
export function adrOnUplink(state: MacState, up: AdrUplink, enabled: boolean, region: Region, settings: AdrSettings | undefined): boolean {
  let justSettled = false;
  const pending = state.adrPending;
  if (pending) {
    if (up.verdict === 'accepted') {
      state.dataRate = pending.dataRate;
      state.txPower = pending.txPower;
      state.nbTrans = pending.nbTrans;
      state.history = [];
      state.adrPending = null;
      justSettled = true;
    } else if (up.verdict === 'refused') {
      state.adrNacks++;
      state.adrPending = null;
      state.adrHoldoff = ADR_NACK_HOLDOFF;
      justSettled = true;
    } else if (pending.sent) {
      state.adrUnanswered++;
      state.adrPending = null;
      state.adrHoldoff = ADR_UNANSWERED_HOLDOFF;
      justSettled = true;
    }
  }
  if (up.dataRate !== undefined && up.dataRate !== state.dataRate) {
    state.dataRate = up.dataRate;
    state.history = [];
  }
  if (up.adrBit && up.bestSnr !== undefined) {
    state.history.push(up.bestSnr);
    if (state.history.length > ADR_HISTORY) state.history.splice(0, state.history.length - ADR_HISTORY);
  }
  if (!enabled || !up.adrBit || !settings) {
    // ADR turned off (for the network, the device, or by the device itself): nothing waits.
    state.adrPending = null;
    return false;
  }
  if (justSettled) return false;
  if (state.adrHoldoff > 0) {
    state.adrHoldoff--;
    return false;
  }
  if (state.adrPending) return !state.adrPending.sent;
  const target = adrTarget(state, region, settings);
  if (!target || (target.dataRate === state.dataRate && target.txPower === state.txPower)) return false;
  state.adrPending = { dataRate: target.dataRate, txPower: target.txPower, nbTrans: state.nbTrans, sent: false };
  return true;
}
