/**
 * ETSI EN 300 220 sub-band duty cycles for what a gateway transmits (docs/lpwan.md, "Duty cycle"):
 * a sliding one-hour window per sub-band; a transmission is allowed only if the airtime already used
 * in the window plus its own stays within the band's budget. Frequencies outside every band are refused.
 */
export interface SubBand {
  name: string;
  minHz: number;
  maxHz: number;
  /** Fraction of time, e.g. 0.01 for 1 %. */
  dutyCycle: number;
}

export const ETSI_SUB_BANDS: readonly SubBand[] = [
  { name: 'K', minHz: 863_000_000, maxHz: 865_000_000, dutyCycle: 0.001 },
  { name: 'L', minHz: 865_000_000, maxHz: 868_000_000, dutyCycle: 0.01 },
  { name: 'M', minHz: 868_000_000, maxHz: 868_600_000, dutyCycle: 0.01 },
  { name: 'N', minHz: 868_700_000, maxHz: 869_200_000, dutyCycle: 0.001 },
  { name: 'P', minHz: 869_400_000, maxHz: 869_650_000, dutyCycle: 0.1 },
  { name: 'Q', minHz: 869_700_000, maxHz: 870_000_000, dutyCycle: 0.01 },
];

const WINDOW_MS = 3_600_000;

export function subBandOf(frequency: number): SubBand | undefined {
  return ETSI_SUB_BANDS.find((b) => frequency >= b.minHz && frequency < b.maxHz);
}

export type DutyCycleVerdict = { ok: true; band: string } | { ok: false; reason: string };

/** One tracker per transmitter (gateway or modem): each has its own duty cycle. */
export class DutyCycleTracker {
  /** Per band: [start ms, airtime ms] of transmissions in the last hour, oldest first. */
  readonly #used = new Map<string, Array<[number, number]>>();

  #prune(band: string, now: number): Array<[number, number]> {
    let list = this.#used.get(band);
    if (!list) {
      list = [];
      this.#used.set(band, list);
    }
    while (list.length > 0 && list[0]![0] + list[0]![1] < now - WINDOW_MS) list.shift();
    return list;
  }

  usedMs(band: string, now: number): number {
    return this.#prune(band, now).reduce((sum, [, t]) => sum + t, 0);
  }

  /** Whether `airtimeMs` may start at `at` on `frequency`; does not record it. */
  check(frequency: number, airtimeMs: number, at: number): DutyCycleVerdict {
    const band = subBandOf(frequency);
    if (!band) return { ok: false, reason: `${(frequency / 1e6).toFixed(3)} MHz lies in no ETSI sub-band` };
    const budget = band.dutyCycle * WINDOW_MS;
    const used = this.usedMs(band.name, at + airtimeMs);
    if (used + airtimeMs > budget) {
      return { ok: false, reason: `duty cycle of sub-band ${band.name} (${band.dutyCycle * 100} %) used up: ${Math.round(used)} of ${budget} ms in the last hour` };
    }
    return { ok: true, band: band.name };
  }

  record(frequency: number, airtimeMs: number, at: number): void {
    const band = subBandOf(frequency);
    if (band) this.#prune(band.name, at).push([at, airtimeMs]);
  }

  /** Airtime used in the last hour per band, for metrics. */
  usage(now: number): Array<[string, number]> {
    return ETSI_SUB_BANDS.map((b) => [b.name, this.usedMs(b.name, now)]);
  }
}
