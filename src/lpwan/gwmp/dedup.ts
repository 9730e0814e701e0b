import type { RadioFrame, RadioReception } from '../radio.js';

interface Collecting {
  copies: RadioFrame[];
  timer: NodeJS.Timeout;
}

/** Better signal first: SNR decides (it is what limits demodulation), then RSSI. */
function better(a: RadioFrame, b: RadioFrame): boolean {
  const sa = a.snr ?? -Infinity;
  const sb = b.snr ?? -Infinity;
  if (sa !== sb) return sa > sb;
  return (a.rssi ?? -Infinity) > (b.rssi ?? -Infinity);
}

/**
 * Several gateways often hear the same uplink. Copies (same PHYPayload bytes) are collected for a
 * short window and handed on once, with the best-heard copy's metadata and every gateway in
 * `heardBy`. The window closes early once as many copies arrived as there are gateways online, so
 * with one gateway nothing waits.
 */
export class UplinkDeduplicator {
  readonly #collecting = new Map<string, Collecting>();
  readonly #windowMs: number;
  readonly #expectedCopies: () => number;
  readonly #emit: (frame: RadioFrame) => void;

  constructor(options: { windowMs: number; expectedCopies: () => number; emit: (frame: RadioFrame) => void }) {
    this.#windowMs = options.windowMs;
    this.#expectedCopies = options.expectedCopies;
    this.#emit = options.emit;
  }

  /** False when the frame is a copy from a gateway that already delivered it (a repeated datagram). */
  offer(frame: RadioFrame): boolean {
    const key = frame.payload.toString('base64');
    const entry = this.#collecting.get(key);
    if (!entry) {
      if (this.#expectedCopies() <= 1) {
        this.#finish(key, [frame]);
        // Keep the key briefly so a second copy within the window is still recognised as one.
        const timer = setTimeout(() => this.#collecting.delete(key), this.#windowMs);
        timer.unref();
        this.#collecting.set(key, { copies: [], timer });
        return true;
      }
      const timer = setTimeout(() => this.#close(key), this.#windowMs);
      timer.unref();
      this.#collecting.set(key, { copies: [frame], timer });
      return true;
    }
    if (entry.copies.length === 0 || entry.copies.some((c) => c.source === frame.source)) return false;
    entry.copies.push(frame);
    if (entry.copies.length >= this.#expectedCopies()) {
      clearTimeout(entry.timer);
      const copies = entry.copies;
      // Emitted: later stragglers within the window are duplicates.
      entry.copies = [];
      entry.timer = setTimeout(() => this.#collecting.delete(key), this.#windowMs);
      entry.timer.unref();
      this.#finish(key, copies);
    }
    return true;
  }

  #close(key: string): void {
    const entry = this.#collecting.get(key);
    this.#collecting.delete(key);
    if (entry && entry.copies.length > 0) this.#finish(key, entry.copies);
  }

  #finish(_key: string, copies: RadioFrame[]): void {
    let best = copies[0]!;
    for (const c of copies) if (better(c, best)) best = c;
    const heardBy: RadioReception[] = copies.map((c) => {
      const r: RadioReception = { source: c.source };
      if (c.rssi !== undefined) r.rssi = c.rssi;
      if (c.snr !== undefined) r.snr = c.snr;
      if (c.gatewayTime !== undefined) r.gatewayTime = c.gatewayTime;
      return r;
    });
    this.#emit({ ...best, receivedAt: Math.min(...copies.map((c) => c.receivedAt)), heardBy });
  }

  /** Hands on everything still collecting (shutdown). */
  flushAll(): void {
    for (const [key, entry] of [...this.#collecting]) {
      clearTimeout(entry.timer);
      this.#close(key);
    }
  }
}
