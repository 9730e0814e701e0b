import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureContext, type TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ConfigError, DEFAULT_CONFIG, type BasicStationConfig } from '../../core/config.js';
import { RateLimiter } from '../../core/rate-limit.js';
import { readPem } from '../bind-errors.js';
import type { Clock } from '../../core/time.js';
import type { Logger } from '../../ops/logger.js';
import type { Counter, MetricsRegistry } from '../../ops/metrics.js';
import { dataRateName, type Region } from '../../lpwan/lorawan/regions.js';
import { TransmitFailed, type RadioCapabilities, type RadioFrame, type RadioSource, type RadioSourceHealth, type RadioTransmission, type TransmitResult, type TransmitWindow } from '../../lpwan/radio.js';
import { dashedEui, parseEui } from './eui.js';
import { gpsTimeMicros, readStationMessage, stationJson, xtimeDeltaMicros, type StationMessage } from './messages.js';
import { routerConfig } from './router-config.js';

/** What the door keeps with a frame so a downlink can answer it through the same station. */
export interface StationReplyTo {
  stationEui: string;
  /** The station's clock at the end of the uplink (decimal text: a 64-bit counter). */
  xtime: string | undefined;
  /** The antenna/radio context the station asks to be given back. */
  rctx: number;
  /** A join request's DevEUI (Basics Station wants it in `dnmsg`). */
  devEui: string | undefined;
}

/** Who may connect: the door asks the station registry (store/stations.ts) at every upgrade. */
export interface StationDirectory {
  get(eui: string): { eui: string; name: string } | undefined;
  tokenMatches(eui: string, token: string): boolean;
}

export interface BasicStationTls {
  cert: Buffer;
  key: Buffer;
  /** With a CA, stations must present a certificate it signed whose CN is their EUI (mutual TLS). */
  ca?: Buffer;
}

export interface BasicStationDoorOptions {
  host: string;
  port: number;
  auth: 'token' | 'none';
  tls?: BasicStationTls;
  stations: StationDirectory;
  region: Region;
  subBand: number;
  clock: Clock;
  logger: Logger;
  metrics?: MetricsRegistry;
  /** The robustness limits (the configuration's); unset ones take the defaults. */
  limits?: Partial<BasicStationLimits>;
}

/**
 * Robustness limits (docs/security.md, "Basics Station limits"): what one station, or anyone who
 * reaches the port, can cost the door. Set by `radio.basicStation.*` (docs/configuration.md).
 */
export type BasicStationLimits = Pick<BasicStationConfig, 'maxMessageBytes' | 'maxStations' | 'maxDiscovery' | 'messagesPerSecond' | 'messagesBurst' | 'maxQueuedBytes' | 'maxPending'> & {
  /** `pingIntervalSeconds` in ms (tests ping faster than the configuration allows). */
  pingIntervalMs: number;
};

/** The limits a `radio.basicStation` section sets. */
export function stationLimits(config: BasicStationConfig): BasicStationLimits {
  const { maxMessageBytes, maxStations, maxDiscovery, messagesPerSecond, messagesBurst, maxQueuedBytes, maxPending, pingIntervalSeconds } = config;
  return { maxMessageBytes, maxStations, maxDiscovery, messagesPerSecond, messagesBurst, maxQueuedBytes, maxPending, pingIntervalMs: pingIntervalSeconds * 1000 };
}

/** The configuration's defaults, for a door built without a configuration (tests). */
export const BASIC_STATION_LIMITS: BasicStationLimits = stationLimits(DEFAULT_CONFIG.radio.basicStation as BasicStationConfig);

const KNOWN_TYPES = new Set(['version', 'updf', 'jreq', 'propdf', 'dntxed', 'timesync']);
const DISCOVERY_TIMEOUT_MS = 5000;

interface StationSession {
  eui: string;
  name: string;
  ws: WebSocket;
  connectedAt: number;
  lastUplinkAt: number | undefined;
  alive: boolean;
  version: string | undefined;
}

