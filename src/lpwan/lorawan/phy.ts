import { aesCmac, aesDecryptBlocks, cryptFrmPayload, dataMic, Direction, type AesKey, type CmacKey } from './crypto.js';

/**
 * LoRaWAN 1.0.x PHYPayload layouts (docs/lpwan.md): parsing what devices send (join requests and
 * data uplinks) and building what the network server answers (data downlinks, join accepts).
 * Multi-byte fields travel little-endian; identifiers are printed big-endian, upper-case hex.
 */

export const MType = {
  JoinRequest: 0,
  JoinAccept: 1,
  UnconfirmedDataUp: 2,
  UnconfirmedDataDown: 3,
  ConfirmedDataUp: 4,
  ConfirmedDataDown: 5,
} as const;

export interface DataUplink {
  kind: 'data';
  confirmed: boolean;
  /** Printed (big-endian) form, e.g. `26011BDA`. */
  devAddr: string;
  devAddrLe: Buffer;
  adr: boolean;
  adrAckReq: boolean;
  ack: boolean;
  fCnt16: number;
  /** Clear-text MAC commands (never encrypted in 1.0.x). */
  fOpts: Buffer;
  /** Absent when the frame carries no FPort. */
  fPort: number | undefined;
  /** Still encrypted. */
  frmPayload: Buffer;
  mic: Buffer;
  /** Everything the MIC covers (the frame without its last four bytes). */
  micInput: Buffer;
}

export interface JoinRequest {
  kind: 'join-request';
  joinEui: string;
  devEui: string;
  devNonce: number;
  devNonceLe: Buffer;
  mic: Buffer;
  micInput: Buffer;
}

export type UplinkParse = { ok: true; frame: DataUplink | JoinRequest } | { ok: false; reason: 'malformed' | 'unsupported-major' | 'not-uplink' };

/** Bytes reversed, as hex: turns an on-air (little-endian) identifier into its printed form. */
export function printedHex(le: Buffer): string {
  return Buffer.from(le).reverse().toString('hex').toUpperCase();
}

/** The on-air (little-endian) bytes of a printed hex identifier. */
export function onAirBytes(printed: string): Buffer {
  return Buffer.from(printed, 'hex').reverse();
}

export function parseUplink(bytes: Buffer): UplinkParse {
  if (bytes.length < 1) return { ok: false, reason: 'malformed' };
  const mhdr = bytes[0]!;
  if ((mhdr & 0x03) !== 0) return { ok: false, reason: 'unsupported-major' };
  const mtype = mhdr >> 5;
  if (mtype === MType.JoinRequest) {
    if (bytes.length !== 23) return { ok: false, reason: 'malformed' };
    return {
      ok: true,
      frame: {
        kind: 'join-request',
        joinEui: printedHex(bytes.subarray(1, 9)),
        devEui: printedHex(bytes.subarray(9, 17)),
        devNonce: bytes.readUInt16LE(17),
        devNonceLe: Buffer.from(bytes.subarray(17, 19)),
        mic: bytes.subarray(19, 23),
        micInput: bytes.subarray(0, 19),
      },
    };
  }
  if (mtype !== MType.UnconfirmedDataUp && mtype !== MType.ConfirmedDataUp) return { ok: false, reason: 'not-uplink' };
  if (bytes.length < 12) return { ok: false, reason: 'malformed' };
  const fCtrl = bytes[5]!;
  const fOptsLen = fCtrl & 0x0f;
  const macEnd = bytes.length - 4;
  if (8 + fOptsLen > macEnd) return { ok: false, reason: 'malformed' };
  const hasPort = macEnd > 8 + fOptsLen;
  return {
    ok: true,
    frame: {
      kind: 'data',
      confirmed: mtype === MType.ConfirmedDataUp,
      devAddr: printedHex(bytes.subarray(1, 5)),
      devAddrLe: Buffer.from(bytes.subarray(1, 5)),
      adr: (fCtrl & 0x80) !== 0,
      adrAckReq: (fCtrl & 0x40) !== 0,
      ack: (fCtrl & 0x20) !== 0,
      fCnt16: bytes.readUInt16LE(6),
      fOpts: bytes.subarray(8, 8 + fOptsLen),
      fPort: hasPort ? bytes[8 + fOptsLen] : undefined,
      frmPayload: hasPort ? bytes.subarray(9 + fOptsLen, macEnd) : Buffer.alloc(0),
      mic: bytes.subarray(macEnd),
      micInput: bytes.subarray(0, macEnd),
    },
  };
}

