import { randomBytes } from 'node:crypto';
import type { Counter, MetricsRegistry } from '../ops/metrics.js';
import type { RadioFrame, RadioSource } from './radio.js';
import { parseUplink } from './lorawan/phy.js';
import type { LastHeard, ServerFoundation, ServerParts } from './server-parts.js';
import { Transmitter } from './downlink/transmitter.js';
import { ClassCScheduler } from './downlink/class-c.js';
import { UplinkDeduplicator, type HeardCopy } from './uplink/dedup.js';
import { runSteps } from './uplink/steps.js';
import { DATA_UPLINK_STEPS, type DataUplinkContext } from './uplink/data.js';
import { JOIN_STEPS, type JoinContext } from './uplink/join.js';

/**
 * What happens to a frame that is not LoRaWAN for a known device (a raw point-to-point payload heard
 * by a serial modem, another network's device, noise). A source-specific handler (the serial modems'
 * raw codec) may claim it; otherwise it is counted by `reason` and dropped.
 */
export type UnclaimedFrameHandler = (frame: RadioFrame, source: RadioSource, reason: string) => boolean;

export interface NetworkServerDeps extends ServerFoundation {
  metrics: MetricsRegistry;
  /** Copies of one frame from every source are merged for this long (ms; `radio.dedupMs`). */
  dedupMs?: number;
  /** Whether ETSI duty cycles are enforced (EU868 by default). */
  dutyCycle?: boolean;
  /** Random bytes for AppNonces and DevAddrs (injectable so tests can predict them). */
  random?: (size: number) => Buffer;
  /** Whether the device has a codec of its own. */
  hasCodec?: (deviceId: string) => boolean;
}

/**
 * A small LoRaWAN 1.0.x network server for the gateway's own devices (docs/lpwan.md). Frames come
 * from any radio source and are merged across sources first (one deduplication for all); an uplink
 * is then a flat list of named steps (src/lpwan/uplink/data.ts, join.ts) on one context, and every
 * answer leaves through the source (and gateway) that heard the best copy. MAC commands live in
 * src/lpwan/mac/ (one file each), the ADR algorithm in src/lpwan/adr/, downlinks in
 * src/lpwan/downlink/ (Class A windows, Class C, the transmitter with its duty cycles).
 */
export class NetworkServer {
  readonly #parts: ServerParts;
  readonly #dedup: UplinkDeduplicator;
  readonly #classC: ClassCScheduler;
  readonly #sources: RadioSource[] = [];
  readonly #downlinks: Counter;
  /** A handler for frames no LoRaWAN device claims (set by whoever wires raw point-to-point sources). */
  unclaimed: UnclaimedFrameHandler | undefined;
  /** How much asynchronous work is in flight (tests and shutdown wait for it to reach 0). */
  #inFlight = 0;
  /** Who waits for `#inFlight` to reach 0. */
  #settled: Array<() => void> = [];
  /** The tail of each device's downlink work: one downlink at a time per device. */
  readonly #deviceWork = new Map<string, Promise<void>>();