interface PendingDownlink {
  eui: string;
  session: StationSession;
  /** Index in the transmission's windows of RX2 (when the message carried both windows). */
  rx2Index: number | undefined;
  rxDelaySeconds: number;
  uplinkXtime: string | undefined;
  resolve: (result: TransmitResult) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * The LoRa Basics Station door (LNS protocol over WebSocket, docs/lpwan.md): discovery on
 * `/router-info`, one data socket per registered station on `/router-<EUI>`, uplinks (`updf`,
 * `jreq`, `propdf`) into radio frames with source `bs:<EUI>`, downlinks as `dnmsg` settled by
 * `dntxed`, and `timesync`. A RadioSource like the packet forwarder door.
 */
export class BasicStationDoor implements RadioSource {
  readonly name = 'basicStation';
  readonly capabilities: RadioCapabilities = { transmit: true, rx1: true, immediate: true };
  readonly #o: BasicStationDoorOptions;
  readonly #limits: BasicStationLimits;
  readonly #sessions = new Map<string, StationSession>();
  readonly #discovery = new Set<WebSocket>();
  readonly #pending = new Map<number, PendingDownlink>();
  readonly #listeners: Array<(frame: RadioFrame) => void> = [];
  readonly #wss: WebSocketServer;
  readonly #rate: RateLimiter;
  readonly #messages: Counter | undefined;
  readonly #refused: Counter | undefined;
  readonly #dropped: Counter | undefined;
  #server: Server | undefined;
  #ping: NodeJS.Timeout | undefined;
  #port = 0;
  #diid = 0;
  #framesReceived = 0;
  #framesSent = 0;
  #errors = 0;

