import { isServiceError } from '../../core/errors.js';
import type { LastUplink } from '../../store/lorawan-devices.js';
import type { RadioFrame, RadioSource } from '../radio.js';
import { cryptFrmPayload, Direction } from '../lorawan/crypto.js';
import { dataMicValid, type DataUplink } from '../lorawan/phy.js';
import { MAX_FCNT_GAP, reconstructFCnt, replayedFCnt } from '../lorawan/counters.js';
import { dataRateIndex, parseDataRateName } from '../lorawan/regions.js';
import { describeUplinkCommand, parseUplinkMacCommands, type MacCommand } from '../mac/commands.js';
import { linkCheckAnswer, LINK_CHECK } from '../mac/link-check.js';
import { DEVICE_TIME, deviceTimeAnswer } from '../mac/device-time.js';
import { linkAdrVerdict } from '../mac/link-adr.js';
import { initialMacState } from '../mac/state.js';
import { adrOnUplink } from '../adr/adr-state.js';
import type { LiveDevice, LiveSession } from '../session-registry.js';
import type { ServerParts } from '../server-parts.js';
import { sendDataDownlink, type MacAnswer } from '../downlink/data-downlink.js';
import { classAWindows } from '../downlink/windows.js';
import { STOP, type Step } from './steps.js';
import type { HeardCopy } from './dedup.js';

const RAW_UPLINK_NOTE = 'the payload is kept raw: GET /device/<id>/uplinks';

/** Everything one data uplink's steps share. */
export interface DataUplinkContext {
  parts: ServerParts;
  frame: RadioFrame;
  source: RadioSource;
  /** The copy the answer goes through (the best one whose source can transmit). */
  answer: HeardCopy;
  up: DataUplink;
  candidates: readonly LiveDevice[];
  device: LiveDevice;
  session: LiveSession;
  /** The full 32-bit counter. */
  fCnt: number;
  /** The uplink verified under the session an OTAA join offered: it becomes current with this uplink. */
  switched: boolean;
  plain: Buffer;
  macCommands: MacCommand[];
  macAnswers: MacAnswer[];
  /** ADR decided on a LinkADRReq that must ride the answer. */
  linkAdrDue: boolean;
  mustAnswer: boolean;
}

/** The best SNR of every copy of the frame (ADR and LinkCheckAns measure it). */
function bestSnr(frame: RadioFrame): number | undefined {
  let best: number | undefined;
  for (const h of frame.heardBy ?? [frame]) if (h.snr !== undefined && (best === undefined || h.snr > best)) best = h.snr;
  return best;
}

const findCandidates: Step<DataUplinkContext> = {
  name: 'find devices with this DevAddr',
  run(ctx) {
    ctx.candidates = ctx.parts.sessions.byDevAddr(ctx.up.devAddr);
    if (ctx.candidates.length > 0) return;
    ctx.parts.offerUnclaimed(ctx.frame, ctx.source, 'unknown-devaddr');
    return STOP;
  },
};

/** The sessions a device may be using: its current one and the one an OTAA join offered. */
function sessionsOf(device: LiveDevice, devAddr: string): Array<[LiveSession, boolean]> {
  const out: Array<[LiveSession, boolean]> = [];
  if (device.session?.devAddr === devAddr) out.push([device.session, false]);
  if (device.nextSession?.devAddr === devAddr) out.push([device.nextSession, true]);
  return out;
}

const verifyMic: Step<DataUplinkContext> = {
  name: 'verify the MIC with a counter ahead of the expected one',
  run(ctx) {
    const { up } = ctx;
    for (const device of ctx.candidates) {
      for (const [session, next] of sessionsOf(device, up.devAddr)) {
        const { full, gap } = reconstructFCnt(session.fCntUp, up.fCnt16);
        if (gap < MAX_FCNT_GAP && dataMicValid(up, session.nwkSKey, full)) {
          ctx.device = device;
          ctx.session = session;
          ctx.fCnt = full;
          ctx.switched = next;
          return;
        }
      }
    }
    refuseUnverified(ctx);
    return STOP;
  },
};