export function joinRequestMicValid(frame: JoinRequest, appKey: AesKey | CmacKey): boolean {
  return aesCmac(appKey, frame.micInput).subarray(0, 4).equals(frame.mic);
}

export function dataMicValid(frame: DataUplink, nwkSKey: CmacKey, fCnt: number): boolean {
  return dataMic(nwkSKey, Direction.Up, frame.devAddrLe, fCnt, frame.micInput).equals(frame.mic);
}

export interface DataDownlinkInput {
  devAddrLe: Buffer;
  nwkSKey: CmacKey;
  appSKey: AesKey;
  fCnt: number;
  confirmed: boolean;
  ack: boolean;
  fPending: boolean;
  /** FCtrl.ADR: the network controls the device's data rate (ADR on for it). */
  adr?: boolean;
  /** Clear-text MAC commands, at most 15 bytes. */
  fOpts?: Buffer;
  /** With `payload`: 1..223 (application, AppSKey) or 0 (MAC commands, NwkSKey). */
  fPort?: number;
  payload?: Buffer;
}

/** MHDR | FHDR | FPort | encrypted FRMPayload | MIC, Dir = down. */
export function buildDataDownlink(input: DataDownlinkInput): Buffer {
  const fOpts = input.fOpts ?? Buffer.alloc(0);
  if (fOpts.length > 15) throw new RangeError('FOpts longer than 15 bytes');
  const hasPort = input.fPort !== undefined;
  const plain = input.payload ?? Buffer.alloc(0);
  const header = Buffer.alloc(8);
  header[0] = (input.confirmed ? MType.ConfirmedDataDown : MType.UnconfirmedDataDown) << 5;
  input.devAddrLe.copy(header, 1);
  header[5] = (input.adr ? 0x80 : 0) | (input.ack ? 0x20 : 0) | (input.fPending ? 0x10 : 0) | fOpts.length;
  header.writeUInt16LE(input.fCnt & 0xffff, 6);
  const parts = [header, fOpts];
  if (hasPort) {
    const key = input.fPort === 0 ? input.nwkSKey.key : input.appSKey;
    parts.push(Buffer.from([input.fPort!]), cryptFrmPayload(key, Direction.Down, input.devAddrLe, input.fCnt, plain));
  }
  const msg = Buffer.concat(parts);
  return Buffer.concat([msg, dataMic(input.nwkSKey, Direction.Down, input.devAddrLe, input.fCnt, msg)]);
}

export interface JoinAcceptInput {
  appKey: AesKey;
  appNonceLe: Buffer;
  netIdLe: Buffer;
  devAddrLe: Buffer;
  dlSettings: number;
  rxDelay: number;
  cfList?: Buffer;
}

/** 0x20 | AES-decrypt(AppKey, fields | MIC): the device recovers it with AES-encrypt only. */
export function buildJoinAccept(input: JoinAcceptInput): Buffer {
  const fields = Buffer.concat([
    Buffer.from([0x20]),
    input.appNonceLe,
    input.netIdLe,
    input.devAddrLe,
    Buffer.from([input.dlSettings, input.rxDelay]),
    input.cfList ?? Buffer.alloc(0),
  ]);
  const mic = aesCmac(input.appKey, fields).subarray(0, 4);
  const body = Buffer.concat([fields.subarray(1), mic]);
  return Buffer.concat([Buffer.from([0x20]), aesDecryptBlocks(input.appKey, body)]);
}
