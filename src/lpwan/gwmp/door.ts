import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { lookup as dnsLookup, type LookupOneOptions } from 'node:dns';
import { isIPv4 } from 'node:net';
import type { Clock } from '../../core/time.js';
import type { Logger } from '../../ops/logger.js';
import type { Counter, MetricsRegistry } from '../../ops/metrics.js';
import type { GatewayState } from './gateways.js';
import { transmitInOrder, type RadioCapabilities, type RadioFrame, type RadioSource, type RadioSourceHealth, type RadioTransmission, type TransmitResult, type TransmitWindow } from '../radio.js';
import { ackFor, DEFAULT_MAX_DATAGRAM_BYTES, PacketType, parseDatagram, pullResp, type Datagram } from './protocol.js';
import { GatewayTable } from './gateways.js';

/**
 * The socket's name lookup: an IPv4 address is its own answer, at once. Every reply (a PUSH_ACK
 * per datagram) goes to the address the datagram came from, and Node's default sends each one
 * through `dns.lookup` and a tick of its own first (~0.7 µs a send measured here). Names (a bind
 * address in the configuration) still go to the resolver.
 */
function addressLookup(hostname: string, options: LookupOneOptions | number, callback: (err: NodeJS.ErrnoException | null, address: string, family: number) => void): void {
  if (isIPv4(hostname)) callback(null, hostname, 4);
  else dnsLookup(hostname, typeof options === 'number' ? { family: options } : options, callback);
}

/** What the door keeps with a frame so a downlink can answer it through the same gateway. */
export interface GwmpReplyTo {
  gatewayEui: string;
  /** Concentrator µs counter at the end of the uplink; undefined if the forwarder sent none. */
  tmst: number | undefined;
}

interface PendingTx {
  gatewayEui: string;
  /** Where the PULL_RESP went: only a TX_ACK from this address answers it. */
  address: string;
  port: number;
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
  /** Datagrams longer than this are dropped before their JSON is read (`radio.gwmp.maxDatagramBytes`). */
  maxDatagramBytes?: number;
  /** Gateways kept at most (`radio.gwmp.maxGateways`). */
  maxGateways?: number;
  /** A gateway not heard for this long is forgotten (ms; `radio.gwmp.gatewayExpirySeconds`). */
  gatewayExpiryMs?: number;
}

