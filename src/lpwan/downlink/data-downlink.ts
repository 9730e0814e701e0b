import type { DownlinkRecord } from '../../store/downlink-queue.js';
import type { RadioSource } from '../radio.js';
import { buildDataDownlink } from '../lorawan/phy.js';
import { dataRateName, maxFrmPayload } from '../lorawan/regions.js';
import { linkAdrRequests } from '../mac/link-adr.js';
import type { LiveDevice, LiveSession } from '../session-registry.js';
import type { ServerParts } from '../server-parts.js';
import type { PlannedWindow } from './windows.js';

/** A MAC command the server sends, with how the `downlink` event shows it. */
export interface MacAnswer {
  bytes: Buffer;
  shown: Record<string, unknown>;
}

/** One chance to send a data downlink: the windows it may use and what it must carry. */
export interface DownlinkChance {
  source: RadioSource;
  /** The gateway or modem that transmits (its duty cycle). */
  receiver: string;
  replyTo: unknown;
  /** The reception time the windows' delays count from. */
  receivedAt: number;
  windows: PlannedWindow[];
  /** The uplink was confirmed: the downlink carries its ACK. */
  ackOwed: boolean;
  /** An empty downlink goes even with nothing queued (ACK, MAC answers, ADRAckReq, a LinkADRReq). */
  mustAnswer: boolean;
  /** Answers to the uplink's MAC commands (first in FOpts). */
  macAnswers: MacAnswer[];
  /** Class C: a confirmed item already sent may go again only on an ACK timeout or after an uplink. */
  resendSent: boolean;
}

const FOPTS_MAX = 15;

/**
 * The one downlink a chance allows (docs/lpwan.md, "Downlinks"): the first queue item that fits a
 * window (items that fit none leave as `too_large`; Class C items out of retries leave as `expired`),
 * the ACK, MAC answers and a pending LinkADRReq in FOpts; FPending when more items wait. The counter
 * is reserved and saved (with the MAC state) before anything goes on air, so it is never reused.
 */
export async function sendDataDownlink(parts: ServerParts, device: LiveDevice, session: LiveSession, chance: DownlinkChance): Promise<void> {
  const { queue, region, devices, settings } = parts;
  const mac = device.mac;
  // Whole MAC answers only, as many as FOpts holds (a command cut in two would confuse the device).
  const included: MacAnswer[] = [];
  let answerBytes = 0;
  for (const a of chance.macAnswers) {
    if (answerBytes + a.bytes.length > FOPTS_MAX) continue;
    included.push(a);
    answerBytes += a.bytes.length;
  }
  const answers = Buffer.concat(included.map((a) => a.bytes));
  const adrOn = settings.adr !== false && device.adr;
  const linkAdr = adrOn && mac.adrPending && !mac.adrPending.sent ? linkAdrRequests(mac.adrPending, region.linkAdrMasks(settings.subBand)) : undefined;
  const withAdr = linkAdr && answers.length + linkAdr.length <= FOPTS_MAX ? Buffer.concat([answers, linkAdr]) : undefined;
  const fits = (item: DownlinkRecord, fOptsLength: number) => chance.windows.some((w) => item.payload.length <= maxFrmPayload(region, w.dataRate, fOptsLength));

  // The item to carry: expired and oversized items never block the queue.
  const items = queue.open(device.deviceId);
  let item: DownlinkRecord | undefined;
  let waiting = 0;
  for (const candidate of items) {
    if (item) {
      waiting++;
      continue;
    }
    if (candidate.status === 'sent' && candidate.confirmed && device.deviceClass === 'C') {
      if (candidate.attempts >= 1 + settings.classC.retries) {
        queue.finish(candidate, 'expired', 'no-ack');
        continue;
      }
      if (!chance.resendSent) return;
    }
    if (!fits(candidate, answers.length)) {
      const sizes = chance.windows.map((w) => `${w.name} DR${w.dataRate}: ${maxFrmPayload(region, w.dataRate, answers.length)}`).join(', ');
      queue.finish(candidate, 'too_large', `${candidate.payload.length} bytes do not fit the largest payload of any receive window (${sizes})`);
      continue;
    }
    item = candidate;
  }
  // The LinkADRReq rides along only where it leaves the item room.
  const fOpts = withAdr && (!item || fits(item, withAdr.length)) ? withAdr : answers;
  const carriesAdr = fOpts === withAdr;
  // Nothing to send. An uplink's answer skips this whole call when it can tell beforehand that
  // none of these can hold (`answerMayBeDue`, src/lpwan/uplink/data.ts): keep the two in step.
  if (!item && !chance.mustAnswer && !carriesAdr) return;

  const fCnt = session.fCntDown;
  session.fCntDown = (fCnt + 1) >>> 0;
  devices.saveDownlinkCounter(device.deviceId, session.fCntDown, JSON.stringify(mac));
  const frameFor = (carry: DownlinkRecord | undefined) =>
    buildDataDownlink({
      devAddrLe: session.devAddrLe,
      nwkSKey: session.nwkSKey,
      appSKey: session.appSKey,
      fCnt,
      confirmed: carry?.confirmed ?? false,
      ack: chance.ackOwed,
      fPending: carry ? waiting > 0 : waiting + (item ? 1 : 0) > 0,
      adr: adrOn,
      fOpts,
      ...(carry ? { fPort: carry.fPort, payload: carry.payload } : {}),
    });
  const send = (windows: PlannedWindow[], payload: Buffer) => parts.transmitter.send(chance.source, chance.receiver, chance.replyTo, chance.receivedAt, windows, payload, device.devEui);

  let outcome: { window?: PlannedWindow; problems: string[] } = { problems: [] };
  if (item) {
    const carry = item;
    // Only windows whose data rate can carry the item (checked against the window actually used).
    outcome = await send(
      chance.windows.filter((w) => carry.payload.length <= maxFrmPayload(region, w.dataRate, fOpts.length)),
      frameFor(carry),
    );
  }
  const carried = outcome.window !== undefined;
  if (!carried && (chance.mustAnswer || carriesAdr)) {
    // The item could not go; an owed ACK or MAC command still does, in an empty frame.
    const again = await send(chance.windows, frameFor(undefined));
    outcome = { window: again.window, problems: [...outcome.problems, ...again.problems] };
  }
  if (item && !carried) {
    const reason = outcome.problems.join('; ') || 'no receive window available';
    const dutyCycle = outcome.problems.some((p) => p.includes('duty cycle'));
    queue.report(item, dutyCycle ? 'queued' : 'tx_error', dutyCycle ? `waiting for the duty cycle: ${reason}` : reason);
  }
  if (!outcome.window) {
    if (!item) parts.logger.warn({ deviceId: device.deviceId, problems: outcome.problems }, 'acknowledgement or MAC command not sent');
    return;
  }
  const shown = included.map((a) => a.shown);
  if (carriesAdr) {
    const pending = mac.adrPending!;
    shown.push({ cid: 'LinkADRReq', dataRate: dataRateName(region.dataRates[pending.dataRate]!), txPower: pending.txPower, nbTrans: pending.nbTrans });
    pending.sent = true;
    devices.saveMacState(device.deviceId, JSON.stringify(mac));
  }
  const macCommands = shown.length > 0 ? { macCommands: shown } : {};
  if (item && carried) queue.sent(item, fCnt, outcome.window.name, macCommands);
  else if (shown.length > 0) {
    // A downlink of MAC commands alone still shows in the device's events.
    parts.events.publish(device.deviceId, { type: 'downlink', at: parts.clock.now(), status: 'sent', fCnt, window: outcome.window.name, ...macCommands });
  }
}
