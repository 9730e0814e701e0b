/**
 * The LoRa Basics Station LNS protocol (docs/lpwan.md, "Connecting a Basics Station gateway"):
 * the JSON messages a station sends, read field by field into typed values (nothing else is
 * kept), the uplink's PHYPayload rebuilt from its fields, and the messages the door sends.
 * Pure functions: the door in ./door.ts owns the sockets.
 */
import { isJsonObject, jsonNestingOver } from '../../core/json.js';
import { parseEui } from './eui.js';

/** The station's own clock for an uplink: `xtime` kept as decimal text (it can exceed 2^53). */
export interface UpInfo {
  rctx: number;
  xtime: string | undefined;
  rssi: number | undefined;
  snr: number | undefined;
}

export type StationMessage =
  | { msgtype: 'version'; station: string; protocol: number | undefined; features: string }
  | { msgtype: 'updf' | 'jreq' | 'propdf'; payload: Buffer; dataRate: number; frequency: number; upinfo: UpInfo; devEui: string | undefined }
  | { msgtype: 'dntxed'; diid: number; xtime: string | undefined }
  | { msgtype: 'timesync'; txtime: number }
  | { msgtype: 'unknown' };

export type ReadResult = { ok: true; message: StationMessage } | { ok: false; reason: 'too-deep' | 'bad-json' | 'bad-fields' };

/** Nesting a station's messages have at most (`updf` → `upinfo`); deeper is refused before JSON.parse. */
const MAX_DEPTH = 4;
const int = (v: unknown, min: number, max: number): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : undefined);
const finite = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const hexBytes = (v: unknown, maxBytes: number): Buffer | undefined => (typeof v === 'string' && v.length <= maxBytes * 2 && /^([0-9A-Fa-f]{2})*$/.test(v) ? Buffer.from(v, 'hex') : undefined);

function readUpInfo(v: unknown): UpInfo {
  const u = isJsonObject(v) ? v : {};
  return { rctx: int(u.rctx, 0, 2 ** 31) ?? 0, xtime: typeof u.xtime === 'string' && /^\d{1,20}$/.test(u.xtime) ? u.xtime : undefined, rssi: finite(u.rssi), snr: finite(u.snr) };
}

/** EUI bytes as sent on the air: least significant byte first. */
function onAir(eui: string): Buffer {
  return Buffer.from(eui, 'hex').reverse();
}

/** The frame's PHYPayload from a `updf`'s fields (LoRaWAN 1.0.x layout). */
function updfPayload(m: Record<string, unknown>): Buffer | undefined {
  const mhdr = int(m.MHdr, 0, 255);
  const devAddr = int(m.DevAddr, -(2 ** 31), 2 ** 32 - 1);
  const fCtrl = int(m.FCtrl, 0, 255);
  const fCnt = int(m.FCnt, 0, 65535);
  const fPort = int(m.FPort, -1, 255);
  const mic = int(m.MIC, -(2 ** 31), 2 ** 32 - 1);
  const fOpts = hexBytes(m.FOpts ?? '', 15);
  const frm = hexBytes(m.FRMPayload ?? '', 242);
  if (mhdr === undefined || devAddr === undefined || fCtrl === undefined || fCnt === undefined || fPort === undefined || mic === undefined || !fOpts || !frm) return undefined;
  if (fPort < 0 && frm.length > 0) return undefined;
  const head = Buffer.alloc(8);
  head[0] = mhdr;
  head.writeUInt32LE(devAddr >>> 0, 1);
  head[5] = fCtrl;
  head.writeUInt16LE(fCnt, 6);
  const tail = Buffer.alloc(4);
  tail.writeUInt32LE(mic >>> 0, 0);
  return Buffer.concat([head, fOpts, fPort >= 0 ? Buffer.from([fPort]) : Buffer.alloc(0), frm, tail]);
}

