/**
 * MAC commands (LoRaWAN 1.0.x) as they appear in uplinks: parsing, and how each one shows in the
 * `uplink` event (docs/lpwan.md, "Events"). Lengths are implicit per command; the first unknown
 * command ends parsing (nothing after it can be located). What the server does with each command
 * lives in its own file here (link-check.ts, link-adr.ts, device-time.ts).
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
  0x0d: ['DeviceTimeReq', 0],
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

/** A command as the `uplink` event shows it: `{"cid": "<name>", …its fields}`. */
export function describeUplinkCommand(c: MacCommand): Record<string, unknown> {
  const b = c.payload;
  switch (c.name) {
    case 'LinkADRAns':
      return { cid: c.name, channelMaskAck: (b[0]! & 0x01) !== 0, dataRateAck: (b[0]! & 0x02) !== 0, powerAck: (b[0]! & 0x04) !== 0 };
    case 'DevStatusAns':
      // Margin: 6-bit signed SNR of the last downlink the device received.
      return { cid: c.name, battery: b[0], margin: ((b[1]! & 0x3f) << 26) >> 26 };
    default:
      return { cid: c.name, ...(b.length > 0 ? { payload: b.toString('hex').toUpperCase() } : {}) };
  }
}