/** A frame no session verifies: a replay, too large a gap, or a wrong key, reported to the device it names if any. */
function refuseUnverified(ctx: DataUplinkContext): void {
  const { parts, up, frame } = ctx;
  let verdict: { reason: string; device?: LiveDevice; session?: LiveSession; fCnt?: number } | undefined;
  for (const device of ctx.candidates) {
    for (const [session] of sessionsOf(device, up.devAddr)) {
      const behind = replayedFCnt(session.fCntUp, up.fCnt16);
      if (behind !== undefined && dataMicValid(up, session.nwkSKey, behind)) verdict ??= { reason: 'fcnt-replay', device, session, fCnt: behind };
      const { full } = reconstructFCnt(session.fCntUp, up.fCnt16);
      if (dataMicValid(up, session.nwkSKey, full)) verdict ??= { reason: 'fcnt-gap', device, session, fCnt: full };
    }
  }
  // A MIC failure names a device only when one device has this DevAddr: the usual cause is a wrong key.
  verdict ??= ctx.candidates.length === 1 ? { reason: 'mic', device: ctx.candidates[0]!, session: sessionsOf(ctx.candidates[0]!, up.devAddr)[0]?.[0] } : { reason: 'mic' };
  // A frame no key verifies may still be someone's raw point-to-point payload: offered (and counted) below.
  if (verdict.reason !== 'mic') parts.refuse(verdict.reason);
  if (verdict.device) {
    parts.events.publish(verdict.device.deviceId, {
      type: 'uplink_refused',
      at: frame.receivedAt,
      reason: verdict.reason,
      fCnt: verdict.fCnt ?? up.fCnt16,
      expectedFCnt: verdict.session?.fCntUp ?? 0,
      source: frame.source,
    });
  }
  if (verdict.reason === 'mic') parts.offerUnclaimed(frame, ctx.source, 'mic');
}

const refuseMacInBoth: Step<DataUplinkContext> = {
  name: 'refuse MAC commands in FOpts and FPort 0 at once',
  run(ctx) {
    // Malformed: counters untouched.
    if (!(ctx.up.fOpts.length > 0 && ctx.up.fPort === 0)) return;
    ctx.parts.refuse('malformed');
    ctx.parts.events.publish(ctx.device.deviceId, { type: 'uplink_refused', at: ctx.frame.receivedAt, reason: 'malformed', fCnt: ctx.fCnt, source: ctx.frame.source });
    return STOP;
  },
};

const switchSession: Step<DataUplinkContext> = {
  name: 'switch to the session the device uses after an OTAA join',
  run(ctx) {
    if (!ctx.switched) return;
    // From here on the old session is gone: FCnt, MAC state and the queue follow the new one.
    const { parts } = ctx;
    ctx.session = parts.sessions.switchToNextSession(ctx.device, initialMacState(parts.region, parts.settings.rx2DataRate));
  },
};

const acceptCounter: Step<DataUplinkContext> = {
  name: 'accept the counter',
  run(ctx) {
    // Now, so a second copy of this frame is a replay from here on.
    ctx.session.fCntUp = ctx.fCnt + 1 > 0xffffffff ? 0 : ctx.fCnt + 1;
    const { answer } = ctx;
    ctx.parts.lastHeard.set(ctx.device.deviceId, { source: answer.source, receiver: answer.frame.source, replyTo: answer.frame.replyTo });
  },
};

const decrypt: Step<DataUplinkContext> = {
  name: 'decrypt FRMPayload',
  run(ctx) {
    const { up, session } = ctx;
    ctx.plain = up.fPort === undefined ? Buffer.alloc(0) : cryptFrmPayload(up.fPort === 0 ? session.nwkSKey.key : session.appSKey, Direction.Up, up.devAddrLe, ctx.fCnt, up.frmPayload);
    ctx.macCommands = parseUplinkMacCommands(up.fPort === 0 ? ctx.plain : up.fOpts).commands;
    ctx.parts.frames.inc({ result: 'uplink' });
  },
};

const settleAcknowledgement: Step<DataUplinkContext> = {
  name: 'settle the confirmed downlink this uplink acknowledges',
  run(ctx) {
    if (!ctx.up.ack) return;
    const { queue } = ctx.parts;
    // The confirmed item sent last waits in the queue (status `sent`), also across a restart.
    const pending = queue.open(ctx.device.deviceId).find((i) => i.confirmed && i.status === 'sent');
    if (pending) queue.finish(pending, 'acknowledged', null);
  },
};

