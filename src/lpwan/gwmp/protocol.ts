/**
 * The Semtech UDP packet forwarder protocol, version 2 (and 1) (docs/lpwan.md, "Packet forwarder"):
 * datagram layouts and the JSON of uplinks (`rxpk`), gateway status (`stat`) and downlinks (`txpk`).
 * Pure functions: the door in ./door.ts owns the socket.
 */
import { isJsonObject, jsonNestingOver } from '../../core/json.js';

export const PacketType = {
  PushData: 0x00,
  PushAck: 0x01,
  PullData: 0x02,
  PullResp: 0x03,
  PullAck: 0x04,
  TxAck: 0x05,
} as const;

export type Datagram =
  | { type: 'push-data'; version: number; token: Buffer; gatewayEui: string; body: PushDataBody }
  | { type: 'pull-data'; version: number; token: Buffer; gatewayEui: string }
  | { type: 'tx-ack'; version: number; token: Buffer; gatewayEui: string; error: TxAckError | undefined };

/**
 * A gateway's status report, as kept: only the fields the protocol defines (plus the three text
 * fields common forwarders add), each of its type, text cut short. Anything else in the datagram's
 * `stat` is dropped, so nothing a sender made up is kept, shown in /healthz or handed to a client.
 */
export interface GatewayStat {
  time?: string;
  lati?: number;
  long?: number;
  alti?: number;
  rxnb?: number;
  rxok?: number;
  rxfw?: number;
  ackr?: number;
  dwnb?: number;
  txnb?: number;
  temp?: number;
  pfrm?: string;
  mail?: string;
  desc?: string;
}

export interface PushDataBody {
  /** Each received packet, read field by field (./protocol.ts readRxpk); refused ones name why. */
  packets: RxpkReading[];
  stat: GatewayStat | undefined;
  /** Packets past MAX_RXPK_PER_DATAGRAM, not read. */
  packetsOverLimit: number;
}

/** Why a datagram was dropped; each one is a metrics label. */
export type DropReason = 'too-short' | 'too-large' | 'too-deep' | 'unknown-version' | 'unknown-type' | 'bad-json';

export type ParseResult = { ok: true; datagram: Datagram } | { ok: false; reason: DropReason; version?: number; token?: Buffer; type?: number };

/** Default of `radio.gwmp.maxDatagramBytes`: a busy 8-channel gateway's PUSH_DATA is a few KiB. */
export const DEFAULT_MAX_DATAGRAM_BYTES = 32 * 1024;
/**
 * Nesting the protocol's JSON has at most (`{"rxpk":[{"rsig":[{…}]}]}` is 4); anything deeper is
 * refused before JSON.parse, so no nested junk reaches recursive code (JSON.stringify in /healthz).
 */
export const MAX_JSON_DEPTH = 6;
/** A forwarder sends at most 255 packets per PUSH_DATA (its NB_PKT_MAX); more are not read. */
export const MAX_RXPK_PER_DATAGRAM = 255;
/** A LoRa PHYPayload is at most 255 bytes: 340 characters of base64. */
const MAX_DATA_CHARS = 344;
/** Text fields of `stat` and `rxpk.time` kept up to this many characters. */
const MAX_TEXT_CHARS = 64;

/** The `txpk_ack.error` values the protocol defines; anything else is kept as UNKNOWN (a bounded metrics label). */
const TX_ACK_ERRORS = ['TOO_LATE', 'TOO_EARLY', 'COLLISION_PACKET', 'COLLISION_BEACON', 'TX_FREQ', 'TX_POWER', 'GPS_UNLOCKED', 'UNREADABLE_TX_ACK', 'UNKNOWN'] as const;
export type TxAckError = (typeof TX_ACK_ERRORS)[number];

function jsonText(bytes: Buffer): string {
  // Some forwarders end the JSON with NUL bytes or whitespace.
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0 || bytes[end - 1] === 0x20 || bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d)) end--;
  return bytes.toString('utf8', 0, end);
}

/** JSON of a PUSH_DATA or TX_ACK, or why not: nesting is counted before JSON.parse sees it. */
function readJson(text: string): { ok: true; value: unknown } | { ok: false; reason: 'too-deep' | 'bad-json' } {
  if (jsonNestingOver(text, MAX_JSON_DEPTH)) return { ok: false, reason: 'too-deep' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, reason: 'bad-json' };
  }
}

const finite = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const shortText = (v: unknown): string | undefined => (typeof v === 'string' ? v.slice(0, MAX_TEXT_CHARS) : undefined);

const STAT_NUMBERS = ['lati', 'long', 'alti', 'rxnb', 'rxok', 'rxfw', 'ackr', 'dwnb', 'txnb', 'temp'] as const;
const STAT_TEXTS = ['time', 'pfrm', 'mail', 'desc'] as const;

/** The known fields of a `stat` object, typed; undefined when it is not an object. */
export function readStat(value: unknown): GatewayStat | undefined {
  if (!isJsonObject(value)) return undefined;
  const stat: GatewayStat = {};
  for (const key of STAT_TEXTS) {
    const text = shortText(value[key]);
    if (text !== undefined) stat[key] = text;
  }
  for (const key of STAT_NUMBERS) {
    const n = finite(value[key]);
    if (n !== undefined) stat[key] = n;
  }
  return stat;
}