  constructor(deps: NetworkServerDeps) {
    const m = deps.metrics;
    const frames = m.counter('outpost_lpwan_frames_total', 'Radio frames handled by the network server, by result');
    const refused = m.counter('outpost_lpwan_refused_total', 'Radio frames refused or dropped, by reason');
    this.#downlinks = m.counter('outpost_lpwan_downlinks_total', 'Downlink transmissions, by window and result');
    const transmitter = new Transmitter(deps.region, deps.dutyCycle ?? deps.region.dutyCycle, deps.clock, this.#downlinks);
    const lastHeard = new Map<string, LastHeard>();
    this.#classC = new ClassCScheduler(() => this.#parts);
    this.#parts = {
      devices: deps.devices,
      sessions: deps.sessions,
      queue: deps.queue,
      catalog: deps.catalog,
      pipeline: deps.pipeline,
      events: deps.events,
      clock: deps.clock,
      logger: deps.logger,
      region: deps.region,
      settings: deps.settings,
      transmitter,
      random: deps.random ?? randomBytes,
      hasCodec: deps.hasCodec ?? (() => false),
      lastHeard,
      frames,
      refused,
      refuse: (reason) => refused.inc({ reason }),
      offerUnclaimed: (frame, source, reason) => this.#offerUnclaimed(frame, source, reason),
      serialise: (deviceId, work) => this.#serialise(deviceId, work),
      hasDownlinkWork: (deviceId) => this.#deviceWork.has(deviceId),
      track: (work) => this.#track(work),
      wakeClassC: (deviceId, reason) => this.#classC.wake(deviceId, reason),
    };
    this.#dedup = new UplinkDeduplicator({
      windowMs: deps.dedupMs ?? 200,
      // At least the copy in hand: a frame from a gateway the door does not count as online yet is not held back.
      expectedCopies: () => Math.max(1, this.#sources.reduce((n, s) => n + s.receivers(), 0)),
      emit: ({ frame, source, answer }) => this.#handleMerged(frame, source, answer),
    });
    deps.queue.onEnqueued = (deviceId) => this.#classC.wake(deviceId, 'enqueued');
    m.gauge('outpost_lpwan_devices', 'LoRaWAN devices provisioned', () => deps.sessions.size);
    m.gauge('outpost_lpwan_duty_cycle_used_seconds', 'Airtime used in the last hour per transmitter and ETSI sub-band', () => {
      const now = deps.clock.now();
      const out: Array<[Record<string, string>, number]> = [];
      for (const [source, tracker] of transmitter.trackers) for (const [band, ms] of tracker.usage(now)) if (ms > 0) out.push([{ source, band }, ms / 1000]);
      return out;
    });
  }

  attach(source: RadioSource): void {
    this.#sources.push(source);
    source.onFrame((frame) => this.handleFrame(frame, source));
  }

  /** Resolves when every answer started so far has finished. */
  settle(): Promise<void> {
    // Work started while waiting is waited for too: the count reaches 0 only when all of it is done.
    return this.#inFlight === 0 ? Promise.resolve() : new Promise((resolve) => this.#settled.push(resolve));
  }

  /** A deleted device: where it was heard last and its Class C timer go. */
  forget(deviceId: string): void {
    this.#parts.lastHeard.delete(deviceId);
    this.#classC.forget(deviceId);
  }

  /** Hands on frames still being collected, stops Class C timers, and waits for work in flight. */
  async stop(): Promise<void> {
    this.#dedup.flushAll();
    this.#classC.stop();
    await this.settle();
  }

  // A count rather than a set of promises: every uplink is tracked, and each promise more per
  // uplink was measurable on the hot path.
  #track(work: Promise<void>): void {
    this.#inFlight++;
    work.then(this.#workDone, this.#workFailed);
  }

  readonly #workDone = (): void => {
    if (--this.#inFlight > 0) return;
    const waiting = this.#settled;
    this.#settled = [];
    for (const resolve of waiting) resolve();
  };

  readonly #workFailed = (err: unknown): void => {
    this.#parts.logger.error({ err }, 'radio work failed');
    this.#workDone();
  };

  #serialise(deviceId: string, work: () => Promise<void>): void {
    const previous = this.#deviceWork.get(deviceId) ?? Promise.resolve();
    const next = previous.then(work, work);
    const tail = next.catch(() => {});
    this.#deviceWork.set(deviceId, tail);
    void tail.finally(() => {
      if (this.#deviceWork.get(deviceId) === tail) this.#deviceWork.delete(deviceId);
    });
    this.#track(next);
  }

  #offerUnclaimed(frame: RadioFrame, source: RadioSource, reason: string): void {
    if (this.unclaimed?.(frame, source, reason)) {
      this.#parts.frames.inc({ result: 'raw' });
      return;
    }
    this.#parts.refuse(reason);
    this.#parts.logger.debug({ reason, source: frame.source, bytes: frame.payload.length }, 'radio frame not for a known LoRaWAN device');
  }

  /** A frame from a source: merged with its copies from every other source first (`radio.dedupMs`). */
  handleFrame(frame: RadioFrame, source: RadioSource): void {
    if (!this.#dedup.offer(frame, source)) this.#parts.refuse('duplicate');
  }

  #handleMerged(frame: RadioFrame, source: RadioSource, answer: HeardCopy): void {
    try {
      const parsed = parseUplink(frame.payload);
      if (!parsed.ok) return this.#offerUnclaimed(frame, source, parsed.reason);
      const parts = this.#parts;
      if (parsed.frame.kind === 'join-request') {
        runSteps({ parts, frame, source, answer, join: parsed.frame } as JoinContext, JOIN_STEPS);
        return;
      }
      const ctx = { parts, frame, source, answer, up: parsed.frame, switched: false, macAnswers: [], linkAdrDue: false, mustAnswer: false } as unknown as DataUplinkContext;
      runSteps(ctx, DATA_UPLINK_STEPS);
    } catch (err) {
      // A frame must never take the radio side down.
      this.#parts.refuse('internal-error');
      this.#parts.logger.error({ err, source: frame.source }, 'radio frame handling failed');
    }
  }
}