const answerMacCommands: Step<DataUplinkContext> = {
  name: 'answer MAC commands (LinkCheckReq, DeviceTimeReq)',
  run(ctx) {
    const { frame } = ctx;
    for (const c of ctx.macCommands) {
      if (c.cid === LINK_CHECK) {
        const modulation = parseDataRateName(frame.dataRate) ?? { spreadingFactor: 12, bandwidth: 125 };
        const bytes = linkCheckAnswer(bestSnr(frame), modulation, frame.heardBy?.length ?? 1);
        ctx.macAnswers.push({ bytes, shown: { cid: 'LinkCheckAns', margin: bytes[1], gwCnt: bytes[2] } });
      } else if (c.cid === DEVICE_TIME) {
        const bytes = deviceTimeAnswer(frame.receivedAt);
        ctx.macAnswers.push({ bytes, shown: { cid: 'DeviceTimeAns', gpsTime: bytes.readUInt32LE(1) + bytes[5]! / 256 } });
      }
    }
  },
};

const adaptDataRate: Step<DataUplinkContext> = {
  name: 'ADR: the LinkADRAns, the SNR history and the next LinkADRReq',
  run(ctx) {
    const { parts, device, up, frame } = ctx;
    const enabled = parts.settings.adr !== false && device.adr;
    ctx.linkAdrDue = adrOnUplink(
      device.mac,
      { dataRate: dataRateIndex(parts.region, frame.dataRate), adrBit: up.adr, bestSnr: bestSnr(frame), verdict: linkAdrVerdict(ctx.macCommands) },
      enabled,
      parts.region,
      parts.settings.adr === false ? undefined : parts.settings.adr,
    );
  },
};

const decideAnswer: Step<DataUplinkContext> = {
  name: 'decide whether the uplink needs a downlink',
  run(ctx) {
    // An ADRAckReq always gets one (empty if nothing else): the device lowers its data rate otherwise.
    ctx.mustAnswer = ctx.up.confirmed || ctx.up.adrAckReq || ctx.macAnswers.length > 0;
  },
};

const publishUplinkEvent: Step<DataUplinkContext> = {
  name: 'publish the uplink event',
  run(ctx) {
    const { up, frame } = ctx;
    ctx.parts.events.publish(ctx.device.deviceId, {
      type: 'uplink',
      at: frame.receivedAt,
      fCnt: ctx.fCnt,
      ...(up.fPort === undefined ? {} : { fPort: up.fPort }),
      confirmed: up.confirmed,
      adr: up.adr,
      adrAckReq: up.adrAckReq,
      payloadSize: ctx.plain.length,
      ...(frame.rssi === undefined ? {} : { rssi: frame.rssi }),
      ...(frame.snr === undefined ? {} : { snr: frame.snr }),
      frequency: frame.frequency,
      dataRate: frame.dataRate,
      source: frame.source,
      ...(frame.gatewayTime === undefined ? {} : { gatewayTime: frame.gatewayTime }),
      ...(frame.heardBy && frame.heardBy.length > 0 ? { gateways: frame.heardBy } : {}),
      ...(ctx.macCommands.length > 0 ? { macCommands: ctx.macCommands.map(describeUplinkCommand) } : {}),
    });
  },
};

const storeAndAnswer: Step<DataUplinkContext> = {
  name: 'store the payload with the counters, then answer',
  run(ctx) {
    const { parts, device } = ctx;
    parts.track(
      storeUplink(ctx).then(() => {
        if (answerMayBeDue(ctx)) parts.serialise(device.deviceId, () => answerUplink(ctx));
      }),
    );
  },
};

/**
 * Whether the answer could send anything, asked once the uplink committed (a command queued
 * meanwhile still rides it). Most uplinks need none, and skip the answer's chain of promises;
 * with downlink work of the device running or waiting, the answer queues behind it as always.
 * A conservative copy of `sendDataDownlink`'s own "nothing to send" test (an item, an owed answer,
 * a LinkADRReq) plus the Class C wake of `answerUplink`: whatever makes either send must be here.
 */
function answerMayBeDue(ctx: DataUplinkContext): boolean {
  const { parts, device } = ctx;
  if (ctx.mustAnswer || ctx.linkAdrDue || device.deviceClass === 'C') return true;
  if (device.mac.adrPending?.sent === false || parts.queue.openCount(device.deviceId) > 0) return true;
  return parts.hasDownlinkWork(device.deviceId);
}

