/**
 * Splits a modem's byte stream into lines. Each line carries the monotonic time its first byte
 * arrived: a Class A downlink is timed from the start of the uplink's event line, and a long line
 * takes tens of milliseconds to cross a 57 600 baud link (docs/lpwan.md, "Serial modems").
 */
export interface ModemLine {
  text: string;
  /** `performance.now()` milliseconds when the chunk holding the line's first byte arrived. */
  firstByteAt: number;
  /** Wall-clock milliseconds at the same moment (the frame's `receivedAt`). */
  firstByteWallAt: number;
}

/** Longer than any line a supported modem prints (a 255-byte frame as hex is 510 characters plus its prefix). */
export const MAX_LINE_CHARS = 1024;

export class LineReader {
  #partial = '';
  #partialAt = 0;
  #partialWallAt = 0;
  #discarding = false;
  /** Lines dropped because they grew past MAX_LINE_CHARS without an end (noise on the wire). */
  overlongLines = 0;

  constructor(readonly onLine: (line: ModemLine) => void) {}

  /** Feeds one chunk as the port delivered it; calls `onLine` for every complete, non-empty line. */
  push(chunk: Buffer | string, now: number, wallNow: number): void {
    // latin1 maps every byte to one character: noise never throws and never merges bytes.
    const text = typeof chunk === 'string' ? chunk : chunk.toString('latin1');
    let start = 0;
    while (start < text.length) {
      const nl = text.indexOf('\n', start);
      const piece = nl < 0 ? text.slice(start) : text.slice(start, nl);
      if (this.#partial.length === 0 && !this.#discarding && piece.length > 0) {
        this.#partialAt = now;
        this.#partialWallAt = wallNow;
      }
      if (!this.#discarding) {
        this.#partial += piece;
        if (this.#partial.length > MAX_LINE_CHARS) {
          this.#partial = '';
          this.#discarding = true;
          this.overlongLines++;
        }
      }
      if (nl < 0) break;
      start = nl + 1;
      if (this.#discarding) {
        this.#discarding = false;
        continue;
      }
      const line = this.#partial.replace(/\r/g, '').trim();
      const firstByteAt = this.#partialAt;
      const firstByteWallAt = this.#partialWallAt;
      this.#partial = '';
      if (line.length > 0) this.onLine({ text: line, firstByteAt, firstByteWallAt });
    }
  }

  /** Forgets a half line (the port was closed: what follows on a new port is not its continuation). */
  reset(): void {
    this.#partial = '';
    this.#discarding = false;
  }
}