/** Gateways listed by name in /healthz (the most recently heard); the rest are counted only. */
const GATEWAYS_LISTED = 20;

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
  readonly #gateways: GatewayTable;
  readonly #pending = new Map<string, PendingTx>();
  readonly #listeners: Array<(frame: RadioFrame) => void> = [];
  readonly #datagrams: Counter | undefined;
  readonly #dropped: Counter | undefined;
  readonly #txResults: Counter | undefined;
  readonly #evicted: Counter | undefined;
  readonly #spoofedTxAcks: Counter | undefined;
  /** Evictions not yet logged (logged at most once a minute: a flood must not flood the log too). */
  #evictionsToLog = 0;
  #evictionLogAt = 0;
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
      maxDatagramBytes: options.maxDatagramBytes ?? DEFAULT_MAX_DATAGRAM_BYTES,
      maxGateways: options.maxGateways ?? 1000,
      gatewayExpiryMs: options.gatewayExpiryMs ?? 3_600_000,
    };
    this.#gateways = new GatewayTable({ clock: options.clock, max: this.#options.maxGateways, expiryMs: this.#options.gatewayExpiryMs, onlineMs: this.#options.gatewayTimeoutMs });
    const m = options.metrics;
    this.#datagrams = m?.counter('outpost_gwmp_datagrams_total', 'Packet forwarder datagrams received, by type');
    this.#dropped = m?.counter('outpost_gwmp_dropped_total', 'Packet forwarder datagrams and packets dropped, by reason');
    this.#txResults = m?.counter('outpost_gwmp_tx_total', 'Downlinks handed to gateways, by TX_ACK result');
    this.#evicted = m?.counter('outpost_gwmp_gateways_evicted_total', 'Gateways forgotten to make room for a new one (radio.gwmp.maxGateways)');
    this.#spoofedTxAcks = m?.counter('outpost_gwmp_tx_ack_spoofed_total', 'TX_ACKs ignored because they came from another address than the PULL_RESP went to');
    m?.gauge('outpost_gwmp_gateways', 'Gateways that sent a PULL_DATA recently (can take downlinks)', () => this.#gateways.online());
    m?.gauge('outpost_gwmp_gateways_known', 'Gateways the packet forwarder door keeps (at most radio.gwmp.maxGateways)', () => this.#gateways.size);
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
    return this.#gateways.online();
  }

  start(): Promise<void> {
    // Several forwarders flushing at once arrive as a burst; the kernel's default receive buffer
    // (about 200 KB) drops datagrams before the loop reads them, so ask for more (capped by the OS).
    const socket = createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024, lookup: addressLookup });
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
    const { gateway, isNew, evicted } = this.#gateways.heard(eui, version);
    if (evicted) {
      this.#evicted?.inc();
      this.#evictionsToLog++;
      const now = this.#options.clock.now();
      if (now - this.#evictionLogAt >= 60_000) {
        this.#options.logger.warn({ evicted: this.#evictionsToLog, max: this.#options.maxGateways }, 'gwmp gateway table full: least recently heard gateways forgotten (radio.gwmp.maxGateways)');
        this.#evictionLogAt = now;
        this.#evictionsToLog = 0;
      }
    } else if (isNew) this.#options.logger.info({ gateway: eui }, 'gwmp gateway seen for the first time');
    return gateway;
  }

  #send(bytes: Buffer, address: string, port: number): void {
    this.#socket?.send(bytes, port, address);
  }

  #onDatagram(msg: Buffer, rinfo: RemoteInfo): void {
    const parsed = parseDatagram(msg, this.#options.maxDatagramBytes);
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
        this.#gateways.pulled(this.#gateway(d.gatewayEui, d.version), rinfo.address, rinfo.port);
        return;
      }
      case 'tx-ack':
        this.#onTxAck(d, rinfo);
        return;
    }
  }

  #onPushData(d: Extract<Datagram, { type: 'push-data' }>): void {
    const gateway = this.#gateway(d.gatewayEui, d.version);
    if (d.body.stat) gateway.stat = d.body.stat;
    const receivedAt = this.#options.clock.now();
    if (d.body.packetsOverLimit > 0) this.#dropped?.inc({ reason: 'too-many-packets' }, d.body.packetsOverLimit);
    for (const reading of d.body.packets) {
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

  #onTxAck(d: Extract<Datagram, { type: 'tx-ack' }>, from: RemoteInfo): void {
    // A TX_ACK does not make a gateway known: it only answers a PULL_RESP this door sent.
    const key = d.token.toString('hex');
    const pending = this.#pending.get(key);
    if (!pending) {
      this.#drop('unexpected-tx-ack');
      return;
    }
    // Anyone can send a datagram with a guessed token (16 bits) and any EUI: only the address the
    // PULL_RESP went to answers it. A forged one is ignored and the real TX_ACK (or the timeout) still settles it.
    if (from.address !== pending.address || from.port !== pending.port) {
      this.#spoofedTxAcks?.inc();
      this.#options.logger.debug({ from: `${from.address}:${from.port}`, expected: `${pending.address}:${pending.port}`, gateway: pending.gatewayEui }, 'gwmp TX_ACK from another address ignored');
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
    if (!gateway.downlink || !this.#gateways.isOnline(gateway)) {
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
      this.#pending.set(key, { gatewayEui: gateway.eui, address, port, resolve, reject, timer });
      this.#send(pullResp(gateway.version, token, txpk), address, port);
    });
  }

  health(): RadioSourceHealth {
    return {
      source: 'gwmp',
      up: this.#socket !== undefined,
      framesReceived: this.#framesReceived,
      framesSent: this.#framesSent,
      errors: this.#errors,
      // Counts and the few most recently heard gateways, never every gateway: anyone can make up EUIs.
      detail: { port: this.#port, gateways: this.#gateways.summary(GATEWAYS_LISTED) },
    };
  }
}
