import type { RadioFrame, RadioReception, RadioSource } from '../radio.js';

/** A copy of a frame and the source that delivered it (the answer goes back through it). */
export interface HeardCopy {
  frame: RadioFrame;
  source: RadioSource;
}

/** A merged uplink: the best copy (its metadata and source), and the copy to answer through. */
export interface MergedUplink extends HeardCopy {
  /** The best copy whose source can transmit (a receive-only modem never answers), else the best copy. */
  answer: HeardCopy;
}

interface Collecting {
  copies: HeardCopy[];
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
 * One uplink is often heard by several receivers, through several sources (packet forwarders,
 * Basics Stations, serial modems). Copies (same PHYPayload bytes) are collected for `windowMs` and
 * handed on once, with the best-heard copy's metadata and source and every receiver in `heardBy`
 * (docs/lpwan.md, "Several gateways"). The window closes early once as many copies arrived as there
 * are receivers, so with one gateway nothing waits. A second copy from the same receiver is a
 * repeated datagram, not another gateway: it is dropped.
 */
export class UplinkDeduplicator {
  readonly #collecting = new Map<string, Collecting>();
  /**
   * Keys of frames already handed on, with when they are forgotten (performance.now()): a late copy
   * within one window is still recognised as one. Kept in two generations swapped every window, so
   * one timer serves them all instead of one per uplink (with a single gateway every uplink is
   * handed on at once and only remembered).
   */
  #handedOn = new Map<string, number>();
  #handedOnBefore = new Map<string, number>();
  #generationTimer: NodeJS.Timeout | undefined;
  readonly #windowMs: number;
  readonly #expectedCopies: () => number;
  readonly #emit: (merged: MergedUplink) => void;

  constructor(options: { windowMs: number; expectedCopies: () => number; emit: (merged: MergedUplink) => void }) {
    this.#windowMs = options.windowMs;
    this.#expectedCopies = options.expectedCopies;
    this.#emit = options.emit;
  }

  /** False when the frame is a copy from a receiver that already delivered it (a repeated datagram) or a straggler. */
  offer(frame: RadioFrame, source: RadioSource): boolean {
    // latin1: one character per byte, the cheapest string a Buffer becomes.
    const key = frame.payload.toString('latin1');
    const entry = this.#collecting.get(key);
    if (!entry) {
      if (this.#recentlyHandedOn(key)) return false;
      if (this.#windowMs === 0 || this.#expectedCopies() <= 1) {
        this.#finish([{ frame, source }]);
        if (this.#windowMs > 0) this.#remember(key);
        return true;
      }
      const timer = setTimeout(() => this.#close(key), this.#windowMs);
      timer.unref();
      this.#collecting.set(key, { copies: [{ frame, source }], timer });
      return true;
    }
    // A second copy from the same receiver is a repeated datagram.
    if (entry.copies.some((c) => c.frame.source === frame.source)) return false;
    entry.copies.push({ frame, source });
    if (entry.copies.length >= this.#expectedCopies()) {
      clearTimeout(entry.timer);
      const copies = entry.copies;
      this.#collecting.delete(key);
      this.#remember(key);
      this.#finish(copies);
    }
    return true;
  }

  #recentlyHandedOn(key: string): boolean {
    const until = this.#handedOn.get(key) ?? this.#handedOnBefore.get(key);
    return until !== undefined && performance.now() < until;
  }

  /** Keeps the key of a frame handed on for one window so a late copy is still recognised as one. */
  #remember(key: string): void {
    this.#handedOn.set(key, performance.now() + this.#windowMs);
    if (this.#generationTimer) return;
    this.#generationTimer = setInterval(() => {
      if (this.#handedOn.size === 0 && this.#handedOnBefore.size === 0) {
        // Nothing to forget: no timer while the radio is quiet.
        clearInterval(this.#generationTimer);
        this.#generationTimer = undefined;
        return;
      }
      this.#handedOnBefore = this.#handedOn;
      this.#handedOn = new Map();
    }, this.#windowMs);
    this.#generationTimer.unref();
  }

  #close(key: string): void {
    const entry = this.#collecting.get(key);
    this.#collecting.delete(key);
    if (entry && entry.copies.length > 0) this.#finish(entry.copies);
  }

  #finish(copies: HeardCopy[]): void {
    let best = copies[0]!;
    let answer: HeardCopy | undefined;
    for (const c of copies) {
      if (better(c.frame, best.frame)) best = c;
      if (c.source.capabilities.transmit && (!answer || better(c.frame, answer.frame))) answer = c;
    }
    const heardBy: RadioReception[] = copies.map(({ frame: c }) => {
      const r: RadioReception = { source: c.source };
      if (c.rssi !== undefined) r.rssi = c.rssi;
      if (c.snr !== undefined) r.snr = c.snr;
      if (c.gatewayTime !== undefined) r.gatewayTime = c.gatewayTime;
      return r;
    });
    let receivedAt = best.frame.receivedAt;
    for (const c of copies) if (c.frame.receivedAt < receivedAt) receivedAt = c.frame.receivedAt;
    // One literal with every field, not `{ ...best.frame, … }`: a spread copy got a hidden class of
    // its own, and every later read of the frame's fields missed V8's inline caches.
    const f = best.frame;
    const frame: RadioFrame = {
      payload: f.payload,
      receivedAt,
      source: f.source,
      frequency: f.frequency,
      dataRate: f.dataRate,
      rssi: f.rssi,
      snr: f.snr,
      gatewayTime: f.gatewayTime,
      heardBy,
      replyTo: f.replyTo,
    };
    this.#emit({ frame, source: best.source, answer: !answer || answer === best ? { frame, source: best.source } : answer });
  }

  /** Hands on everything still collecting (shutdown). */
  flushAll(): void {
    for (const [key, entry] of [...this.#collecting]) {
      clearTimeout(entry.timer);
      this.#close(key);
    }
    clearInterval(this.#generationTimer);
    this.#generationTimer = undefined;
  }
}
