import { createCipheriv, createDecipheriv } from 'node:crypto';

/**
 * The LoRaWAN 1.0.x primitives (docs/lpwan.md, "How the network server checks a frame"): AES-128 on
 * single blocks, AES-CMAC (RFC 4493) for every MIC, and the counter-mode keystream that encrypts
 * FRMPayloads. Node has AES but no CMAC; CMAC is CBC-MAC with a tweaked last block, so one CBC
 * cipher call does the whole message instead of one ECB call per block.
 */

const ZERO_BLOCK = Buffer.alloc(16);

export type AesKey = Buffer;

/** AES-128-ECB of whole 16-byte blocks, no padding. */
export function aesEncryptBlocks(key: AesKey, blocks: Buffer): Buffer {
  const cipher = createCipheriv('aes-128-ecb', key, null);
  cipher.setAutoPadding(false);
  return cipher.update(blocks);
}

/** AES-128-ECB decryption of whole blocks: only used to build a join accept (the device encrypts to read it). */
export function aesDecryptBlocks(key: AesKey, blocks: Buffer): Buffer {
  const decipher = createDecipheriv('aes-128-ecb', key, null);
  decipher.setAutoPadding(false);
  return decipher.update(blocks);
}

function doubleBlock(block: Buffer): Buffer {
  const out = Buffer.alloc(16);
  let carry = 0;
  for (let i = 15; i >= 0; i--) {
    const b = block[i]!;
    out[i] = ((b << 1) | carry) & 0xff;
    carry = b >> 7;
  }
  if (block[0]! & 0x80) out[15]! ^= 0x87;
  return out;
}

/** The two CMAC subkeys of a key; computed once per session key and kept with it. */
export interface CmacKey {
  key: AesKey;
  k1: Buffer;
  k2: Buffer;
}

export function cmacKey(key: AesKey): CmacKey {
  const l = aesEncryptBlocks(key, ZERO_BLOCK);
  const k1 = doubleBlock(l);
  return { key, k1, k2: doubleBlock(k1) };
}

/** AES-CMAC (RFC 4493) of `message`; accepts a key or precomputed subkeys. */
export function aesCmac(key: AesKey | CmacKey, message: Buffer): Buffer {
  const k = Buffer.isBuffer(key) ? cmacKey(key) : key;
  const blocks = Math.max(1, Math.ceil(message.length / 16));
  const complete = message.length > 0 && message.length % 16 === 0;
  const padded = Buffer.alloc(blocks * 16);
  message.copy(padded);
  if (!complete) padded[message.length] = 0x80;
  const sub = complete ? k.k1 : k.k2;
  const last = (blocks - 1) * 16;
  for (let i = 0; i < 16; i++) padded[last + i]! ^= sub[i]!;
  const cipher = createCipheriv('aes-128-cbc', k.key, ZERO_BLOCK);
  cipher.setAutoPadding(false);
  const out = cipher.update(padded);
  return out.subarray(out.length - 16);
}

export const enum Direction {
  Up = 0,
  Down = 1,
}

/** B0 | msg, the input of a data frame's MIC (Dir, DevAddr as on air, full 32-bit counter). */
export function dataMic(nwkSKey: CmacKey, dir: Direction, devAddrLe: Buffer, fCnt: number, msg: Buffer): Buffer {
  const input = Buffer.alloc(16 + msg.length);
  input[0] = 0x49;
  input[5] = dir;
  devAddrLe.copy(input, 6);
  input.writeUInt32LE(fCnt >>> 0, 10);
  input[15] = msg.length & 0xff;
  msg.copy(input, 16);
  return aesCmac(nwkSKey, input).subarray(0, 4);
}

/**
 * Encrypts or decrypts an FRMPayload (the same XOR keystream both ways). The counter in the A_i
 * blocks is the full 32-bit one, never the 16 bits on air.
 */
export function cryptFrmPayload(key: AesKey, dir: Direction, devAddrLe: Buffer, fCnt: number, payload: Buffer): Buffer {
  if (payload.length === 0) return Buffer.alloc(0);
  const k = Math.ceil(payload.length / 16);
  const blocks = Buffer.alloc(k * 16);
  for (let i = 0; i < k; i++) {
    const o = i * 16;
    blocks[o] = 0x01;
    blocks[o + 5] = dir;
    devAddrLe.copy(blocks, o + 6);
    blocks.writeUInt32LE(fCnt >>> 0, o + 10);
    blocks[o + 15] = i + 1;
  }
  const stream = aesEncryptBlocks(key, blocks);
  const out = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i++) out[i] = payload[i]! ^ stream[i]!;
  return out;
}

export interface SessionKeys {
  nwkSKey: Buffer;
  appSKey: Buffer;
}

/** OTAA key derivation: every field in its on-air (little-endian) byte order. */
export function deriveSessionKeys(appKey: AesKey, appNonceLe: Buffer, netIdLe: Buffer, devNonceLe: Buffer): SessionKeys {
  const input = Buffer.alloc(32);
  for (const [offset, prefix] of [[0, 0x01], [16, 0x02]] as const) {
    input[offset] = prefix;
    appNonceLe.copy(input, offset + 1);
    netIdLe.copy(input, offset + 4);
    devNonceLe.copy(input, offset + 7);
  }
  const out = aesEncryptBlocks(appKey, input);
  return { nwkSKey: Buffer.from(out.subarray(0, 16)), appSKey: Buffer.from(out.subarray(16, 32)) };
}