/** The data uplink, step by step (docs/lpwan.md, "How an uplink is handled"). */
export const DATA_UPLINK_STEPS: readonly Step<DataUplinkContext>[] = [
  findCandidates,
  verifyMic,
  refuseMacInBoth,
  switchSession,
  acceptCounter,
  decrypt,
  publishUplinkEvent,
  settleAcknowledgement,
  answerMacCommands,
  adaptDataRate,
  decideAnswer,
  storeAndAnswer,
];

/** The application payload through the device's codec into states, committed with the counters and MAC state. */
async function storeUplink(ctx: DataUplinkContext): Promise<void> {
  const { parts, device, up, frame, fCnt, plain } = ctx;
  const lastUplink: LastUplink = { at: frame.receivedAt, fCnt, frequency: frame.frequency, dataRate: frame.dataRate, source: frame.source };
  if (up.fPort !== undefined) lastUplink.fPort = up.fPort;
  if (frame.rssi !== undefined) lastUplink.rssi = frame.rssi;
  if (frame.snr !== undefined) lastUplink.snr = frame.snr;
  const session = ctx.session;
  const nextFCntUp = session.fCntUp;
  const switched = ctx.switched ? { devAddr: session.devAddr, nwkSKey: session.nwkSKey.key, appSKey: session.appSKey, joinedAt: session.joinedAt ?? frame.receivedAt } : undefined;
  const applicationPort = up.fPort !== undefined && up.fPort >= 1 && up.fPort <= 223;
  // An FPort with an empty FRMPayload still means something to a codec of the device's own (a
  // heartbeat, a button press); the built-in CBOR state has nothing to read in it.
  const application = applicationPort && (plain.length > 0 || parts.hasCodec(device.deviceId));
  const alongside = () => parts.devices.saveUplinkCounters(device.deviceId, nextFCntUp, lastUplink, JSON.stringify(device.mac), switched);
  try {
    if (!parts.catalog.device(device.deviceId)) return;
    // The payload takes the same road as any door's bytes: decoded as the device says (its codec
    // gets the FPort), raw bytes kept, states and these counters in one transaction. FPort 0 (MAC
    // commands) or no payload: nothing for the codec, but the counters still commit.
    await parts.pipeline.ingest({
      deviceId: device.deviceId,
      via: frame.source,
      payload: application ? { bytes: plain, format: 'device' } : { states: {} },
      label: 'uplink',
      topic: `${frame.source} fPort ${up.fPort ?? '-'}`,
      fPort: up.fPort,
      receivedAt: frame.receivedAt,
      alongside,
    });
  } catch (err) {
    if (isServiceError(err) && (err.code === 'DECODE_FAILED' || err.code === 'INVALID_CBOR')) {
      parts.refuse('codec');
      parts.events.publish(device.deviceId, { type: 'uplink_refused', at: frame.receivedAt, reason: 'codec', fCnt, fPort: up.fPort, error: `${err.message} (${RAW_UPLINK_NOTE})`, source: frame.source });
    } else if (!isServiceError(err)) {
      parts.logger.error({ err, deviceId: device.deviceId }, 'storing an uplink failed');
    }
  }
}

/** The one downlink this uplink allows, in its Class A windows, through the source that heard the best copy (that can transmit). */
async function answerUplink(ctx: DataUplinkContext): Promise<void> {
  const { parts, device } = ctx;
  const { frame, source } = ctx.answer;
  // The device's session may have changed since (a join, new settings): answer only the one it used.
  if (parts.sessions.device(device.deviceId) !== device || device.session !== ctx.session) return;
  await sendDataDownlink(parts, device, ctx.session, {
    source,
    receiver: frame.source,
    replyTo: frame.replyTo,
    receivedAt: frame.receivedAt,
    windows: source.capabilities.transmit ? classAWindows(parts.region, device.mac.rx, frame, source.capabilities, false) : [],
    ackOwed: ctx.up.confirmed,
    // The LinkADRReq ADR decided on may already have gone out in the answer of an earlier uplink
    // still waiting for its commit when this one came (it rides any downlink): then this uplink
    // owes no answer for it.
    mustAnswer: ctx.mustAnswer || (ctx.linkAdrDue && device.mac.adrPending?.sent === false),
    macAnswers: ctx.macAnswers,
    resendSent: true,
  });
  // A Class C device's confirmed item that this uplink did not acknowledge was just sent again: its ACK timer restarts.
  if (device.deviceClass === 'C') parts.wakeClassC(device.deviceId, 'uplink');
}
