import type { ChannelMask } from '../lorawan/regions.js';
import type { MacCommand } from './commands.js';

/** CID of LinkADRReq / LinkADRAns. */
export const LINK_ADR = 0x03;

export interface LinkAdrRequest {
  dataRate: number;
  txPower: number;
  nbTrans: number;
}

/**
 * The LinkADRReq block: one 5-byte command per channel mask, each `CID | DR<<4 | TXPower | ChMask
 * (LE) | ChMaskCntl<<4 | NbTrans`. A device takes the block as one request (the data rate and power
 * of the last command apply) and answers each command.
 */
export function linkAdrRequests(req: LinkAdrRequest, masks: readonly ChannelMask[]): Buffer {
  const out = Buffer.alloc(5 * masks.length);
  for (const [i, m] of masks.entries()) {
    const at = 5 * i;
    out[at] = LINK_ADR;
    out[at + 1] = ((req.dataRate & 0x0f) << 4) | (req.txPower & 0x0f);
    out.writeUInt16LE(m.chMask & 0xffff, at + 2);
    out[at + 4] = ((m.chMaskCntl & 0x07) << 4) | (req.nbTrans & 0x0f);
  }
  return out;
}

/** The answers in an uplink: accepted only when every LinkADRAns acknowledges mask, data rate and power. */
export function linkAdrVerdict(commands: readonly MacCommand[]): 'none' | 'accepted' | 'refused' {
  const answers = commands.filter((c) => c.cid === LINK_ADR);
  if (answers.length === 0) return 'none';
  return answers.every((a) => (a.payload[0]! & 0x07) === 0x07) ? 'accepted' : 'refused';
}
