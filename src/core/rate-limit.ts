/**
 * Token buckets per key (a token id): `rate` messages/s sustained, `burst` at once.
 * Shared by HTTP and MQTT so a token cannot double its budget by using both doors.
 */
export class RateLimiter {
  readonly #buckets = new Map<string, { level: number; updated: number }>();
  #rate: number;
  #burst: number;

  constructor(rate: number, burst: number) {
    this.#rate = rate;
    this.#burst = Math.max(burst, 1);
  }

  /** New limits from a config reload; buckets keep their level (capped at the new burst). */
  reconfigure(rate: number, burst: number): void {
    this.#rate = rate;
    this.#burst = Math.max(burst, 1);
    for (const bucket of this.#buckets.values()) bucket.level = Math.min(bucket.level, this.#burst);
  }

  get enabled(): boolean {
    return this.#rate > 0;
  }

  /** Takes one message; returns 0 when allowed, else the seconds to wait (for Retry-After). */
  take(key: string, now: number): number {
    if (this.#rate <= 0) return 0;
    let bucket = this.#buckets.get(key);
    if (!bucket) {
      bucket = { level: this.#burst, updated: now };
      this.#buckets.set(key, bucket);
    }
    bucket.level = Math.min(this.#burst, bucket.level + ((now - bucket.updated) / 1000) * this.#rate);
    bucket.updated = now;
    if (bucket.level >= 1) {
      bucket.level -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.level) / this.#rate));
  }

  /** Forgets buckets that have refilled: they behave exactly like new ones, so memory stays bounded. */
  sweep(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (bucket.level + ((now - bucket.updated) / 1000) * this.#rate >= this.#burst) this.#buckets.delete(key);
    }
  }
}
