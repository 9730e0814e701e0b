import type { Clock } from '../../core/time.js';
import type { Counter } from '../../ops/metrics.js';
import { TransmitFailed, type RadioSource, type TransmitWindow } from '../radio.js';
import { dataRateName, timeOnAirMs, type Region } from '../lorawan/regions.js';
import { DutyCycleTracker } from '../lorawan/duty-cycle.js';
import type { PlannedWindow } from './windows.js';

export interface SendOutcome {
  window?: PlannedWindow;
  problems: string[];
}

/**
 * Puts downlinks on the air: drops the windows the duty cycle of the receiver does not allow (ETSI
 * sub-bands, one tracker per gateway or modem), hands the rest to the source as one transmission,
 * and records the airtime of the window that went out.
 */
export class Transmitter {
  readonly #region: Region;
  readonly #dutyCycle: boolean;
  readonly #clock: Clock;
  readonly #counter: Counter;
  readonly trackers = new Map<string, DutyCycleTracker>();

  constructor(region: Region, dutyCycle: boolean, clock: Clock, counter: Counter) {
    this.#region = region;
    this.#dutyCycle = dutyCycle;
    this.#clock = clock;
    this.#counter = counter;
  }

  #tracker(receiver: string): DutyCycleTracker {
    let tracker = this.trackers.get(receiver);
    if (!tracker) {
      tracker = new DutyCycleTracker();
      this.trackers.set(receiver, tracker);
    }
    return tracker;
  }

  /**
   * Sends `payload` in the first of `windows` that the duty cycle allows and the source manages.
   * `receiver` names the gateway or modem (its duty cycle), `receivedAt` the uplink being answered,
   * `devEui` the device when it has one (an ABP device may not).
   */
  async send(source: RadioSource, receiver: string, replyTo: unknown, receivedAt: number, windows: PlannedWindow[], payload: Buffer, devEui?: string | null): Promise<SendOutcome> {
    const problems: string[] = [];
    const tracker = this.#tracker(receiver);
    const allowed: Array<{ planned: PlannedWindow; airtime: number; startAt: number; window: TransmitWindow }> = [];
    for (const w of windows) {
      const modulation = this.#region.dataRates[w.dataRate];
      if (!modulation) {
        problems.push(`${w.name}: DR${w.dataRate} is not a LoRa data rate of ${this.#region.name}`);
        continue;
      }
      const airtime = timeOnAirMs(payload.length, modulation, { crc: false });
      const startAt = w.delayMs === undefined ? this.#clock.now() : receivedAt + w.delayMs;
      if (this.#dutyCycle) {
        const verdict = tracker.check(w.frequency, airtime, startAt);
        if (!verdict.ok) {
          problems.push(`${w.name}: ${verdict.reason}`);
          this.#counter.inc({ window: w.name, result: 'duty-cycle' });
          continue;
        }
      }
      allowed.push({
        planned: w,
        airtime,
        startAt,
        window: { name: w.name, payload, frequency: w.frequency, dataRate: dataRateName(modulation), power: this.#region.downlinkPower(w.frequency), delayMs: w.delayMs },
      });
    }
    if (allowed.length === 0) return { problems };
    try {
      const result = await source.transmit({ windows: allowed.map((a) => a.window), invertIq: true, replyTo, ...(devEui ? { devEui } : {}) });
      const used = allowed[result.window]!;
      for (const p of result.problems) problems.push(p);
      for (const skipped of allowed.slice(0, result.window)) this.#counter.inc({ window: skipped.planned.name, result: 'tx-error' });
      if (this.#dutyCycle) tracker.record(used.planned.frequency, used.airtime, used.startAt);
      this.#counter.inc({ window: used.planned.name, result: 'sent' });
      return { window: used.planned, problems };
    } catch (err) {
      if (err instanceof TransmitFailed) problems.push(...err.problems);
      else problems.push((err as Error).message);
      for (const a of allowed) this.#counter.inc({ window: a.planned.name, result: 'tx-error' });
      return { problems };
    }
  }
}
