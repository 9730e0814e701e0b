// Builds what an end device sends and reads what it receives, using the vector-checked primitives.
import { aesEncryptBlocks, cmacKey, cryptFrmPayload, dataMic, deriveSessionKeys, Direction, aesCmac } from '../../src/lpwan/lorawan/crypto.js';
import { onAirBytes } from '../../src/lpwan/lorawan/phy.js';

export interface DeviceKeys {
  devAddr: string;
  nwkSKey: Buffer;
  appSKey: Buffer;
}

export function uplinkFrame(keys: DeviceKeys, o: { fCnt: number; fPort?: number; payload?: Buffer; confirmed?: boolean; ack?: boolean; fOpts?: Buffer; adrAckReq?: boolean; adr?: boolean }): Buffer {
  const devAddrLe = onAirBytes(keys.devAddr);
  const fOpts = o.fOpts ?? Buffer.alloc(0);
  const head = Buffer.alloc(8);
  head[0] = o.confirmed ? 0x80 : 0x40;
  devAddrLe.copy(head, 1);
  head[5] = (o.adr ? 0x80 : 0) | (o.ack ? 0x20 : 0) | (o.adrAckReq ? 0x40 : 0) | fOpts.length;
  head.writeUInt16LE(o.fCnt & 0xffff, 6);
  const parts = [head, fOpts];
  if (o.fPort !== undefined) {
    parts.push(Buffer.from([o.fPort]), cryptFrmPayload(o.fPort === 0 ? keys.nwkSKey : keys.appSKey, Direction.Up, devAddrLe, o.fCnt, o.payload ?? Buffer.alloc(0)));
  }
  const msg = Buffer.concat(parts);
  return Buffer.concat([msg, dataMic(cmacKey(keys.nwkSKey), Direction.Up, devAddrLe, o.fCnt, msg)]);
}

export interface ReadDownlink {
  confirmed: boolean;
  adr: boolean;
  devAddr: string;
  ack: boolean;
  fPending: boolean;
  fCnt16: number;
  fOpts: Buffer;
  fPort: number | undefined;
  payload: Buffer;
  micValid: boolean;
}

/** Reads a downlink the way the device does (full counter given by the test). */
export function readDownlink(keys: DeviceKeys, bytes: Buffer, fCnt: number): ReadDownlink {
  const fCtrl = bytes[5]!;
  const fOptsLen = fCtrl & 0x0f;
  const end = bytes.length - 4;
  const hasPort = end > 8 + fOptsLen;
  const fPort = hasPort ? bytes[8 + fOptsLen] : undefined;
  const devAddrLe = bytes.subarray(1, 5);
  const enc = hasPort ? bytes.subarray(9 + fOptsLen, end) : Buffer.alloc(0);
  return {
    confirmed: bytes[0] === 0xa0,
    adr: (fCtrl & 0x80) !== 0,
    devAddr: Buffer.from(devAddrLe).reverse().toString('hex').toUpperCase(),
    ack: (fCtrl & 0x20) !== 0,
    fPending: (fCtrl & 0x10) !== 0,
    fCnt16: bytes.readUInt16LE(6),
    fOpts: bytes.subarray(8, 8 + fOptsLen),
    fPort,
    payload: fPort === undefined ? Buffer.alloc(0) : cryptFrmPayload(fPort === 0 ? keys.nwkSKey : keys.appSKey, Direction.Down, Buffer.from(devAddrLe), fCnt, enc),
    micValid: dataMic(cmacKey(keys.nwkSKey), Direction.Down, Buffer.from(devAddrLe), fCnt, bytes.subarray(0, end)).equals(bytes.subarray(end)),
  };
}

export function joinRequest(appKey: Buffer, joinEui: string, devEui: string, devNonce: number): Buffer {
  const body = Buffer.alloc(19);
  body[0] = 0x00;
  onAirBytes(joinEui).copy(body, 1);
  onAirBytes(devEui).copy(body, 9);
  body.writeUInt16LE(devNonce, 17);
  return Buffer.concat([body, aesCmac(appKey, body).subarray(0, 4)]);
}

/** What a device does with a join accept: decrypt with AES encrypt, check the MIC, derive its keys. */
export function acceptJoin(appKey: Buffer, accept: Buffer, devNonce: number): DeviceKeys & { micValid: boolean } {
  const plain = aesEncryptBlocks(appKey, accept.subarray(1));
  const fields = plain.subarray(0, plain.length - 4);
  const micValid = aesCmac(appKey, Buffer.concat([Buffer.from([0x20]), fields])).subarray(0, 4).equals(plain.subarray(plain.length - 4));
  const appNonce = fields.subarray(0, 3);
  const netId = fields.subarray(3, 6);
  const devAddr = Buffer.from(fields.subarray(6, 10)).reverse().toString('hex').toUpperCase();
  const nonce = Buffer.alloc(2);
  nonce.writeUInt16LE(devNonce);
  // The derivation itself is checked against the specification's vectors in lorawan.test.ts.
  return { devAddr, ...deriveSessionKeys(appKey, appNonce, netId, nonce), micValid };
}