  constructor(options: BasicStationDoorOptions) {
    this.#o = options;
    this.#limits = { ...BASIC_STATION_LIMITS, ...options.limits };
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: this.#limits.maxMessageBytes, perMessageDeflate: false });
    this.#rate = new RateLimiter(this.#limits.messagesPerSecond, this.#limits.messagesBurst);
    const m = options.metrics;
    this.#messages = m?.counter('outpost_bs_messages_total', 'Basics Station messages received, by type (unknown types as "unknown")');
    this.#refused = m?.counter('outpost_bs_refused_total', 'Basics Station connections refused, by reason');
    this.#dropped = m?.counter('outpost_bs_dropped_total', 'Basics Station messages dropped and stations disconnected, by reason');
    m?.gauge('outpost_bs_stations', 'Basics Stations connected', () => this.#sessions.size);
  }

  /** The bound TCP port (after start). */
  get port(): number {
    return this.#port;
  }

  onFrame(listener: (frame: RadioFrame) => void): void {
    this.#listeners.push(listener);
  }

  receivers(): number {
    return this.#sessions.size;
  }

  start(): Promise<void> {
    const tls = this.#o.tls;
    const server = tls
      ? createHttpsServer({ cert: tls.cert, key: tls.key, ...(tls.ca ? { ca: tls.ca, requestCert: true, rejectUnauthorized: true } : {}) })
      : createHttpServer();
    this.#server = server;
    server.on('request', (_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' }).end('LoRa Basics Station LNS: connect with a WebSocket\n');
    });
    server.on('upgrade', (req, socket, head) => {
      try {
        this.#onUpgrade(req, socket, head);
      } catch (err) {
        this.#errors++;
        this.#o.logger.error({ err }, 'basic station upgrade failed');
        socket.destroy();
      }
    });
    server.on('clientError', (_err, socket) => socket.destroy());
    this.#ping = setInterval(() => this.#heartbeat(), this.#limits.pingIntervalMs);
    this.#ping.unref();
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#o.port, this.#o.host, () => {
        server.off('error', reject);
        this.#port = (server.address() as { port: number }).port;
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    clearInterval(this.#ping);
    for (const [diid, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new TransmitFailed(['the Basics Station door stopped']));
      this.#pending.delete(diid);
    }
    for (const s of this.#sessions.values()) s.ws.terminate();
    for (const ws of this.#discovery) ws.terminate();
    this.#sessions.clear();
    this.#discovery.clear();
    const server = this.#server;
    this.#server = undefined;
    if (server) {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  /** Closes a station's socket (it was deleted from the registry). */
  disconnect(eui: string, reason = 'station removed'): void {
    const s = this.#sessions.get(eui);
    if (s) s.ws.close(4003, reason);
  }

  /** Closes the sockets of stations no longer registered (the registry changed in another process). */
  dropUnregistered(): void {
    for (const eui of this.#sessions.keys()) if (!this.#o.stations.get(eui)) this.disconnect(eui);
  }

  // ---- connections

  #refuse(socket: Duplex, status: 401 | 403 | 404 | 503, reason: string, message: string): void {
    this.#refused?.inc({ reason });
    const text = `${message}\n`;
    socket.end(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : status === 404 ? 'Not Found' : 'Service Unavailable'}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
  }

  #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (req.url ?? '').split('?')[0]!;
    if (path === '/router-info') {
      if (this.#discovery.size >= this.#limits.maxDiscovery) return this.#refuse(socket, 503, 'discovery-busy', 'too many discovery connections');
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#discover(ws, req));
      return;
    }
    const match = /^\/router-(.{1,40})$/.exec(path);
    const eui = match ? parseEui(safeDecode(match[1]!)) : undefined;
    if (!eui) return this.#refuse(socket, 404, 'bad-path', 'unknown path: use /router-info or /router-<EUI>');
    const who = this.#authorize(req, eui);
    if (!who.ok) return this.#refuse(socket, who.status, who.reason, who.message);
    if (!this.#sessions.has(eui) && this.#sessions.size >= this.#limits.maxStations) return this.#refuse(socket, 503, 'too-many-stations', 'too many stations connected');
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, eui, who.name));
  }

  /**
   * A station's credential: its client certificate under mutual TLS (CN = its EUI), else its token
   * (`Authorization: Bearer …`, the content of its tc.key) unless `auth` is `none`.
   */
  #authorize(req: IncomingMessage, eui: string): { ok: true; name: string } | { ok: false; status: 401 | 403; reason: string; message: string } {
    const station = this.#o.stations.get(eui);
    if (this.#o.tls?.ca) {
      const cert = (req.socket as TLSSocket).getPeerCertificate?.();
      const cn = cert && typeof cert.subject?.CN === 'string' ? parseEui(cert.subject.CN) : undefined;
      if (cn !== eui) return { ok: false, status: 403, reason: 'certificate', message: `the client certificate's CN is not ${eui}` };
      if (!station) return { ok: false, status: 403, reason: 'unregistered', message: `station ${eui} is not registered (outpost station create)` };
      return { ok: true, name: station.name };
    }
    if (this.#o.auth === 'none') return { ok: true, name: station?.name ?? '' };
    const header = req.headers.authorization;
    const token = typeof header === 'string' && /^Bearer\s+/i.test(header) ? header.replace(/^Bearer\s+/i, '').trim() : undefined;
    if (!token) return { ok: false, status: 401, reason: 'no-token', message: 'an Authorization: Bearer <station token> header is required' };
    if (!station) return { ok: false, status: 403, reason: 'unregistered', message: `station ${eui} is not registered (outpost station create)` };
    if (!this.#o.stations.tokenMatches(eui, token)) return { ok: false, status: 401, reason: 'bad-token', message: `that is not station ${eui}'s token` };
    return { ok: true, name: station.name };
  }

  /** `/router-info`: `{"router": <EUI>}` → where its data socket is. */
  #discover(ws: WebSocket, req: IncomingMessage): void {
    this.#discovery.add(ws);
    const timer = setTimeout(() => ws.terminate(), DISCOVERY_TIMEOUT_MS);
    timer.unref();
    ws.on('close', () => {
      clearTimeout(timer);
      this.#discovery.delete(ws);
    });
    ws.on('error', () => {});
    ws.once('message', (data, isBinary) => {
      this.#messages?.inc({ type: 'router-info' });
      let router: unknown;
      try {
        router = isBinary ? undefined : (JSON.parse(data.toString()) as { router?: unknown }).router;
      } catch {
        router = undefined;
      }
      const eui = parseEui(router);
      const reply = (body: Record<string, unknown>) => ws.send(JSON.stringify(body), () => ws.close(1000));
      if (!eui) return reply({ router: typeof router === 'string' || typeof router === 'number' ? router : null, error: 'router: expected an EUI' });
      const who = this.#authorize(req, eui);
      if (!who.ok) {
        this.#refused?.inc({ reason: `discovery-${who.reason}` });
        return reply({ router, error: who.message });
      }
      const scheme = this.#o.tls ? 'wss' : 'ws';
      reply({ router, muxs: 'outpost', uri: `${scheme}://${this.#hostFor(req)}/router-${eui.toLowerCase()}` });
    });
  }

  /** The host:port the station reached us by (its Host header when it looks like one). */
  #hostFor(req: IncomingMessage): string {
    const host = req.headers.host;
    if (typeof host === 'string' && /^[A-Za-z0-9.\-]{1,253}(:\d{1,5})?$|^\[[0-9A-Fa-f:.]{2,45}\](:\d{1,5})?$/.test(host)) return host.includes(':') && !host.endsWith(']') ? host : `${host}:${this.#port}`;
    return `${req.socket.localAddress?.includes(':') ? `[${req.socket.localAddress}]` : req.socket.localAddress}:${this.#port}`;
  }

  #attach(ws: WebSocket, eui: string, name: string): void {
    // A station that reconnects (after a network change, or in a loop) replaces its old socket:
    // one session per EUI, whatever it does.
    const previous = this.#sessions.get(eui);
    if (previous) {
      this.#dropped?.inc({ reason: 'replaced' });
      previous.ws.close(4000, 'replaced by a new connection');
    }
    const session: StationSession = { eui, name, ws, connectedAt: this.#o.clock.now(), lastUplinkAt: undefined, alive: true, version: undefined };
    this.#sessions.set(eui, session);
    this.#o.logger.info({ station: eui, name }, 'basic station connected');
    ws.on('pong', () => (session.alive = true));
    ws.on('error', (err) => this.#o.logger.debug({ station: eui, err: err.message }, 'basic station socket error'));
    ws.on('close', (code) => {
      if (this.#sessions.get(eui) === session) this.#sessions.delete(eui);
      for (const [diid, p] of this.#pending) {
        if (p.session !== session) continue;
        clearTimeout(p.timer);
        this.#pending.delete(diid);
        p.reject(new TransmitFailed([`station ${eui} disconnected`]));
      }
      this.#o.logger.info({ station: eui, code }, 'basic station disconnected');
    });
    ws.on('message', (data, isBinary) => {
      if (this.#rate.take(eui, this.#o.clock.now()) > 0) {
        this.#dropped?.inc({ reason: 'rate-limited' });
        return;
      }
      if (isBinary) {
        this.#dropped?.inc({ reason: 'binary' });
        return;
      }
      try {
        this.#onMessage(session, data.toString());
      } catch (err) {
        this.#errors++;
        this.#dropped?.inc({ reason: 'internal-error' });
        this.#o.logger.error({ err, station: eui }, 'basic station message handling failed');
      }
    });
  }

  #heartbeat(): void {
    for (const s of this.#sessions.values()) {
      // A socket already closing (replaced, deleted) ends on its own.
      if (s.ws.readyState !== s.ws.OPEN) continue;
      if (!s.alive) {
        this.#dropped?.inc({ reason: 'no-pong' });
        s.ws.terminate();
        continue;
      }
      s.alive = false;
      s.ws.ping();
    }
    this.#rate.sweep(this.#o.clock.now());
  }

  #send(session: StationSession, text: string): boolean {
    // A station that does not read (or a link that stalled) must not make the door hold ever more.
    if (session.ws.bufferedAmount > this.#limits.maxQueuedBytes) {
      this.#dropped?.inc({ reason: 'slow-station' });
      this.#o.logger.warn({ station: session.eui, queued: session.ws.bufferedAmount }, 'basic station not reading: disconnected');
      session.ws.terminate();
      return false;
    }
    session.ws.send(text);
    return true;
  }

  // ---- messages

  #onMessage(session: StationSession, text: string): void {
    const read = readStationMessage(text);
    if (!read.ok) {
      this.#messages?.inc({ type: 'malformed' });
      this.#dropped?.inc({ reason: read.reason });
      return;
    }
    const m = read.message;
    this.#messages?.inc({ type: KNOWN_TYPES.has(m.msgtype) ? m.msgtype : 'unknown' });
    switch (m.msgtype) {
      case 'version':
        session.version = m.station;
        this.#o.logger.info({ station: session.eui, version: m.station, protocol: m.protocol, features: m.features }, 'basic station version');
        this.#send(session, JSON.stringify(routerConfig(this.#o.region, this.#o.subBand, this.#o.clock.now() / 1000)));
        return;
      case 'updf':
      case 'jreq':
      case 'propdf':
        return this.#onUplink(session, m);
      case 'dntxed':
        return this.#onDntxed(session, m);
      case 'timesync':
        this.#send(session, JSON.stringify({ msgtype: 'timesync', txtime: m.txtime, gpstime: gpsTimeMicros(this.#o.clock.now()), MuxTime: this.#o.clock.now() / 1000 }));
        return;
      case 'unknown':
        return;
    }
  }

  #onUplink(session: StationSession, m: Extract<StationMessage, { msgtype: 'updf' | 'jreq' | 'propdf' }>): void {
    const modulation = this.#o.region.dataRates[m.dataRate];
    if (!modulation) {
      this.#dropped?.inc({ reason: 'unknown-dr' });
      return;
    }
    const receivedAt = this.#o.clock.now();
    session.lastUplinkAt = receivedAt;
    const replyTo: StationReplyTo = { stationEui: session.eui, xtime: m.upinfo.xtime, rctx: m.upinfo.rctx, devEui: m.devEui };
    const frame: RadioFrame = { payload: m.payload, receivedAt, source: `bs:${session.eui}`, frequency: m.frequency, dataRate: dataRateName(modulation), replyTo };
    if (m.upinfo.rssi !== undefined) frame.rssi = m.upinfo.rssi;
    if (m.upinfo.snr !== undefined) frame.snr = m.upinfo.snr;
    this.#framesReceived++;
    for (const listener of this.#listeners) listener(frame);
  }

  #onDntxed(session: StationSession, m: Extract<StationMessage, { msgtype: 'dntxed' }>): void {
    const pending = this.#pending.get(m.diid);
    // Only the station the dnmsg went to settles it.
    if (!pending || pending.session !== session) {
      this.#dropped?.inc({ reason: 'unexpected-dntxed' });
      return;
    }
    this.#pending.delete(m.diid);
    clearTimeout(pending.timer);
    this.#framesSent++;
    // Which window went out: the transmit time against the uplink's, on the station's own clock.
    let window = 0;
    if (pending.rx2Index !== undefined && m.xtime && pending.uplinkXtime) {
      const late = xtimeDeltaMicros(m.xtime, pending.uplinkXtime) >= (pending.rxDelaySeconds + 0.5) * 1e6;
      if (late) window = pending.rx2Index;
    }
    pending.resolve({ window, problems: window > 0 ? ['rx1: the station sent in RX2'] : [] });
  }

  // ---- downlinks

  #dataRateIndex(w: TransmitWindow): number | undefined {
    // US915/AU915 name some uplink and downlink rates alike (SF8BW500 is DR4 and DR12): a downlink takes the higher.
    let found: number | undefined;
    this.#o.region.dataRates.forEach((m, i) => {
      if (m && dataRateName(m) === w.dataRate.toUpperCase()) found = i;
    });
    return found;
  }

