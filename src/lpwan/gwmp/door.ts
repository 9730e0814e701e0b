import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../core/time.js';
import type { Logger } from '../../ops/logger.js';
import type { Counter, MetricsRegistry } from '../../ops/metrics.js';
import { transmitInOrder, type RadioCapabilities, type RadioFrame, type RadioSource, type RadioSourceHealth, type RadioTransmission, type TransmitResult, type TransmitWindow } from '../radio.js';
import { ackFor, PacketType, parseDatagram, pullResp, readRxpk, type Datagram } from './protocol.js';

/** What the door keeps with a frame so a downlink can answer it through the same gateway. */
export interface GwmpReplyTo {
  gatewayEui: string;
  /** Concentrator µs counter at the end of the uplink; undefined if the forwarder sent none. */
  tmst: number | undefined;
}

interface GatewayState {
  eui: string;
  version: number;
  /** Where PULL_RESP goes: the source of the most recent PULL_DATA (the forwarder's NAT hole). */
  downlink: { address: string; port: number } | undefined;
  lastPullAt: number | undefined;
  lastSeenAt: number;
  stat: Record<string, unknown> | undefined;
  uplinks: number;
  downlinks: number;
  txErrors: number;
}

interface PendingTx {
  gatewayEui: string;
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export interface GwmpDoorOptions {
  port: number;
  host?: string;
  clock: Clock;
  logger: Logger;
  metrics?: MetricsRegistry;
  /** A gateway without a PULL_DATA for this long gets no downlinks (ms). */
  gatewayTimeoutMs?: number;
  /** How long to wait for a TX_ACK before taking a PULL_RESP as accepted (forwarders that send none). */
  txAckTimeoutMs?: number;
}

/** Refusal of a transmission by the gateway (TX_ACK error) or by the door (no downlink path). */
export class GwmpTransmitError extends Error {
  override name = 'GwmpTransmitError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The packet forwarder door (Semtech UDP): answers PUSH_DATA and PULL_DATA at once, turns received
 * packets into radio frames (one per gateway copy: the network server merges copies from every
 * source), keeps each gateway's status and downlink address, and sends PULL_RESP downlinks matched
 * to their TX_ACK by token.
 */
export class GwmpDoor implements RadioSource {
  readonly name = 'gwmp';
  readonly capabilities: RadioCapabilities = { transmit: true, rx1: true, immediate: true };
  readonly #options: Required<Omit<GwmpDoorOptions, 'metrics' | 'host'>> & { host: string };
  readonly #gateways = new Map<string, GatewayState>();
  readonly #pending = new Map<string, PendingTx>();
  readonly #listeners: Array<(frame: RadioFrame) => void> = [];
  readonly #datagrams: Counter | undefined;
  readonly #dropped: Counter | undefined;
  readonly #txResults: Counter | undefined;
  #socket: Socket | undefined;
  #port = 0;
  #framesReceived = 0;
  #framesSent = 0;
  #errors = 0;

  constructor(options: GwmpDoorOptions) {
    this.#options = {
      port: options.port,
      host: options.host ?? '0.0.0.0',
      clock: options.clock,
      logger: options.logger,
      gatewayTimeoutMs: options.gatewayTimeoutMs ?? 60_000,
      txAckTimeoutMs: options.txAckTimeoutMs ?? 800,
    };
    const m = options.metrics;
    this.#datagrams = m?.counter('outpost_gwmp_datagrams_total', 'Packet forwarder datagrams received, by type');
    this.#dropped = m?.counter('outpost_gwmp_dropped_total', 'Packet forwarder datagrams and packets dropped, by reason');
    this.#txResults = m?.counter('outpost_gwmp_tx_total', 'Downlinks handed to gateways, by TX_ACK result');
    m?.gauge('outpost_gwmp_gateways', 'Gateways that sent a PULL_DATA recently (can take downlinks)', () => this.#onlineGateways().length);
  }

  /** The bound UDP port (after start). */
  get port(): number {
    return this.#port;
  }

  onFrame(listener: (frame: RadioFrame) => void): void {
    this.#listeners.push(listener);
  }

