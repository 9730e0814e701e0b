// A LoRa Basics Station simulator: speaks the LNS protocol over a WebSocket like the station
// binary does (discovery, version, updf/jreq built from a PHYPayload's fields, dntxed, timesync).
import WebSocket, { type ClientOptions } from 'ws';

export interface StationMessage {
  msgtype: string;
  [key: string]: any;
}

/** Signed 32-bit, as Basics Station writes DevAddr and MIC. */
const int32 = (b: Buffer, offset: number) => b.readInt32LE(offset);
const dashed = (bytesLe: Buffer) => Buffer.from(bytesLe).reverse().toString('hex').match(/../g)!.join('-');

/** The `updf` fields of a LoRaWAN data frame. */
export function updfFields(phy: Buffer): Record<string, unknown> {
  const fOptsLen = phy[5]! & 0x0f;
  const macEnd = phy.length - 4;
  const afterFOpts = 8 + fOptsLen;
  const hasPort = macEnd > afterFOpts;
  return {
    MHdr: phy[0],
    DevAddr: int32(phy, 1),
    FCtrl: phy[5],
    FCnt: phy.readUInt16LE(6),
    FOpts: phy.subarray(8, afterFOpts).toString('hex'),
    FPort: hasPort ? phy[afterFOpts] : -1,
    FRMPayload: hasPort ? phy.subarray(afterFOpts + 1, macEnd).toString('hex') : '',
    MIC: int32(phy, macEnd),
  };
}

/** The `jreq` fields of a join request. */
export function jreqFields(phy: Buffer): Record<string, unknown> {
  return { MHdr: phy[0], JoinEui: dashed(phy.subarray(1, 9)), DevEui: dashed(phy.subarray(9, 17)), DevNonce: phy.readUInt16LE(17), MIC: int32(phy, 19) };
}

export class StationSimulator {
  readonly received: StationMessage[] = [];
  /** Raw text of every message, to check numbers JSON.parse would round (xtime). */
  readonly raw: string[] = [];
  #waiters: Array<{ match: (m: StationMessage) => boolean; resolve: (m: StationMessage) => void }> = [];
  #ws: WebSocket | undefined;

  static async open(url: string, options: ClientOptions = {}): Promise<StationSimulator> {
    const s = new StationSimulator();
    const ws = new WebSocket(url, options);
    s.#ws = ws;
    ws.on('message', (data) => {
      const text = data.toString();
      s.raw.push(text);
      const m = JSON.parse(text) as StationMessage;
      s.received.push(m);
      s.#waiters = s.#waiters.filter((w) => {
        if (!w.match(m)) return true;
        w.resolve(m);
        return false;
      });
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })));
    });
    return s;
  }

  get ws(): WebSocket {
    return this.#ws!;
  }

  send(message: Record<string, unknown> | string): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  waitFor(match: (m: StationMessage) => boolean, timeoutMs = 8000): Promise<StationMessage> {
    const seen = this.received.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for a station message')), timeoutMs);
      this.#waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  /** `version` → the server's `router_config`. */
  async hello(): Promise<StationMessage> {
    this.send({ msgtype: 'version', station: '2.0.6(rpi/std)', firmware: null, package: null, model: 'rpi', protocol: 2, features: 'rmtsh gps' });
    return this.waitFor((m) => m.msgtype === 'router_config');
  }

  /** An uplink as `updf` or `jreq`; `xtime` given as decimal text so it can exceed 2^53. */
  uplink(phy: Buffer, o: { dr?: number; freq?: number; xtime: string; rctx?: number; rssi?: number; snr?: number }): void {
    const fields = (phy[0]! & 0xe0) === 0 ? { msgtype: 'jreq', ...jreqFields(phy) } : { msgtype: 'updf', ...updfFields(phy) };
    const upinfo = `{"rctx":${o.rctx ?? 0},"xtime":${o.xtime},"gpstime":0,"fts":-1,"rssi":${o.rssi ?? -50},"snr":${o.snr ?? 9.5},"rxtime":${Date.now() / 1000}}`;
    const body = JSON.stringify({ ...fields, DR: o.dr ?? 5, Freq: o.freq ?? 868_100_000, RefTime: 0 });
    this.send(`${body.slice(0, -1)},"upinfo":${upinfo}}`);
  }

  close(): void {
    this.#ws?.terminate();
  }

  closed(): Promise<number> {
    const ws = this.ws;
    if (ws.readyState === WebSocket.CLOSED) return Promise.resolve(-1);
    return new Promise((resolve) => ws.once('close', (code) => resolve(code)));
  }
}

/** `/router-info`: asks where the station's data socket is. */
export async function discover(url: string, router: unknown, options: ClientOptions = {}): Promise<Record<string, any>> {
  const s = await StationSimulator.open(url, options);
  s.send({ router });
  const answer = await s.waitFor(() => true);
  s.close();
  return answer;
}