  transmit(t: RadioTransmission): Promise<TransmitResult> {
    const replyTo = t.replyTo as StationReplyTo | undefined;
    const session = replyTo && this.#sessions.get(replyTo.stationEui);
    if (!replyTo || !session) return Promise.reject(new TransmitFailed([`station ${replyTo?.stationEui ?? '?'} is not connected`]));
    if (this.#pending.size >= this.#limits.maxPending) return Promise.reject(new TransmitFailed(['too many downlinks waiting for dntxed']));
    const diid = ++this.#diid;
    const message: Record<string, unknown> = { msgtype: 'dnmsg', DevEui: dashedEui(t.devEui ?? replyTo.devEui ?? '0000000000000000'), diid, priority: 0, rctx: replyTo.rctx, MuxTime: this.#o.clock.now() / 1000 };
    let rx2Index: number | undefined;
    let rxDelaySeconds = 1;
    let waitMs: number;
    const first = t.windows[0];
    if (!first) return Promise.reject(new TransmitFailed([]));
    if (first.delayMs === undefined) {
      // Class C: RX2 parameters, sent as soon as the station can.
      const dr = this.#dataRateIndex(first);
      if (dr === undefined) return Promise.reject(new TransmitFailed([`${first.name}: ${first.dataRate} is not a data rate of ${this.#o.region.name}`]));
      Object.assign(message, { dC: 2, pdu: first.payload.toString('hex'), RX2DR: dr, RX2Freq: first.frequency });
      waitMs = 5000;
    } else {
      // Class A: RX1 and RX2 in one message, timed from the uplink's xtime; the station picks the first it can make.
      if (!replyTo.xtime) return Promise.reject(new TransmitFailed([`station ${session.eui} sent no xtime with the uplink: a Class A downlink cannot be timed`]));
      const rx1 = t.windows.findIndex((w) => w.name === 'rx1');
      const rx2 = t.windows.findIndex((w) => w.name === 'rx2');
      const one = rx1 >= 0 ? t.windows[rx1]! : t.windows[rx2]!;
      rxDelaySeconds = Math.max(1, Math.round((rx1 >= 0 ? one.delayMs! : one.delayMs! - 1000) / 1000));
      Object.assign(message, { dC: 0, pdu: one.payload.toString('hex'), RxDelay: rxDelaySeconds, xtime: replyTo.xtime });
      if (rx1 >= 0) {
        const dr = this.#dataRateIndex(t.windows[rx1]!);
        if (dr === undefined) return Promise.reject(new TransmitFailed([`rx1: ${t.windows[rx1]!.dataRate} is not a data rate of ${this.#o.region.name}`]));
        Object.assign(message, { RX1DR: dr, RX1Freq: t.windows[rx1]!.frequency });
      }
      // One pdu serves both windows; an RX2 whose payload differs (cut for a slower rate) is left out.
      if (rx2 >= 0 && t.windows[rx2]!.payload.equals(one.payload)) {
        const dr = this.#dataRateIndex(t.windows[rx2]!);
        if (dr !== undefined) {
          Object.assign(message, { RX2DR: dr, RX2Freq: t.windows[rx2]!.frequency });
          rx2Index = rx1 >= 0 ? rx2 : undefined;
        }
      }
      waitMs = (rxDelaySeconds + 1) * 1000 + 3000;
    }
    return new Promise<TransmitResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(diid);
        this.#errors++;
        this.#dropped?.inc({ reason: 'no-dntxed' });
        reject(new TransmitFailed([`station ${session.eui} reported no transmission (no dntxed within ${waitMs} ms)`]));
      }, waitMs);
      timer.unref();
      this.#pending.set(diid, { eui: session.eui, session, rx2Index, rxDelaySeconds, uplinkXtime: replyTo.xtime, resolve, reject, timer });
      if (!this.#send(session, stationJson(message))) {
        clearTimeout(timer);
        this.#pending.delete(diid);
        reject(new TransmitFailed([`station ${session.eui} is not reading its socket`]));
      }
    });
  }

  health(): RadioSourceHealth {
    const stations = [...this.#sessions.values()]
      .sort((a, b) => (b.lastUplinkAt ?? b.connectedAt) - (a.lastUplinkAt ?? a.connectedAt))
      .slice(0, 50)
      .map((s) => ({
        eui: s.eui,
        name: s.name,
        connectedAt: new Date(s.connectedAt).toISOString(),
        lastUplinkAt: s.lastUplinkAt === undefined ? null : new Date(s.lastUplinkAt).toISOString(),
        ...(s.version ? { version: s.version } : {}),
      }));
    return {
      source: 'basicStation',
      up: this.#server !== undefined,
      framesReceived: this.#framesReceived,
      framesSent: this.#framesSent,
      errors: this.#errors,
      detail: { port: this.#port, tls: this.#o.tls ? (this.#o.tls.ca ? 'mutual' : 'server') : 'off', auth: this.#o.tls?.ca ? 'certificate' : this.#o.auth, connected: this.#sessions.size, stations },
    };
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The PEM files of `radio.basicStation.tls`, read and checked before the door opens (a ConfigError names the key). */
export function loadStationTls(tls: { cert: string; key: string; ca?: string | null }): BasicStationTls {
  const cert = readPem('radio.basicStation.tls.cert', tls.cert);
  const key = readPem('radio.basicStation.tls.key', tls.key);
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new ConfigError(`config key radio.basicStation.tls.key: ${tls.key} and ${tls.cert} are not a usable certificate and key pair (${(err as Error).message})`);
  }
  if (!tls.ca) return { cert, key };
  const ca = readPem('radio.basicStation.tls.ca', tls.ca);
  try {
    createSecureContext({ ca });
  } catch (err) {
    throw new ConfigError(`config key radio.basicStation.tls.ca: ${tls.ca} is not a usable PEM certificate (${(err as Error).message})`);
  }
  return { cert, key, ca };
}