  /** Gateways online: each may deliver a copy of one uplink. */
  receivers(): number {
    return Math.max(1, this.#onlineGateways().length);
  }

  start(): Promise<void> {
    // Several forwarders flushing at once arrive as a burst; the kernel's default receive buffer
    // (about 200 KB) drops datagrams before the loop reads them, so ask for more (capped by the OS).
    const socket = createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024 });
    this.#socket = socket;
    socket.on('message', (msg, rinfo) => {
      try {
        this.#onDatagram(msg, rinfo);
      } catch (err) {
        // A datagram must never take the door down; it is counted and the door keeps serving.
        this.#errors++;
        this.#drop('internal-error');
        this.#options.logger.error({ err, from: `${rinfo.address}:${rinfo.port}` }, 'gwmp datagram handling failed');
      }
    });
    socket.on('error', (err) => this.#options.logger.warn({ err: err.message }, 'gwmp socket error'));
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(this.#options.port, this.#options.host, () => {
        socket.off('error', reject);
        this.#port = socket.address().port;
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    for (const [token, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new GwmpTransmitError('STOPPED', 'the packet forwarder door stopped'));
      this.#pending.delete(token);
    }
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  #drop(reason: string): void {
    this.#dropped?.inc({ reason });
  }

  #gateway(eui: string, version: number): GatewayState {
    let g = this.#gateways.get(eui);
    if (!g) {
      g = { eui, version, downlink: undefined, lastPullAt: undefined, lastSeenAt: 0, stat: undefined, uplinks: 0, downlinks: 0, txErrors: 0 };
      this.#gateways.set(eui, g);
      this.#options.logger.info({ gateway: eui }, 'gwmp gateway seen for the first time');
    }
    g.version = version;
    g.lastSeenAt = this.#options.clock.now();
    return g;
  }

  #onlineGateways(): GatewayState[] {
    const since = this.#options.clock.now() - this.#options.gatewayTimeoutMs;
    return [...this.#gateways.values()].filter((g) => g.lastPullAt !== undefined && g.lastPullAt >= since);
  }

  #send(bytes: Buffer, address: string, port: number): void {
    this.#socket?.send(bytes, port, address);
  }

  #onDatagram(msg: Buffer, rinfo: RemoteInfo): void {
    const parsed = parseDatagram(msg);
    if (!parsed.ok) {
      this.#drop(parsed.reason);
      this.#options.logger.debug({ reason: parsed.reason, from: `${rinfo.address}:${rinfo.port}`, bytes: msg.length }, 'gwmp datagram dropped');
      return;
    }
    const d = parsed.datagram;
    this.#datagrams?.inc({ type: d.type });
    switch (d.type) {
      case 'push-data':
        // Acknowledge first: forwarders wait only ~100 ms for it. The JSON was already parsed.
        this.#send(ackFor(d.version, d.token, PacketType.PushAck), rinfo.address, rinfo.port);
        this.#onPushData(d);
        return;
      case 'pull-data': {
        this.#send(ackFor(d.version, d.token, PacketType.PullAck), rinfo.address, rinfo.port);
        const g = this.#gateway(d.gatewayEui, d.version);
        g.downlink = { address: rinfo.address, port: rinfo.port };
        g.lastPullAt = this.#options.clock.now();
        return;
      }
      case 'tx-ack':
        this.#onTxAck(d);
        return;
    }
  }

  #onPushData(d: Extract<Datagram, { type: 'push-data' }>): void {
    const gateway = this.#gateway(d.gatewayEui, d.version);
    if (d.body.stat) gateway.stat = d.body.stat;
    const receivedAt = this.#options.clock.now();
    for (const rxpk of d.body.rxpk) {
      const reading = readRxpk(rxpk);
      if (!reading.ok) {
        this.#drop(reading.reason);
        continue;
      }
      gateway.uplinks++;
      const replyTo: GwmpReplyTo = { gatewayEui: d.gatewayEui, tmst: reading.tmst };
      const frame: RadioFrame = {
        payload: reading.payload,
        receivedAt,
        source: `gwmp:${d.gatewayEui}`,
        frequency: reading.frequency,
        dataRate: reading.dataRate,
        replyTo,
      };
      if (reading.rssi !== undefined) frame.rssi = reading.rssi;
      if (reading.snr !== undefined) frame.snr = reading.snr;
      if (reading.time !== undefined) frame.gatewayTime = reading.time;
      this.#framesReceived++;
      for (const listener of this.#listeners) listener(frame);
    }
  }

