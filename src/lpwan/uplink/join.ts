import type { RadioFrame, RadioSource } from '../radio.js';
import { deriveSessionKeys } from '../lorawan/crypto.js';
import { buildJoinAccept, joinRequestMicValid, onAirBytes, printedHex, type JoinRequest } from '../lorawan/phy.js';
import { initialMacState } from '../mac/state.js';
import type { LiveDevice } from '../session-registry.js';
import type { ServerParts } from '../server-parts.js';
import { classAWindows } from '../downlink/windows.js';
import { STOP, type Step } from './steps.js';
import type { HeardCopy } from './dedup.js';

/** Everything one join request's steps share. */
export interface JoinContext {
  parts: ServerParts;
  frame: RadioFrame;
  source: RadioSource;
  /** The copy the join accept goes through (the best one whose source can transmit). */
  answer: HeardCopy;
  join: JoinRequest;
  device: LiveDevice;
  devAddr: string;
  accept: Buffer;
}

function refuseJoin(ctx: JoinContext, reason: string): typeof STOP {
  ctx.parts.refuse(`join-${reason}`);
  ctx.parts.events.publish(ctx.device.deviceId, { type: 'join_refused', at: ctx.frame.receivedAt, reason, devNonce: ctx.join.devNonce, source: ctx.frame.source });
  return STOP;
}

const findDevice: Step<JoinContext> = {
  name: 'find the OTAA device with this DevEUI',
  run(ctx) {
    const device = ctx.parts.sessions.byDevEui(ctx.join.devEui);
    if (device && device.activation === 'otaa' && device.appKey) {
      ctx.device = device;
      return;
    }
    ctx.parts.offerUnclaimed(ctx.frame, ctx.source, 'unknown-deveui');
    return STOP;
  },
};

const checkMic: Step<JoinContext> = {
  name: 'check the MIC with the AppKey',
  run: (ctx) => (joinRequestMicValid(ctx.join, ctx.device.appKey!) ? undefined : refuseJoin(ctx, 'mic')),
};

const checkJoinEui: Step<JoinContext> = {
  name: 'check the JoinEUI',
  run: (ctx) => (!ctx.device.joinEui || ctx.device.joinEui === ctx.join.joinEui ? undefined : refuseJoin(ctx, 'join-eui')),
};

const checkDevNonce: Step<JoinContext> = {
  name: 'refuse a DevNonce used before',
  run: (ctx) => (ctx.parts.devices.isDevNonceUsed(ctx.device.deviceId, ctx.join.devNonce) ? refuseJoin(ctx, 'devnonce-replay') : undefined),
};

const createSession: Step<JoinContext> = {
  name: 'derive the session and save it',
  run(ctx) {
    const { parts, device, join, frame } = ctx;
    const devAddr = allocateDevAddr(parts);
    const appNonceLe = parts.random(3);
    const netIdLe = onAirBytes(parts.settings.netId);
    const keys = deriveSessionKeys(device.appKey!.key, appNonceLe, netIdLe, join.devNonceLe);
    const mac = initialMacState(parts.region, parts.settings.rx2DataRate);
    // A device with a session keeps it until its first uplink under this one (a lost JoinAccept
    // must not cut it off); the DevNonce is used from now on either way.
    parts.devices.saveJoin(device.deviceId, join.devNonce, { devAddr, ...keys, joinedAt: frame.receivedAt }, JSON.stringify(mac));
    ctx.device = parts.sessions.reload(device.deviceId) ?? device;
    ctx.devAddr = devAddr;
    // DLSettings: RX1DROffset 0, RX2 data rate as configured.
    const dlSettings = mac.rx.rx2DataRate & 0x0f;
    ctx.accept = buildJoinAccept({ appKey: device.appKey!.key, appNonceLe, netIdLe, devAddrLe: onAirBytes(devAddr), dlSettings, rxDelay: mac.rx.rxDelay });
    parts.frames.inc({ result: 'join' });
    parts.events.publish(device.deviceId, { type: 'join', at: frame.receivedAt, devAddr, devNonce: join.devNonce, source: frame.source });
  },
};

const sendJoinAccept: Step<JoinContext> = {
  name: 'send the join accept',
  run(ctx) {
    const { parts, device } = ctx;
    const { frame, source } = ctx.answer;
    const rx = initialMacState(parts.region, parts.settings.rx2DataRate).rx;
    const windows = source.capabilities.transmit ? classAWindows(parts.region, rx, frame, source.capabilities, true) : [];
    parts.track(
      parts.transmitter.send(source, frame.source, frame.replyTo, frame.receivedAt, windows, ctx.accept, device.devEui).then((result) => {
        if (!result.window) parts.logger.warn({ deviceId: device.deviceId, problems: result.problems }, 'join accept not sent');
      }),
    );
  },
};

/** The join request, step by step. */
export const JOIN_STEPS: readonly Step<JoinContext>[] = [findDevice, checkMic, checkJoinEui, checkDevNonce, createSession, sendJoinAccept];

/** A DevAddr with the NetID's NwkID in its top 7 bits, not used by any session (current or offered). */
function allocateDevAddr(parts: ServerParts): string {
  const nwkId = Number.parseInt(parts.settings.netId, 16) & 0x7f;
  for (;;) {
    const low = parts.random(4).readUInt32BE(0) & 0x01ffffff;
    const le = Buffer.alloc(4);
    le.writeUInt32LE(((nwkId << 25) | low) >>> 0);
    const addr = printedHex(le);
    if (!parts.sessions.devAddrTaken(addr)) return addr;
  }
}
