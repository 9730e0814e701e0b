/**
 * MAC commands (LoRaWAN 1.0.2) as they appear in uplinks, and the answers Outpost gives. Lengths are
 * implicit per command; the first unknown command ends parsing (nothing after it can be located).
 */
export interface MacCommand {
  cid: number;
  name: string;
  payload: Buffer;
}

/** Uplink (device → network) commands: CID → [name, payload length]. */
const UPLINK_COMMANDS: Record<number, [string, number]> = {
  0x02: ['LinkCheckReq', 0],
  0x03: ['LinkADRAns', 1],
  0x04: ['DutyCycleAns', 0],
  0x05: ['RXParamSetupAns', 1],
  0x06: ['DevStatusAns', 2],
  0x07: ['NewChannelAns', 1],
  0x08: ['RXTimingSetupAns', 0],
  0x09: ['TxParamSetupAns', 0],
  0x0a: ['DlChannelAns', 1],
};

export function parseUplinkMacCommands(bytes: Buffer): { commands: MacCommand[]; unparsed: number } {
  const commands: MacCommand[] = [];
  let i = 0;
  while (i < bytes.length) {
    const spec = UPLINK_COMMANDS[bytes[i]!];
    if (!spec || i + 1 + spec[1] > bytes.length) break;
    commands.push({ cid: bytes[i]!, name: spec[0], payload: Buffer.from(bytes.subarray(i + 1, i + 1 + spec[1])) });
    i += 1 + spec[1];
  }
  return { commands, unparsed: bytes.length - i };
}

/** Demodulation floor per spreading factor (dB): the LinkCheckAns margin is measured above it. */
const REQUIRED_SNR: Record<number, number> = { 7: -7.5, 8: -10, 9: -12.5, 10: -15, 11: -17.5, 12: -20 };

/** LinkCheckAns: margin = best SNR above the demodulation floor (0..254 dB), gateway count. */
export function linkCheckAnswer(bestSnr: number | undefined, spreadingFactor: number, gatewayCount: number): Buffer {
  const floor = REQUIRED_SNR[spreadingFactor] ?? -20;
  const margin = bestSnr === undefined ? 0 : Math.min(254, Math.max(0, Math.trunc(bestSnr - floor)));
  return Buffer.from([0x02, margin, Math.min(255, Math.max(1, gatewayCount))]);
}
