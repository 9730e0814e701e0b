// A packet forwarder simulator: speaks GWMP v2 over UDP on loopback like lora_pkt_fwd does.
import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';

export interface ReceivedDatagram {
  bytes: Buffer;
  at: number;
}

export interface RxpkInput {
  payload: Buffer;
  tmst?: number;
  freq?: number;
  datr?: string;
  rssi?: number;
  lsnr?: number;
  time?: string;
}

export class ForwarderSimulator {
  readonly eui: Buffer;
  readonly #socket: Socket;
  readonly received: ReceivedDatagram[] = [];
  #waiters: Array<{ match: (d: Buffer) => boolean; resolve: (d: Buffer) => void }> = [];
  #serverPort = 0;
  /** Whether TX_ACK answers PULL_RESP (and with which error). */
  txAck: string | null | false = null;

  constructor(euiHex: string) {
    this.eui = Buffer.from(euiHex, 'hex');
    this.#socket = createSocket('udp4');
    this.#socket.on('message', (msg) => {
      this.received.push({ bytes: msg, at: Date.now() });
      if (msg[3] === 0x03 && this.txAck !== false) {
        const body = this.txAck ? Buffer.from(JSON.stringify({ txpk_ack: { error: this.txAck } })) : Buffer.alloc(0);
        this.send(Buffer.concat([Buffer.from([2, msg[1]!, msg[2]!, 0x05]), this.eui, body]));
      }
      this.#waiters = this.#waiters.filter((w) => {
        if (!w.match(msg)) return true;
        w.resolve(msg);
        return false;
      });
    });
  }

  async connect(serverPort: number): Promise<void> {
    this.#serverPort = serverPort;
    await new Promise<void>((resolve) => this.#socket.bind(0, '127.0.0.1', () => resolve()));
  }

  send(bytes: Buffer): void {
    this.#socket.send(bytes, this.#serverPort, '127.0.0.1');
  }

  /** Resolves with the first datagram (already received or to come) that matches. */
  waitFor(match: (d: Buffer) => boolean, timeoutMs = 10_000, after = 0): Promise<Buffer> {
    const seen = this.received.slice(after).find((r) => match(r.bytes));
    if (seen) return Promise.resolve(seen.bytes);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for a datagram')), timeoutMs);
      this.#waiters.push({
        match,
        resolve: (d) => {
          clearTimeout(timer);
          resolve(d);
        },
      });
    });
  }

  async pull(): Promise<void> {
    const token = randomBytes(2);
    this.send(Buffer.concat([Buffer.from([2, token[0]!, token[1]!, 0x02]), this.eui]));
    await this.waitFor((d) => d[3] === 0x04 && d[1] === token[0] && d[2] === token[1]);
  }

  /** Sends a PUSH_DATA with these packets; resolves on its PUSH_ACK. */
  async push(packets: RxpkInput[], stat?: Record<string, unknown>): Promise<void> {
    const token = randomBytes(2);
    const rxpk = packets.map((p) => ({
      ...(p.time ? { time: p.time } : {}),
      tmst: p.tmst ?? 1_000_000,
      chan: 0,
      rfch: 0,
      freq: p.freq ?? 868.1,
      stat: 1,
      modu: 'LORA',
      datr: p.datr ?? 'SF7BW125',
      codr: '4/5',
      rssi: p.rssi ?? -60,
      lsnr: p.lsnr ?? 7.5,
      size: p.payload.length,
      data: p.payload.toString('base64'),
    }));
    const json = JSON.stringify(stat ? { rxpk, stat } : { rxpk });
    this.send(Buffer.concat([Buffer.from([2, token[0]!, token[1]!, 0x00]), this.eui, Buffer.from(json)]));
    await this.waitFor((d) => d[3] === 0x01 && d[1] === token[0] && d[2] === token[1]);
  }

  pullResps(): Array<{ token: Buffer; txpk: Record<string, any> }> {
    return this.received.filter((r) => r.bytes[3] === 0x03).map((r) => ({ token: r.bytes.subarray(1, 3), txpk: JSON.parse(r.bytes.subarray(4).toString()).txpk }));
  }

  #closed = false;

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#socket.close();
  }
}