function jreqPayload(m: Record<string, unknown>): { payload: Buffer; devEui: string } | undefined {
  const mhdr = int(m.MHdr, 0, 255);
  const joinEui = parseEui(m.JoinEui);
  const devEui = parseEui(m.DevEui);
  const devNonce = int(m.DevNonce, 0, 65535);
  const mic = int(m.MIC, -(2 ** 31), 2 ** 32 - 1);
  if (mhdr === undefined || !joinEui || !devEui || devNonce === undefined || mic === undefined) return undefined;
  const payload = Buffer.alloc(23);
  payload[0] = mhdr;
  onAir(joinEui).copy(payload, 1);
  onAir(devEui).copy(payload, 9);
  payload.writeUInt16LE(devNonce, 17);
  payload.writeUInt32LE(mic >>> 0, 19);
  return { payload, devEui };
}

/** `xtime` and `gpstime` are 64-bit counters: kept exact as text instead of rounded to a double. */
function quoteCounters(text: string): string {
  return text.replace(/"(xtime|gpstime)"(\s*):(\s*)(\d+)/g, '"$1"$2:$3"$4"');
}

/** One text message from a station, read and checked. */
export function readStationMessage(text: string): ReadResult {
  if (jsonNestingOver(text, MAX_DEPTH)) return { ok: false, reason: 'too-deep' };
  let m: unknown;
  try {
    m = JSON.parse(quoteCounters(text));
  } catch {
    return { ok: false, reason: 'bad-json' };
  }
  if (!isJsonObject(m) || typeof m.msgtype !== 'string') return { ok: false, reason: 'bad-json' };
  switch (m.msgtype) {
    case 'version':
      return {
        ok: true,
        message: { msgtype: 'version', station: typeof m.station === 'string' ? m.station.slice(0, 64) : '', protocol: int(m.protocol, 0, 1000), features: typeof m.features === 'string' ? m.features.slice(0, 128) : '' },
      };
    case 'updf':
    case 'jreq':
    case 'propdf': {
      const dataRate = int(m.DR, 0, 15);
      const frequency = int(m.Freq, 100_000_000, 10_000_000_000);
      if (dataRate === undefined || frequency === undefined) return { ok: false, reason: 'bad-fields' };
      const upinfo = readUpInfo(m.upinfo);
      if (m.msgtype === 'updf') {
        const payload = updfPayload(m);
        return payload ? { ok: true, message: { msgtype: 'updf', payload, dataRate, frequency, upinfo, devEui: undefined } } : { ok: false, reason: 'bad-fields' };
      }
      if (m.msgtype === 'jreq') {
        const join = jreqPayload(m);
        return join ? { ok: true, message: { msgtype: 'jreq', payload: join.payload, dataRate, frequency, upinfo, devEui: join.devEui } } : { ok: false, reason: 'bad-fields' };
      }
      const payload = hexBytes(m.FRMPayload, 255);
      return payload && payload.length > 0 ? { ok: true, message: { msgtype: 'propdf', payload, dataRate, frequency, upinfo, devEui: undefined } } : { ok: false, reason: 'bad-fields' };
    }
    case 'dntxed': {
      const diid = int(m.diid, 0, Number.MAX_SAFE_INTEGER);
      if (diid === undefined) return { ok: false, reason: 'bad-fields' };
      return { ok: true, message: { msgtype: 'dntxed', diid, xtime: typeof m.xtime === 'string' && /^\d{1,20}$/.test(m.xtime) ? m.xtime : undefined } };
    }
    case 'timesync': {
      const txtime = finite(m.txtime);
      return txtime === undefined ? { ok: false, reason: 'bad-fields' } : { ok: true, message: { msgtype: 'timesync', txtime } };
    }
    default:
      return { ok: true, message: { msgtype: 'unknown' } };
  }
}

/** JSON text of an outgoing message whose `xtime` (decimal text) must go out as a number. */
export function stationJson(message: Record<string, unknown>): string {
  return JSON.stringify(message).replace(/"xtime":"(\d+)"/, '"xtime":$1');
}

/** GPS time in µs (since 1980-01-06, 18 leap seconds ahead of UTC since 2017) for `timesync`. */
export function gpsTimeMicros(unixMs: number): number {
  return Math.round((unixMs - 315_964_800_000 + 18_000) * 1000);
}

/** µs between two `xtime`s of the same session (their low 48 bits count µs). */
export function xtimeDeltaMicros(later: string, earlier: string): number {
  return Number(BigInt(later) - BigInt(earlier));
}