  #onTxAck(d: Extract<Datagram, { type: 'tx-ack' }>): void {
    this.#gateway(d.gatewayEui, d.version);
    const key = d.token.toString('hex');
    const pending = this.#pending.get(key);
    if (!pending) {
      this.#drop('unexpected-tx-ack');
      return;
    }
    this.#pending.delete(key);
    clearTimeout(pending.timer);
    const g = this.#gateways.get(pending.gatewayEui);
    if (d.error) {
      if (g) g.txErrors++;
      this.#errors++;
      this.#txResults?.inc({ result: d.error });
      pending.reject(new GwmpTransmitError(d.error, `gateway ${pending.gatewayEui} refused the downlink: ${d.error}`));
    } else {
      if (g) g.downlinks++;
      this.#framesSent++;
      this.#txResults?.inc({ result: 'NONE' });
      pending.resolve();
    }
  }

  /** Tries each window in order (a TX_ACK error on RX1 falls back to RX2). */
  transmit(t: RadioTransmission): Promise<TransmitResult> {
    return transmitInOrder(t, (w) => this.#transmitWindow(t, w));
  }

  #transmitWindow(t: RadioTransmission, w: TransmitWindow): Promise<void> {
    const replyTo = t.replyTo as GwmpReplyTo | undefined;
    const gateway = replyTo && this.#gateways.get(replyTo.gatewayEui);
    if (!replyTo || !gateway) return Promise.reject(new GwmpTransmitError('NO_GATEWAY', 'the uplink did not come through a known gateway'));
    // Class C: sent at once (`imme`), no timestamp needed.
    if (w.delayMs !== undefined && replyTo.tmst === undefined) return Promise.reject(new GwmpTransmitError('NO_TMST', `gateway ${gateway.eui} sent no tmst with the uplink: a Class A downlink cannot be timed`));
    const since = this.#options.clock.now() - this.#options.gatewayTimeoutMs;
    if (!gateway.downlink || gateway.lastPullAt === undefined || gateway.lastPullAt < since) {
      return Promise.reject(new GwmpTransmitError('GATEWAY_OFFLINE', `gateway ${gateway.eui} has sent no PULL_DATA recently: no downlink path`));
    }
    const token = randomBytes(2);
    let key = token.toString('hex');
    while (this.#pending.has(key)) {
      token.writeUInt16BE((token.readUInt16BE(0) + 1) & 0xffff, 0);
      key = token.toString('hex');
    }
    const txpk = {
      ...(w.delayMs === undefined ? { imme: true } : { tmst: (replyTo.tmst! + w.delayMs * 1000) >>> 0 }),
      freq: w.frequency / 1e6,
      rfch: 0,
      powe: w.power,
      modu: 'LORA' as const,
      datr: w.dataRate,
      codr: '4/5',
      ipol: t.invertIq,
      size: w.payload.length,
      data: w.payload.toString('base64'),
    };
    const { address, port } = gateway.downlink;
    return new Promise<void>((resolve, reject) => {
      // Version 1 forwarders never send TX_ACK, and some version 2 builds do not either: without an
      // answer the frame counts as handed over (a counter that may have gone on air is never reused).
      const timer = setTimeout(
        () => {
          this.#pending.delete(key);
          gateway.downlinks++;
          this.#framesSent++;
          this.#txResults?.inc({ result: 'no-tx-ack' });
          resolve();
        },
        gateway.version === 1 ? 200 : this.#options.txAckTimeoutMs,
      );
      timer.unref();
      this.#pending.set(key, { gatewayEui: gateway.eui, resolve, reject, timer });
      this.#send(pullResp(gateway.version, token, txpk), address, port);
    });
  }

  health(): RadioSourceHealth {
    const now = this.#options.clock.now();
    return {
      source: 'gwmp',
      up: this.#socket !== undefined,
      framesReceived: this.#framesReceived,
      framesSent: this.#framesSent,
      errors: this.#errors,
      detail: {
        port: this.#port,
        gateways: [...this.#gateways.values()].map((g) => ({
          eui: g.eui,
          online: g.lastPullAt !== undefined && g.lastPullAt >= now - this.#options.gatewayTimeoutMs,
          lastSeen: new Date(g.lastSeenAt).toISOString(),
          protocolVersion: g.version,
          uplinks: g.uplinks,
          downlinks: g.downlinks,
          txErrors: g.txErrors,
          ...(g.stat ? { stat: g.stat } : {}),
        })),
      },
    };
  }
}
