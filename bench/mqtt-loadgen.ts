// MQTT load generator child process for bench/mqtt.ts: a minimal hand-rolled MQTT 3.1.1 client over
// raw sockets (MQTT.js tops out near 35k msg/s and would measure itself). Each connection publishes
// pre-encoded PUBLISH packets, pipelined: QoS 1 keeps `window` messages in flight per connection and
// refills on every PUBACK; QoS 0 sends batches of `window` messages each followed by a PINGREQ and
// keeps 4 batches in flight: a PINGRESP means the broker has read the batch before it, so QoS 0
// counts what the broker took in, not what sits in socket buffers.
//
// A connection may also subscribe (after its CONNACK, before it counts as ready): what it receives
// is counted and QoS 1 deliveries are acknowledged, as a client SDK does. A connection without
// publish topics only subscribes (a dashboard).
//
// Protocol with the parent (IPC): parent sends {type:'start', ...Job}; child answers {type:'ready'}
// once every connection has its CONNACK (and SUBACK), then {type:'result', ...} after the run.
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { remainingLength } from '../test/mqtt/raw.js';

export interface LoadJob {
  host: string;
  port: number;
  qos: 0 | 1;
  warmupMs: number;
  durationMs: number;
  window: number;
  connections: LoadConnection[];
}

export interface LoadConnection {
  username: string | null;
  /** Topics it publishes to, in turn; none for a subscriber only. */
  topics: string[];
  /** Filters it subscribes to before the run. */
  subscriptions?: string[];
  /** The QoS it asks for them: 1 unless said. */
  subscriptionQos?: 0 | 1;
}

export interface LoadResult {
  type: 'result';
  /** Messages acknowledged (QoS 1) or written (QoS 0) inside the measured interval. */
  count: number;
  /** Over the whole run, for sanity checks. */
  totalSent: number;
  totalAcked: number;
  /** Messages subscribers received over the whole run. */
  received: number;
  /** Log-scale latency histogram: bucket i holds latencies in [1.02^i, 1.02^(i+1)) µs. */
  hist: number[];
}

const PINGREQ = Buffer.from([0xc0, 0]);
const LOG_BASE = Math.log(1.02);
const HIST_SIZE = 1200; // up to ~2e10 µs

function str(s: string): Buffer {
  const b = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(b.length);
  return Buffer.concat([len, b]);
}

export function connectPacket(clientId: string, username: string | null): Buffer {
  const flags = 0x02 | (username !== null ? 0x80 : 0); // clean session, user name
  const body = Buffer.concat([str('MQTT'), Buffer.from([4, flags, 0, 60]), str(clientId), username !== null ? str(username) : Buffer.alloc(0)]);
  return Buffer.concat([Buffer.from([0x10, ...remainingLength(body.length)]), body]);
}

export function subscribePacket(messageId: number, filter: string | string[], qos: 0 | 1): Buffer {
  const filters = typeof filter === 'string' ? [filter] : filter;
  const body = Buffer.concat([Buffer.from([messageId >> 8, messageId & 0xff]), ...filters.flatMap((f) => [str(f), Buffer.from([qos])])]);
  return Buffer.concat([Buffer.from([0x82, ...remainingLength(body.length)]), body]);
}

/** A PUBLISH with its message id at `idOffset` (patched before each send). */
function publishTemplate(topic: string, payload: string, qos: 0 | 1): { bytes: Buffer; idOffset: number } {
  const t = str(topic);
  const p = Buffer.from(payload);
  const remaining = t.length + (qos ? 2 : 0) + p.length;
  const header = Buffer.from([qos ? 0x32 : 0x30, ...remainingLength(remaining)]);
  const bytes = Buffer.concat([header, t, Buffer.alloc(qos ? 2 : 0), p]);
  return { bytes, idOffset: header.length + t.length };
}