export function parseDatagram(bytes: Buffer, maxBytes = DEFAULT_MAX_DATAGRAM_BYTES): ParseResult {
  if (bytes.length < 4) return { ok: false, reason: 'too-short' };
  const version = bytes[0]!;
  const token = Buffer.from(bytes.subarray(1, 3));
  const type = bytes[3]!;
  if (version !== 1 && version !== 2) return { ok: false, reason: 'unknown-version', version };
  if (type !== PacketType.PushData && type !== PacketType.PullData && type !== PacketType.TxAck) return { ok: false, reason: 'unknown-type', version, type };
  if (bytes.length < 12) return { ok: false, reason: 'too-short', version, type };
  // Refused before any decoding: the cost of a datagram stays bounded by the limit, not by the sender.
  if (bytes.length > maxBytes) return { ok: false, reason: 'too-large', version, type };
  const gatewayEui = bytes.toString('hex', 4, 12).toUpperCase();
  if (type === PacketType.PullData) return { ok: true, datagram: { type: 'pull-data', version, token, gatewayEui } };
  const text = jsonText(bytes.subarray(12));
  if (type === PacketType.TxAck) {
    if (text.trim() === '') return { ok: true, datagram: { type: 'tx-ack', version, token, gatewayEui, error: undefined } };
    const json = readJson(text);
    // An unreadable TX_ACK still answers the PULL_RESP; what it says is unknown, so it counts as an error.
    if (!json.ok) return { ok: true, datagram: { type: 'tx-ack', version, token, gatewayEui, error: 'UNREADABLE_TX_ACK' } };
    const ack = isJsonObject(json.value) && isJsonObject(json.value.txpk_ack) ? json.value.txpk_ack : undefined;
    const said = ack && typeof ack.error === 'string' ? ack.error : undefined;
    const error: TxAckError | undefined = said === undefined || said === 'NONE' ? undefined : ((TX_ACK_ERRORS as readonly string[]).includes(said) ? (said as TxAckError) : 'UNKNOWN');
    return { ok: true, datagram: { type: 'tx-ack', version, token, gatewayEui, error } };
  }
  const json = readJson(text);
  if (!json.ok) return { ok: false, reason: json.reason, version, token, type };
  const parsed = json.value;
  if (!isJsonObject(parsed)) return { ok: false, reason: 'bad-json', version, token, type };
  const list = Array.isArray(parsed.rxpk) ? parsed.rxpk : [];
  const packets = list.slice(0, MAX_RXPK_PER_DATAGRAM).map(readRxpk);
  const body: PushDataBody = { packets, stat: readStat(parsed.stat), packetsOverLimit: Math.max(0, list.length - MAX_RXPK_PER_DATAGRAM) };
  return { ok: true, datagram: { type: 'push-data', version, token, gatewayEui, body } };
}

/** PUSH_ACK / PULL_ACK: the version and token of the datagram answered, exactly as received. */
export function ackFor(version: number, token: Buffer, type: typeof PacketType.PushAck | typeof PacketType.PullAck): Buffer {
  return Buffer.from([version, token[0]!, token[1]!, type]);
}

export type RxpkReading =
  | { ok: true; payload: Buffer; tmst: number | undefined; frequency: number; dataRate: string; codingRate: string | undefined; rssi: number | undefined; snr: number | undefined; time: string | undefined }
  | { ok: false; reason: 'crc' | 'not-lora' | 'bad-data' | 'bad-fields' };

/** One received packet of a PUSH_DATA, checked field by field; only the fields read are kept. */
export function readRxpk(rxpk: unknown): RxpkReading {
  if (!isJsonObject(rxpk)) return { ok: false, reason: 'bad-fields' };
  if (rxpk.stat !== undefined && rxpk.stat !== 1) return { ok: false, reason: 'crc' };
  if (typeof rxpk.modu === 'string' && rxpk.modu.toUpperCase() !== 'LORA') return { ok: false, reason: 'not-lora' };
  if (typeof rxpk.datr !== 'string' || !/^SF\d{1,2}BW\d{2,3}$/i.test(rxpk.datr)) return { ok: false, reason: 'bad-fields' };
  // LoRa bands lie between 137 MHz and 2.5 GHz; anything else is not a frequency a radio heard.
  if (typeof rxpk.freq !== 'number' || !(rxpk.freq >= 100 && rxpk.freq < 10_000)) return { ok: false, reason: 'bad-fields' };
  if (typeof rxpk.data !== 'string' || rxpk.data.length > MAX_DATA_CHARS || !/^[A-Za-z0-9+/]*={0,2}$/.test(rxpk.data)) return { ok: false, reason: 'bad-data' };
  const payload = Buffer.from(rxpk.data, 'base64');
  if (payload.length === 0) return { ok: false, reason: 'bad-data' };
  const tmst = typeof rxpk.tmst === 'number' && Number.isInteger(rxpk.tmst) && rxpk.tmst >= 0 && rxpk.tmst <= 0xffffffff ? rxpk.tmst : undefined;
  const codr = typeof rxpk.codr === 'string' && /^(4\/[5-8]|OFF)$/i.test(rxpk.codr) ? rxpk.codr : undefined;
  return {
    ok: true,
    payload,
    tmst,
    frequency: Math.round(rxpk.freq * 1e6),
    dataRate: rxpk.datr.toUpperCase(),
    codingRate: codr,
    rssi: finite(rxpk.rssi),
    snr: finite(rxpk.lsnr),
    time: shortText(rxpk.time),
  };
}

export interface Txpk {
  /** Concentrator time to send at (Class A), or absent with `imme` (Class C: send at once). */
  tmst?: number;
  imme?: boolean;
  freq: number;
  rfch: number;
  powe: number;
  modu: 'LORA';
  datr: string;
  codr: string;
  ipol: boolean;
  size: number;
  data: string;
}

/** PULL_RESP: version, a fresh token the gateway echoes in TX_ACK, then `{"txpk":{…}}` (no EUI). */
export function pullResp(version: number, token: Buffer, txpk: Txpk): Buffer {
  return Buffer.concat([Buffer.from([version, token[0]!, token[1]!, PacketType.PullResp]), Buffer.from(JSON.stringify({ txpk }))]);
}
