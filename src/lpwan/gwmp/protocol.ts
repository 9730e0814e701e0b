/**
 * The Semtech UDP packet forwarder protocol, version 2 (and 1) (docs/lpwan.md, "Packet forwarder"):
 * datagram layouts and the JSON of uplinks (`rxpk`), gateway status (`stat`) and downlinks (`txpk`).
 * Pure functions: the door in ./door.ts owns the socket.
 */
import { isJsonObject } from '../../core/json.js';

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
  | { type: 'tx-ack'; version: number; token: Buffer; gatewayEui: string; error: string | undefined };

export interface Rxpk {
  time?: unknown;
  tmst?: unknown;
  freq?: unknown;
  stat?: unknown;
  modu?: unknown;
  datr?: unknown;
  codr?: unknown;
  rssi?: unknown;
  lsnr?: unknown;
  size?: unknown;
  data?: unknown;
  [key: string]: unknown;
}

export interface PushDataBody {
  rxpk: Rxpk[];
  stat: Record<string, unknown> | undefined;
}

/** Why a datagram was dropped; each one is a metrics label. */
export type DropReason = 'too-short' | 'unknown-version' | 'unknown-type' | 'bad-json';

export type ParseResult = { ok: true; datagram: Datagram } | { ok: false; reason: DropReason; version?: number; token?: Buffer; type?: number };

function jsonText(bytes: Buffer): string {
  // Some forwarders end the JSON with NUL bytes or whitespace.
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0 || bytes[end - 1] === 0x20 || bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d)) end--;
  return bytes.toString('utf8', 0, end);
}

export function parseDatagram(bytes: Buffer): ParseResult {
  if (bytes.length < 4) return { ok: false, reason: 'too-short' };
  const version = bytes[0]!;
  const token = Buffer.from(bytes.subarray(1, 3));
  const type = bytes[3]!;
  if (version !== 1 && version !== 2) return { ok: false, reason: 'unknown-version', version };
  if (type !== PacketType.PushData && type !== PacketType.PullData && type !== PacketType.TxAck) return { ok: false, reason: 'unknown-type', version, type };
  if (bytes.length < 12) return { ok: false, reason: 'too-short', version, type };
  const gatewayEui = bytes.toString('hex', 4, 12).toUpperCase();
  if (type === PacketType.PullData) return { ok: true, datagram: { type: 'pull-data', version, token, gatewayEui } };
  const text = jsonText(bytes.subarray(12));
  if (type === PacketType.TxAck) {
    if (text.trim() === '') return { ok: true, datagram: { type: 'tx-ack', version, token, gatewayEui, error: undefined } };
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      // An unreadable TX_ACK still answers the PULL_RESP; what it says is unknown, so it counts as an error.
      return { ok: true, datagram: { type: 'tx-ack', version, token, gatewayEui, error: 'UNREADABLE_TX_ACK' } };
    }
    const ack = isJsonObject(parsed) && isJsonObject(parsed.txpk_ack) ? parsed.txpk_ack : undefined;
    const error = ack && typeof ack.error === 'string' ? ack.error : undefined;
    return { ok: true, datagram: { type: 'tx-ack', version, token, gatewayEui, error: error === undefined || error === 'NONE' ? undefined : error } };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'bad-json', version, token, type };
  }
  if (!isJsonObject(parsed)) return { ok: false, reason: 'bad-json', version, token, type };
  const rxpk = Array.isArray(parsed.rxpk) ? (parsed.rxpk.filter(isJsonObject) as Rxpk[]) : [];
  const stat = isJsonObject(parsed.stat) ? parsed.stat : undefined;
  return { ok: true, datagram: { type: 'push-data', version, token, gatewayEui, body: { rxpk, stat } } };
}

/** PUSH_ACK / PULL_ACK: the version and token of the datagram answered, exactly as received. */
export function ackFor(version: number, token: Buffer, type: typeof PacketType.PushAck | typeof PacketType.PullAck): Buffer {
  return Buffer.from([version, token[0]!, token[1]!, type]);
}

export type RxpkReading =
  | { ok: true; payload: Buffer; tmst: number | undefined; frequency: number; dataRate: string; codingRate: string | undefined; rssi: number | undefined; snr: number | undefined; time: string | undefined }
  | { ok: false; reason: 'crc' | 'not-lora' | 'bad-data' | 'bad-fields' };

/** One received packet of a PUSH_DATA, checked field by field. */
export function readRxpk(rxpk: Rxpk): RxpkReading {
  if (rxpk.stat !== undefined && rxpk.stat !== 1) return { ok: false, reason: 'crc' };
  if (typeof rxpk.modu === 'string' && rxpk.modu.toUpperCase() !== 'LORA') return { ok: false, reason: 'not-lora' };
  if (typeof rxpk.datr !== 'string' || typeof rxpk.freq !== 'number' || !Number.isFinite(rxpk.freq)) return { ok: false, reason: 'bad-fields' };
  if (typeof rxpk.data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(rxpk.data)) return { ok: false, reason: 'bad-data' };
  const payload = Buffer.from(rxpk.data, 'base64');
  if (payload.length === 0) return { ok: false, reason: 'bad-data' };
  const tmst = typeof rxpk.tmst === 'number' && Number.isInteger(rxpk.tmst) && rxpk.tmst >= 0 && rxpk.tmst <= 0xffffffff ? rxpk.tmst : undefined;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  return {
    ok: true,
    payload,
    tmst,
    frequency: Math.round(rxpk.freq * 1e6),
    dataRate: rxpk.datr.toUpperCase(),
    codingRate: typeof rxpk.codr === 'string' ? rxpk.codr : undefined,
    rssi: num(rxpk.rssi),
    snr: num(rxpk.lsnr),
    time: typeof rxpk.time === 'string' ? rxpk.time : undefined,
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