class Connection {
  readonly socket: Socket;
  readonly templates: Array<{ bytes: Buffer; idOffset: number }>;
  readonly sentAt = new Float64Array(65536);
  nextId = 1;
  nextTemplate = 0;
  inflight = 0;
  buffered: Buffer = Buffer.alloc(0);
  connacked = false;

  readonly subscriptions: string[];
  readonly subscriptionQos: 0 | 1;

  constructor(
    readonly gen: Generator,
    readonly index: number,
    username: string | null,
    topics: string[],
    subscriptions: string[] = [],
    subscriptionQos: 0 | 1 = 1,
  ) {
    const job = gen.job;
    this.subscriptions = subscriptions;
    this.subscriptionQos = subscriptionQos;
    this.templates = [];
    // 64 distinct values per topic, cycled: every message is validated and stored on its own.
    for (let v = 0; v < 64; v++) for (const topic of topics) this.templates.push(publishTemplate(topic, `{"value":${20 + v / 4}}`, job.qos));
    this.socket = connect({ host: job.host, port: job.port, noDelay: true });
    this.socket.on('connect', () => this.socket.write(connectPacket(`lg${process.pid}-${index}`, username)));
    this.socket.on('data', (d: Buffer) => this.onData(d));
    this.socket.on('error', (err) => gen.fail(`connection ${index}: ${err.message}`));
    this.socket.on('close', () => {
      if (!gen.stopping) gen.fail(`connection ${index} closed by the broker`);
    });
  }

  /** Builds `n` publishes into one buffer (one write, pipelined). */
  batch(n: number, now: number): Buffer {
    let size = 0;
    const picks: Array<{ bytes: Buffer; idOffset: number }> = [];
    for (let i = 0; i < n; i++) {
      const t = this.templates[this.nextTemplate]!;
      this.nextTemplate = (this.nextTemplate + 1) % this.templates.length;
      picks.push(t);
      size += t.bytes.length;
    }
    const out = Buffer.allocUnsafe(size);
    let off = 0;
    for (const t of picks) {
      t.bytes.copy(out, off);
      if (this.gen.job.qos) {
        const id = this.nextId;
        this.nextId = id === 65535 ? 1 : id + 1;
        out.writeUInt16BE(id, off + t.idOffset);
        this.sentAt[id] = now;
      }
      off += t.bytes.length;
    }
    this.gen.totalSent += n;
    return out;
  }

  pings = 0;

  pumpQos0(): void {
    while (this.publishes && this.gen.running && this.pings < 4) {
      this.pings++;
      this.socket.write(Buffer.concat([this.batch(this.gen.job.window, 0), PINGREQ]));
    }
  }

  get publishes(): boolean {
    return this.templates.length > 0;
  }

  startQos1(): void {
    if (!this.publishes) return;
    this.inflight = this.gen.job.window;
    this.socket.write(this.batch(this.gen.job.window, performance.now()));
  }

