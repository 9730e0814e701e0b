/**
 * 32-bit frame counters from the 16 bits on air (docs/lpwan.md, "Frame counters"). A session keeps
 * `fCntUp` = the next expected uplink counter; a frame is accepted only when it lies less than
 * MAX_FCNT_GAP ahead of it (and its MIC verifies with the reconstructed value).
 */
export const MAX_FCNT_GAP = 16384;

export interface Reconstructed {
  /** The full counter the frame would have if it is ahead of (or at) the expected one. */
  full: number;
  /** How far ahead of the expected counter: 0 = exactly the expected frame. */
  gap: number;
}

export function reconstructFCnt(fCntUp: number, fCnt16: number): Reconstructed {
  const gap = (fCnt16 - (fCntUp & 0xffff) + 0x10000) & 0xffff;
  return { full: (fCntUp + gap) >>> 0, gap };
}

/**
 * The counter a frame would have if it is a replay of an earlier one (behind the expected counter),
 * or undefined if no earlier counter has these low 16 bits. Only used to tell a replay from a bad key.
 */
export function replayedFCnt(fCntUp: number, fCnt16: number): number | undefined {
  const back = ((fCntUp & 0xffff) - fCnt16 + 0x10000) & 0xffff || 0x10000;
  return back >= 1 && back <= fCntUp ? fCntUp - back : undefined;
}
