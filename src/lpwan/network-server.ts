import { randomBytes } from 'node:crypto';
import { isServiceError } from '../core/errors.js';
import type { Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { Counter, MetricsRegistry } from '../ops/metrics.js';
import type { Catalog } from '../store/catalog.js';
import type { LastUplink, LorawanDeviceStore } from '../store/lorawan-devices.js';
import type { DownlinkRecord } from '../store/downlink-queue.js';
import type { StatePipeline } from '../ingest/ingest.js';
import type { DeviceEvents } from '../ingest/device-events.js';
import type { RadioFrame, RadioSource } from './radio.js';
import { cryptFrmPayload, deriveSessionKeys, Direction } from './lorawan/crypto.js';
import { buildDataDownlink, buildJoinAccept, dataMicValid, joinRequestMicValid, onAirBytes, parseUplink, printedHex, type DataUplink, type JoinRequest } from './lorawan/phy.js';
import { MAX_FCNT_GAP, reconstructFCnt, replayedFCnt } from './lorawan/counters.js';
import { linkCheckAnswer, parseUplinkMacCommands, type MacCommand } from './lorawan/mac-commands.js';
import {
  dataRateIndex,
  dataRateName,
  JOIN_ACCEPT_DELAY1_MS,
  JOIN_ACCEPT_DELAY2_MS,
  maxFrmPayload,
  parseDataRateName,
  RECEIVE_DELAY1_MS,
  RECEIVE_DELAY2_MS,
  timeOnAirMs,
  type Region,
} from './lorawan/regions.js';
import { DutyCycleTracker } from './lorawan/duty-cycle.js';
import type { SessionRegistry, LiveDevice, LiveSession } from './session-registry.js';
import type { DownlinkQueue } from './downlink-queue.js';

/**
 * What happens to a frame that is not LoRaWAN for a known device (a raw point-to-point payload heard
 * by a serial modem, another network's device, noise). A source-specific handler (the serial modems'
 * raw codec) may claim it; otherwise it is counted by `reason` and dropped.
 */
export type UnclaimedFrameHandler = (frame: RadioFrame, source: RadioSource, reason: string) => boolean;

export interface NetworkServerDeps {
  devices: LorawanDeviceStore;
  sessions: SessionRegistry;
  queue: DownlinkQueue;
  catalog: Catalog;
  pipeline: StatePipeline;
  events: DeviceEvents;
  clock: Clock;
  logger: Logger;
  metrics: MetricsRegistry;
  region: Region;
  /** NetID as printed (6 hex digits); OTAA DevAddrs get its NwkID as their top 7 bits. */
  netId: string;
  /** Whether ETSI duty cycles are enforced (EU868). */
  dutyCycle?: boolean;
  /** Random bytes for AppNonces and DevAddrs (injectable so tests can predict them). */
  random?: (size: number) => Buffer;
}

interface Window {
  name: 'rx1' | 'rx2';
  frequency: number;
  dataRate: number;
  delayMs: number;
}

/** What an uplink leaves for the downlink step. */
interface AnswerNeeds {
  ackOwed: boolean;
  macAnswers: Buffer;
  mustAnswer: boolean;
}

const RAW_UPLINK_NOTE = 'the payload is kept raw: GET /device/<id>/uplinks';

/**
 * A small LoRaWAN 1.0.x network server for the gateway's own devices (docs/lpwan.md). Frames come
 * from any radio source; an uplink is a flat list of named steps (find session → MIC → counter →
 * decrypt → MAC commands → acknowledgement → decode and store with the counters → answer), and
 * every answer leaves through the source (and gateway) that heard the uplink.
 */
export class NetworkServer {
  readonly #d: NetworkServerDeps;
  readonly #sources: RadioSource[] = [];
  readonly #dutyCycles = new Map<string, DutyCycleTracker>();
  readonly #frames: Counter;
  readonly #refused: Counter;
  readonly #downlinks: Counter;
  readonly #random: (size: number) => Buffer;
  /** A handler for frames no LoRaWAN device claims (set by whoever wires raw point-to-point sources). */
  unclaimed: UnclaimedFrameHandler | undefined;
  /** Confirmed downlinks sent and awaiting the device's ACK, per device. */
  readonly #awaitingAck = new Map<string, string>();
  /** Answers in flight (tests and shutdown wait for them). */
  readonly #inFlight = new Set<Promise<void>>();

  constructor(deps: NetworkServerDeps) {
    this.#d = deps;
    this.#random = deps.random ?? randomBytes;
    const m = deps.metrics;
    this.#frames = m.counter('outpost_lpwan_frames_total', 'Radio frames handled by the network server, by result');
    this.#refused = m.counter('outpost_lpwan_refused_total', 'Radio frames refused or dropped, by reason');
    this.#downlinks = m.counter('outpost_lpwan_downlinks_total', 'Downlink transmissions, by window and result');
    m.gauge('outpost_lpwan_devices', 'LoRaWAN devices provisioned', () => deps.sessions.size);
    m.gauge('outpost_lpwan_duty_cycle_used_seconds', 'Airtime used in the last hour per transmitter and ETSI sub-band', () => {
      const now = deps.clock.now();
      const out: Array<[Record<string, string>, number]> = [];
      for (const [source, tracker] of this.#dutyCycles) for (const [band, ms] of tracker.usage(now)) if (ms > 0) out.push([{ source, band }, ms / 1000]);
      return out;
    });
  }

  attach(source: RadioSource): void {
    this.#sources.push(source);
    source.onFrame((frame) => this.handleFrame(frame, source));
  }

  /** Resolves when every answer started so far has finished. */
  async settle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  #track(work: Promise<void>): void {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
  }

  #refuse(reason: string): void {
    this.#refused.inc({ reason });
  }

  #offerUnclaimed(frame: RadioFrame, source: RadioSource, reason: string): void {
    if (this.unclaimed?.(frame, source, reason)) {
      this.#frames.inc({ result: 'raw' });
      return;
    }
    this.#refuse(reason);
    this.#d.logger.debug({ reason, source: frame.source, bytes: frame.payload.length }, 'radio frame not for a known LoRaWAN device');
  }

  handleFrame(frame: RadioFrame, source: RadioSource): void {
    try {
      const parsed = parseUplink(frame.payload);
      if (!parsed.ok) return this.#offerUnclaimed(frame, source, parsed.reason);
      if (parsed.frame.kind === 'join-request') return this.#handleJoin(parsed.frame, frame, source);
      this.#handleData(parsed.frame, frame, source);
    } catch (err) {
      // A frame must never take the radio side down.
      this.#refuse('internal-error');
      this.#d.logger.error({ err, source: frame.source }, 'radio frame handling failed');
    }
  }

  // ---- data uplinks

  /** Step: the device whose session verifies the MIC with a counter ahead of the expected one. */
  #verify(up: DataUplink, candidates: readonly LiveDevice[]): { device: LiveDevice; session: LiveSession; fCnt: number } | undefined {
    for (const device of candidates) {
      const session = device.session!;
      const { full, gap } = reconstructFCnt(session.fCntUp, up.fCnt16);
      if (gap < MAX_FCNT_GAP && dataMicValid(up, session.nwkSKey, full)) return { device, session, fCnt: full };
    }
    return undefined;
  }

  /** Step (on refusal): replay, too large a gap, or a wrong key, and which device it names if any. */
  #classify(up: DataUplink, candidates: readonly LiveDevice[]): { reason: string; device?: LiveDevice; fCnt?: number } {
    for (const device of candidates) {
      const session = device.session!;
      const behind = replayedFCnt(session.fCntUp, up.fCnt16);
      if (behind !== undefined && dataMicValid(up, session.nwkSKey, behind)) return { reason: 'fcnt-replay', device, fCnt: behind };
      const { full } = reconstructFCnt(session.fCntUp, up.fCnt16);
      if (dataMicValid(up, session.nwkSKey, full)) return { reason: 'fcnt-gap', device, fCnt: full };
    }
    // A MIC failure names a device only when one device has this DevAddr: the usual cause is a wrong key.
    return candidates.length === 1 ? { reason: 'mic', device: candidates[0]! } : { reason: 'mic' };
  }

  #handleData(up: DataUplink, frame: RadioFrame, source: RadioSource): void {
    const candidates = this.#d.sessions.byDevAddr(up.devAddr);
    if (candidates.length === 0) return this.#offerUnclaimed(frame, source, 'unknown-devaddr');
    const owner = this.#verify(up, candidates);
    if (!owner) {
      const verdict = this.#classify(up, candidates);
      // A frame no key verifies may still be someone's raw point-to-point payload: offered (and counted) below.
      if (verdict.reason !== 'mic') this.#refuse(verdict.reason);
      if (verdict.device) {
        this.#d.events.publish(verdict.device.deviceId, {
          type: 'uplink_refused',
          at: frame.receivedAt,
          reason: verdict.reason,
          fCnt: verdict.fCnt ?? up.fCnt16,
          expectedFCnt: verdict.device.session!.fCntUp,
          source: frame.source,
        });
      }
      if (verdict.reason === 'mic') this.#offerUnclaimed(frame, source, 'mic');
      return;
    }
    const { device, session, fCnt } = owner;
    // MAC commands may not travel in FOpts and an FPort-0 payload at once: malformed, counters untouched.
    if (up.fOpts.length > 0 && up.fPort === 0) {
      this.#refuse('malformed');
      this.#d.events.publish(device.deviceId, { type: 'uplink_refused', at: frame.receivedAt, reason: 'malformed', fCnt, source: frame.source });
      return;
    }
    // Step: accept the counter now, so a second copy of this frame is a replay from here on.
    session.fCntUp = fCnt + 1 > 0xffffffff ? 0 : fCnt + 1;
    const plain = up.fPort === undefined ? Buffer.alloc(0) : cryptFrmPayload(up.fPort === 0 ? session.nwkSKey.key : session.appSKey, Direction.Up, up.devAddrLe, fCnt, up.frmPayload);
    const macCommands = parseUplinkMacCommands(up.fPort === 0 ? plain : up.fOpts).commands;
    this.#acknowledge(device, up);
    this.#frames.inc({ result: 'uplink' });
    const needs: AnswerNeeds = { ackOwed: up.confirmed, macAnswers: this.#macAnswers(macCommands, frame), mustAnswer: up.confirmed || up.adrAckReq };
    needs.mustAnswer ||= needs.macAnswers.length > 0;
    this.#publishUplinkEvent(device, up, frame, fCnt, plain, macCommands);
    this.#track(this.#ingestAndAnswer(device, session, up, frame, source, fCnt, plain, needs));
  }

  /** Step: the uplink's ACK bit acknowledges the confirmed downlink sent last. */
  #acknowledge(device: LiveDevice, up: DataUplink): void {
    const pendingId = this.#awaitingAck.get(device.deviceId);
    if (!up.ack || !pendingId) return;
    this.#awaitingAck.delete(device.deviceId);
    const item = this.#d.queue.open(device.deviceId).find((i) => i.id === pendingId);
    if (item) this.#d.queue.finish(item, 'acknowledged', null);
  }

  /** Step: answers to MAC commands, to ride in the FOpts of the downlink. */
  #macAnswers(commands: MacCommand[], frame: RadioFrame): Buffer {
    const answers: Buffer[] = [];
    for (const c of commands) {
      if (c.name === 'LinkCheckReq') {
        const sf = parseDataRateName(frame.dataRate)?.spreadingFactor ?? 12;
        const snrs = (frame.heardBy ?? [frame]).map((h) => h.snr).filter((s): s is number => s !== undefined);
        answers.push(linkCheckAnswer(snrs.length > 0 ? Math.max(...snrs) : undefined, sf, frame.heardBy?.length ?? 1));
      }
    }
    return Buffer.concat(answers);
  }

  #publishUplinkEvent(device: LiveDevice, up: DataUplink, frame: RadioFrame, fCnt: number, plain: Buffer, macCommands: MacCommand[]): void {
    const event: Record<string, unknown> = {
      fCnt,
      ...(up.fPort === undefined ? {} : { fPort: up.fPort }),
      confirmed: up.confirmed,
      adr: up.adr,
      payloadSize: plain.length,
      ...(frame.rssi === undefined ? {} : { rssi: frame.rssi }),
      ...(frame.snr === undefined ? {} : { snr: frame.snr }),
      frequency: frame.frequency,
      dataRate: frame.dataRate,
      source: frame.source,
      ...(frame.gatewayTime === undefined ? {} : { gatewayTime: frame.gatewayTime }),
      ...(frame.heardBy && frame.heardBy.length > 0 ? { gateways: frame.heardBy } : {}),
      ...(macCommands.length > 0 ? { macCommands: macCommands.map((c) => ({ cid: c.cid, name: c.name, ...(c.payload.length > 0 ? { payload: c.payload.toString('hex').toUpperCase() } : {}) })) } : {}),
    };
    this.#d.events.publish(device.deviceId, { type: 'uplink', at: frame.receivedAt, ...event });
  }

  /** Step: the application payload through the device's codec into states, committed with the counters. */
  async #ingestAndAnswer(device: LiveDevice, session: LiveSession, up: DataUplink, frame: RadioFrame, source: RadioSource, fCnt: number, plain: Buffer, needs: AnswerNeeds): Promise<void> {
    const lastUplink: LastUplink = { at: frame.receivedAt, fCnt, frequency: frame.frequency, dataRate: frame.dataRate, source: frame.source };
    if (up.fPort !== undefined) lastUplink.fPort = up.fPort;
    if (frame.rssi !== undefined) lastUplink.rssi = frame.rssi;
    if (frame.snr !== undefined) lastUplink.snr = frame.snr;
    const nextFCntUp = session.fCntUp;
    const application = up.fPort !== undefined && up.fPort >= 1 && up.fPort <= 223 && plain.length > 0;
    const alongside = () => this.#d.devices.saveUplinkCounters(device.deviceId, nextFCntUp, lastUplink);
    const topic = `${frame.source} fPort ${up.fPort ?? '-'}`;
    try {
      if (!this.#d.catalog.device(device.deviceId)) return;
      // The payload takes the same road as any door's bytes: decoded as the device says (its codec
      // gets the FPort), raw bytes kept, states and these counters in one transaction. FPort 0 (MAC
      // commands) or no payload: nothing for the codec, but the counters still commit.
      await this.#d.pipeline.ingest({
        deviceId: device.deviceId,
        via: frame.source,
        payload: application ? { bytes: plain, format: 'device' } : { states: {} },
        label: 'uplink',
        topic,
        fPort: up.fPort,
        receivedAt: frame.receivedAt,
        alongside,
      });
    } catch (err) {
      if (isServiceError(err) && (err.code === 'DECODE_FAILED' || err.code === 'INVALID_CBOR')) {
        this.#refuse('codec');
        this.#d.events.publish(device.deviceId, { type: 'uplink_refused', at: frame.receivedAt, reason: 'codec', fCnt, fPort: up.fPort, error: `${err.message} (${RAW_UPLINK_NOTE})`, source: frame.source });
      } else if (!isServiceError(err)) {
        this.#d.logger.error({ err, deviceId: device.deviceId }, 'storing an uplink failed');
      }
    }
    await this.#answer(device, session, frame, source, needs);
  }

  // ---- downlinks

  #windows(frame: RadioFrame, join: boolean): Window[] {
    const { region } = this.#d;
    const windows: Window[] = [];
    const upDr = dataRateIndex(region, frame.dataRate);
    // Serial modems cannot time RX1 reliably (host and USB jitter against 1 ms symbols): RX2 only.
    if (upDr !== undefined && !frame.source.startsWith('serial:')) {
      const rx1 = region.rx1(frame.frequency, upDr, 0);
      if (rx1) windows.push({ name: 'rx1', frequency: rx1.frequency, dataRate: rx1.dataRate, delayMs: join ? JOIN_ACCEPT_DELAY1_MS : RECEIVE_DELAY1_MS });
    }
    windows.push({ name: 'rx2', frequency: region.rx2.frequency, dataRate: region.rx2.dataRate, delayMs: join ? JOIN_ACCEPT_DELAY2_MS : RECEIVE_DELAY2_MS });
    return windows;
  }

  #dutyCycleOf(frame: RadioFrame): DutyCycleTracker {
    let tracker = this.#dutyCycles.get(frame.source);
    if (!tracker) {
      tracker = new DutyCycleTracker();
      this.#dutyCycles.set(frame.source, tracker);
    }
    return tracker;
  }

  /**
   * Sends `build(window)` in the first window where it fits the data rate and the duty cycle, falling
   * back from RX1 to RX2 when the gateway refuses. Returns the window used, or why none was.
   */
  async #transmit(frame: RadioFrame, source: RadioSource, windows: Window[], build: (w: Window) => Buffer | undefined): Promise<{ window?: Window; problems: string[] }> {
    const problems: string[] = [];
    const tracker = this.#dutyCycleOf(frame);
    for (const w of windows) {
      const payload = build(w);
      if (!payload) {
        problems.push(`${w.name}: does not fit DR${w.dataRate}`);
        continue;
      }
      const modulation = this.#d.region.dataRates[w.dataRate]!;
      const airtime = timeOnAirMs(payload.length, modulation, { crc: false });
      const startAt = frame.receivedAt + w.delayMs;
      if (this.#d.dutyCycle ?? this.#d.region.dutyCycle) {
        const verdict = tracker.check(w.frequency, airtime, startAt);
        if (!verdict.ok) {
          problems.push(`${w.name}: ${verdict.reason}`);
          this.#downlinks.inc({ window: w.name, result: 'duty-cycle' });
          continue;
        }
      }
      try {
        await source.transmit({
          payload,
          frequency: w.frequency,
          dataRate: dataRateName(modulation),
          invertIq: true,
          delayMs: w.delayMs,
          power: this.#d.region.downlinkPower(w.frequency),
          replyTo: frame.replyTo,
        });
        tracker.record(w.frequency, airtime, startAt);
        this.#downlinks.inc({ window: w.name, result: 'sent' });
        return { window: w, problems };
      } catch (err) {
        problems.push(`${w.name}: ${(err as Error).message}`);
        this.#downlinks.inc({ window: w.name, result: 'tx-error' });
      }
    }
    return { problems };
  }

  /** Step: the one downlink this uplink allows (queue head, ACK, MAC answers), if any is needed. */
  async #answer(device: LiveDevice, session: LiveSession, frame: RadioFrame, source: RadioSource, needs: AnswerNeeds): Promise<void> {
    const { queue, region, devices } = this.#d;
    const items = queue.open(device.deviceId);
    // A confirmed item already sent and not acknowledged is sent again (with a new counter) until it is, or expires.
    const item: DownlinkRecord | undefined = items[0];
    if (!item && !needs.mustAnswer) return;
    const windows = this.#windows(frame, false);
    const fOpts = needs.macAnswers.subarray(0, 15);
    // The counter is reserved (and persisted) before anything goes on air, so it is never reused.
    const fCnt = session.fCntDown;
    let reserved = false;
    const reserve = () => {
      if (reserved) return;
      reserved = true;
      session.fCntDown = (fCnt + 1) >>> 0;
      devices.saveDownlinkCounter(device.deviceId, session.fCntDown);
    };
    let sendItem: DownlinkRecord | undefined = item;
    if (item) {
      const fitsSomewhere = windows.some((w) => item.payload.length <= maxFrmPayload(region, w.dataRate, fOpts.length));
      if (!fitsSomewhere) {
        queue.finish(item, 'too_large', `${item.payload.length} bytes do not fit the largest payload of any receive window (${windows.map((w) => `${w.name} DR${w.dataRate}: ${maxFrmPayload(region, w.dataRate, fOpts.length)}`).join(', ')})`);
        sendItem = undefined;
        if (!needs.mustAnswer) return;
      }
    }
    const fPending = items.length > (sendItem ? 1 : 0);
    const frameFor = (carry: DownlinkRecord | undefined) => {
      reserve();
      return buildDataDownlink({
        devAddrLe: session.devAddrLe,
        nwkSKey: session.nwkSKey,
        appSKey: session.appSKey,
        fCnt,
        confirmed: carry?.confirmed ?? false,
        ack: needs.ackOwed,
        fPending: carry ? fPending : items.length > 0,
        fOpts,
        ...(carry ? { fPort: carry.fPort, payload: carry.payload } : {}),
      });
    };
    let result: { window?: Window; problems: string[] } = { problems: [] };
    if (sendItem) {
      const carry = sendItem;
      // Only windows whose data rate can carry the item (checked against the window actually used).
      const fitting = windows.filter((w) => carry.payload.length <= maxFrmPayload(region, w.dataRate, fOpts.length));
      result = await this.#transmit(frame, source, fitting, () => frameFor(carry));
    }
    const carried = !!result.window;
    if (!result.window && needs.mustAnswer) {
      // The item could not go; an owed ACK or MAC answer still does, in an empty frame.
      const again = await this.#transmit(frame, source, windows, () => frameFor(undefined));
      result = { window: again.window, problems: [...result.problems, ...again.problems] };
    }
    if (sendItem && !carried) {
      const reason = result.problems.join('; ') || 'no receive window available';
      const dutyCycle = result.problems.some((p) => p.includes('duty cycle'));
      queue.report(sendItem, dutyCycle ? 'queued' : 'tx_error', dutyCycle ? `waiting for the duty cycle: ${reason}` : reason);
    }
    if (!result.window) {
      if (!sendItem) this.#d.logger.warn({ deviceId: device.deviceId, problems: result.problems }, 'acknowledgement or MAC answer not sent');
      return;
    }
    if (sendItem && carried) {
      queue.sent(sendItem, fCnt, result.window.name);
      if (sendItem.confirmed) this.#awaitingAck.set(device.deviceId, sendItem.id);
    }
  }

  // ---- joins

  #handleJoin(join: JoinRequest, frame: RadioFrame, source: RadioSource): void {
    const device = this.#d.sessions.byDevEui(join.devEui);
    if (!device || device.activation !== 'otaa' || !device.appKey) return this.#offerUnclaimed(frame, source, 'unknown-deveui');
    const refuse = (reason: string) => {
      this.#refuse(`join-${reason}`);
      this.#d.events.publish(device.deviceId, { type: 'join_refused', at: frame.receivedAt, reason, devNonce: join.devNonce, source: frame.source });
    };
    if (!joinRequestMicValid(join, device.appKey)) return refuse('mic');
    if (device.joinEui && device.joinEui !== join.joinEui) return refuse('join-eui');
    if (this.#d.devices.isDevNonceUsed(device.deviceId, join.devNonce)) return refuse('devnonce-replay');
    const devAddr = this.#allocateDevAddr();
    const appNonceLe = this.#random(3);
    const netIdLe = onAirBytes(this.#d.netId);
    const keys = deriveSessionKeys(device.appKey.key, appNonceLe, netIdLe, join.devNonceLe);
    this.#d.devices.saveJoin(device.deviceId, join.devNonce, { devAddr, ...keys, joinedAt: frame.receivedAt });
    const fresh = this.#d.sessions.reload(device.deviceId);
    this.#awaitingAck.delete(device.deviceId);
    this.#frames.inc({ result: 'join' });
    this.#d.events.publish(device.deviceId, { type: 'join', at: frame.receivedAt, devAddr, devNonce: join.devNonce, source: frame.source });
    const accept = buildJoinAccept({ appKey: device.appKey.key, appNonceLe, netIdLe, devAddrLe: onAirBytes(devAddr), dlSettings: 0x00, rxDelay: 1 });
    this.#track(
      this.#transmit(frame, source, this.#windows(frame, true), () => accept).then((result) => {
        if (!result.window) this.#d.logger.warn({ deviceId: fresh?.deviceId, problems: result.problems }, 'join accept not sent');
      }),
    );
  }

  /** A DevAddr with the NetID's NwkID in its top 7 bits, not used by any session. */
  #allocateDevAddr(): string {
    const nwkId = Number.parseInt(this.#d.netId, 16) & 0x7f;
    for (;;) {
      const low = this.#random(4).readUInt32BE(0) & 0x01ffffff;
      const le = Buffer.alloc(4);
      le.writeUInt32LE(((nwkId << 25) | low) >>> 0);
      const addr = printedHex(le);
      if (!this.#d.sessions.devAddrTaken(addr)) return addr;
    }
  }
}