  onData(d: Buffer): void {
    let buf = this.buffered.length ? Buffer.concat([this.buffered, d]) : d;
    let off = 0;
    let acks = 0;
    let pubacks: number[] | undefined;
    const now = performance.now();
    while (buf.length - off >= 2) {
      const type = buf[off]! >> 4;
      // every packet we receive has a one-byte remaining length (CONNACK, PUBACK, SUBACK, PINGRESP, small PUBLISH)
      let len = 0;
      let mul = 1;
      let i = off + 1;
      let complete = false;
      while (i < buf.length) {
        const b = buf[i++]!;
        len += (b & 0x7f) * mul;
        mul *= 128;
        if ((b & 0x80) === 0) {
          complete = true;
          break;
        }
      }
      if (!complete || buf.length - i < len) break;
      if (type === 2) {
        if (buf[i + 1] !== 0) this.gen.fail(`CONNACK ${buf[i + 1]}`);
        this.connacked = true;
        if (this.subscriptions.length > 0) this.socket.write(subscribePacket(1, this.subscriptions, this.subscriptionQos));
        else this.gen.onConnack();
      } else if (type === 9) {
        for (let g = i + 2; g < i + len; g++) if (buf[g]! > 1) this.gen.fail(`subscription refused: ${buf.subarray(i, i + len).toString('hex')}`);
        this.gen.onConnack();
      } else if (type === 3) {
        this.gen.received++;
        if ((buf[off]! & 0x06) !== 0) (pubacks ??= []).push(buf.readUInt16BE(i + 2 + buf.readUInt16BE(i)));
      } else if (type === 4) {
        const id = buf.readUInt16BE(i);
        acks++;
        this.gen.totalAcked++;
        if (this.gen.measuring) {
          this.gen.count++;
          this.gen.record(now - this.sentAt[id]!);
        }
      } else if (type === 13) {
        if (this.pings > 0) {
          // a QoS 0 batch was read by the broker
          this.pings--;
          if (this.gen.measuring) this.gen.count += this.gen.job.window;
          if (this.gen.running) this.pumpQos0();
        }
      }
      off = i + len;
    }
    this.buffered = off < buf.length ? Buffer.from(buf.subarray(off)) : Buffer.alloc(0);
    if (pubacks) {
      const out = Buffer.allocUnsafe(pubacks.length * 4);
      pubacks.forEach((id, k) => out.writeUInt32BE(0x40020000 | id, k * 4));
      this.socket.write(out);
    }
    if (acks > 0) {
      this.inflight -= acks;
      if (this.gen.running) {
        this.inflight += acks;
        this.socket.write(this.batch(acks, now));
      }
    }
  }
}

class Generator {
  readonly connections: Connection[] = [];
  readonly hist = new Array<number>(HIST_SIZE).fill(0);
  running = false;
  measuring = false;
  stopping = false;
  count = 0;
  totalSent = 0;
  totalAcked = 0;
  received = 0;
  #connacks = 0;

  constructor(readonly job: LoadJob) {}

  fail(message: string): void {
    process.send?.({ type: 'error', message });
    process.exit(1);
  }

  record(ms: number): void {
    const us = Math.max(1, ms * 1000);
    this.hist[Math.min(HIST_SIZE - 1, Math.floor(Math.log(us) / LOG_BASE))]!++;
  }

  onConnack(): void {
    if (++this.#connacks === this.job.connections.length) process.send?.({ type: 'ready' });
  }

  open(): void {
    this.job.connections.forEach((c, i) => this.connections.push(new Connection(this, i, c.username, c.topics, c.subscriptions, c.subscriptionQos)));
  }

  async run(): Promise<void> {
    this.running = true;
    for (const c of this.connections) {
      if (this.job.qos) c.startQos1();
      else c.pumpQos0();
    }
    await sleep(this.job.warmupMs);
    this.measuring = true;
    process.send?.({ type: 'measuring' });
    await sleep(this.job.durationMs);
    this.measuring = false;
    this.running = false;
    // Wait for what is in flight, then a PINGREQ round trip so QoS 0 messages were all read.
    const deadline = Date.now() + 10_000;
    while (this.connections.some((c) => c.inflight > 0 || c.pings > 0) && Date.now() < deadline) await sleep(10);
    this.stopping = true;
    for (const c of this.connections) c.socket.end(Buffer.from([0xe0, 0]));
    const result: LoadResult = { type: 'result', count: this.count, totalSent: this.totalSent, totalAcked: this.totalAcked, received: this.received, hist: this.hist };
    process.send?.(result);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

if (process.send && process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  let gen: Generator | undefined;
  process.on('message', (msg: { type: string } & Partial<LoadJob>) => {
    if (msg.type === 'start') {
      gen = new Generator(msg as unknown as LoadJob);
      gen.open();
    } else if (msg.type === 'go') {
      void gen!.run().then(() => process.disconnect?.());
    }
  });
}
