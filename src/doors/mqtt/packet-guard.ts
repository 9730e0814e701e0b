import type { Duplex } from 'node:stream';

/** Packet size limits of one connection, in bytes of "remaining length" (what follows the fixed header). */
export interface PacketLimits {
  /** The first packet, which must be CONNECT: a client id, a token, a password and perhaps a will. */
  connect: number;
  /** Every later packet: a PUBLISH is a topic (at most 65 535 bytes), a packet id and the payload. */
  packet: number;
}

/** Room for a PUBLISH's topic (2-byte length + up to 65 535 bytes) and packet id (2 bytes). */
export const PUBLISH_HEADER_ROOM = 2 + 65_535 + 2;

export interface PacketViolation {
  /** MQTT control packet type (1 CONNECT, 3 PUBLISH, 8 SUBSCRIBE, …) of the refused packet. */
  type: number;
  /** Its announced remaining length, or -1 for a malformed length. */
  length: number;
  limit: number;
}

const HEADER = 0;
const LENGTH = 1;
const BODY = 2;

/**
 * Follows the MQTT framing of a byte stream (fixed header, variable-length "remaining length", body)
 * without keeping any of it: it only needs the few bytes of each packet's header to know how long
 * the packet says it is. The parser behind it (mqtt-packet, in aedes) waits for a whole packet before
 * looking at it, buffering whatever length the header announces (up to 256 MiB); this refuses such a
 * packet as soon as its length is known, even when the header arrives one byte at a time.
 */
export class PacketFraming {
  readonly #limits: PacketLimits;
  #state = HEADER;
  #type = 0;
  #length = 0;
  #multiplier = 1;
  #lengthBytes = 0;
  #bodyLeft = 0;
  #packets = 0;

  constructor(limits: PacketLimits) {
    this.#limits = limits;
  }

  /** Takes the next bytes of the stream; returns the first packet over its limit, if any. */
  scan(chunk: Uint8Array): PacketViolation | undefined {
    let i = 0;
    const n = chunk.length;
    while (i < n) {
      if (this.#state === BODY) {
        const take = Math.min(this.#bodyLeft, n - i);
        i += take;
        this.#bodyLeft -= take;
        if (this.#bodyLeft === 0) this.#state = HEADER;
      } else if (this.#state === HEADER) {
        this.#type = chunk[i++]! >> 4;
        this.#state = LENGTH;
        this.#length = 0;
        this.#multiplier = 1;
        this.#lengthBytes = 0;
      } else {
        const byte = chunk[i++]!;
        this.#length += (byte & 0x7f) * this.#multiplier;
        this.#multiplier *= 128;
        this.#lengthBytes++;
        const limit = this.#packets === 0 ? this.#limits.connect : this.#limits.packet;
        if (byte & 0x80) {
          // At most 4 length bytes (MQTT 3.1.1 §2.2.3); mqtt-packet refuses a fifth as well.
          if (this.#lengthBytes === 4) return { type: this.#type, length: -1, limit };
          continue;
        }
        if (this.#length > limit) return { type: this.#type, length: this.#length, limit };
        this.#packets++;
        this.#bodyLeft = this.#length;
        this.#state = this.#length > 0 ? BODY : HEADER;
      }
    }
    return undefined;
  }
}

/**
 * Puts a PacketFraming in front of a connection's reader. aedes reads a connection with
 * `conn.read()` on 'readable' and hands each chunk to its parser; every chunk is scanned first, and a
 * connection that announces a packet over its limit is destroyed before its parser sees the chunk, so
 * nothing of the announced packet is ever buffered.
 */
export function guardPacketSizes(conn: Duplex, limits: PacketLimits, onViolation: (violation: PacketViolation) => void): void {
  const framing = new PacketFraming(limits);
  const read = conn.read;
  let refused = false;
  conn.read = function guardedRead(this: Duplex, size?: number) {
    const chunk: unknown = read.call(this, size);
    if (chunk == null || refused) return refused ? null : chunk;
    const violation = framing.scan(chunk as Uint8Array);
    if (!violation) return chunk;
    refused = true;
    onViolation(violation);
    this.destroy();
    return null;
  };
}
