import { createCipheriv, createDecipheriv, type Cipher } from 'node:crypto';

/**
 * The LoRaWAN 1.0.x primitives (docs/lpwan.md, "How the network server checks a frame"): AES-128 on
 * single blocks, AES-CMAC (RFC 4493) for every MIC, and the counter-mode keystream that encrypts
 * FRMPayloads. Node has AES but no CMAC; CMAC is CBC-MAC with a tweaked last block.
 */

const ZERO_BLOCK = Buffer.alloc(16);

export type AesKey = Buffer;

/**
 * ECB ciphers of the keys used lately, by key buffer. Making a cipher (the key schedule) costs
 * several times what encrypting a frame's few blocks does, and every uplink needs two (its session's
 * NwkSKey and AppSKey); ECB over whole blocks without padding keeps no state between `update`
 * calls, so one cipher serves every frame of a key. Bounded, oldest out first (about 1 KB each, so
 * 2 MB at most): with more devices than fit, a key is only scheduled again, as it was before. Keys
 * are never changed in place (a new session gets new buffers), so the buffer identifies its key.
 */
const CIPHER_CACHE_SIZE = 2048;
const ecbCiphers = new Map<AesKey, Cipher>();

/** The cached value of `key`, made and kept (the oldest dropped past CIPHER_CACHE_SIZE) on first use. */
function cachedFor<V>(cache: Map<AesKey, V>, key: AesKey, make: (key: AesKey) => V): V {
  let value = cache.get(key);
  if (value) return value;
  value = make(key);
  if (cache.size >= CIPHER_CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(key, value);
  return value;
}

// Module-level makers: the hot path allocates no closure for a cache hit.
const newEcbCipher = (key: AesKey): Cipher => createCipheriv('aes-128-ecb', key, null).setAutoPadding(false);

function ecbCipher(key: AesKey): Cipher {
  return cachedFor(ecbCiphers, key, newEcbCipher);
}

/**
 * CBC ciphers of the keys used lately, each with the chaining value it now holds (its last output
 * block; zero when new), for CMAC: one `update` call computes a whole CBC-MAC instead of one call per
 * block. A CBC cipher chains from call to call, but XORing the held value into the first block of
 * the next message cancels it (E(P1 ⊕ C ⊕ C) = E(P1)): each MAC then starts from a zero IV, as CMAC
 * wants. Bounded like the ECB ciphers (another ~2 MB at most).
 */
interface CbcChain {
  cipher: Cipher;
  last: Buffer;
}
const cbcChains = new Map<AesKey, CbcChain>();

const newCbcChain = (key: AesKey): CbcChain => ({ cipher: createCipheriv('aes-128-cbc', key, ZERO_BLOCK).setAutoPadding(false), last: Buffer.alloc(16) });

function cbcChain(key: AesKey): CbcChain {
  return cachedFor(cbcChains, key, newCbcChain);
}

/** AES-128-ECB of whole 16-byte blocks, no padding. */
export function aesEncryptBlocks(key: AesKey, blocks: Buffer): Buffer {
  if (blocks.length % 16 !== 0) throw new RangeError(`AES blocks: ${blocks.length} bytes is not a whole number of blocks`);
  return ecbCipher(key).update(blocks);
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
  // CBC-MAC with a zero IV over the key's reused CBC cipher (see cbcChain).
  const chain = cbcChain(k.key);
  for (let i = 0; i < 16; i++) padded[i]! ^= chain.last[i]!;
  let out: Buffer;
  try {
    out = chain.cipher.update(padded);
  } catch (err) {
    cbcChains.delete(k.key); // its chaining value is unknown now
    throw err;
  }
  // Kept in a buffer of the chain's own: what the caller does with the MAC cannot change it.
  out.copy(chain.last, 0, out.length - 16);
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
