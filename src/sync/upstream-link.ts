import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { upstreamUrls } from '../core/config.js';
import type { Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { OutboxRow } from '../store/outbox.js';
import type { Outbox } from './outbox.js';

export interface LinkOptions {
  /** For logs: `central` or the local Device ID of a per-device link. */
  name: string;
  /** One central URL, or several tried in turn (docs/sync.md): each reconnect goes to the next. */
  url: string | readonly string[];
  username: string;
  clientId: string;
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  window: number;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  stallSeconds: number;
  /** Rows with a larger payload are set aside unsent (`upstream.maxMessageBytes`). */
  maxMessageBytes: number;
  will?: { topic: string; payload: string };
  /** Filters subscribed after every CONNACK (commands from the upstream). */
  subscriptions: string[];
  /** Whether rows of this local device go out on this link. */
  owns: (deviceId: string) => boolean;
  onMessage: (topic: string, payload: Buffer) => void;
  /** After CONNACK and the subscriptions, before the outbox drains (the gateway's online status). */
  onUp?: (client: MqttClient) => void;
  /** Once the upstream granted the subscriptions (SUBACK): what it sends on them now reaches us. */
  onSubscribed?: () => void;
}

/** How many rows of one device are read from SQLite at a time. */
const FETCH = 256;
/** A row sent alone that the upstream answers by closing the link this many times is set aside. */
const STRIKES_TO_SET_ASIDE = 3;
/** A close counts against the row only this soon after it was sent (a refusal closes at once; an outage any time). */
const STRIKE_WINDOW_MS = 10_000;

/**
 * One MQTT connection to the upstream and the outbox rows that go out on it.
 *
 * - QoS 1, at most `window` rows in flight; a row is deleted only in the PUBACK callback.
 * - MQTT.js would replay its own in-memory store after a reconnect, one round trip at a time, and
 *   then we would send the same rows again: on every close the link takes its messages back out of
 *   MQTT.js (`removeOutgoingMessage`) and re-reads the rows from SQLite once connected again.
 * - MQTT.js has no backoff: `reconnectPeriod` is 0 and the link reconnects itself after a delay
 *   that doubles up to `reconnectMaxMs` and falls back to `reconnectMinMs` once a CONNACK arrives.
 * - Rows go out in `seq` order per device, one device after the other in turn, so the live data of
 *   a quiet device is not stuck behind a day of another device's backlog.
 * - The watchdog drops a connection that is up with rows in flight but has had no PUBACK for
 *   `stallSeconds` (a half-open TCP link or a stuck broker), so the rows go out again on a new one.
 * - A row the upstream can never take must not stop the queue (docs/sync.md, "What the upstream
 *   cannot take"): one over `maxMessageBytes` is set aside before it is sent. An upstream that
 *   closes the link on a row (its own packet limit is smaller) is found out by sending one row at a
 *   time after a close that left rows unacknowledged: a row that closes the link alone, within
 *   seconds, three times, is set aside too.
 */
export class UpstreamLink {
  readonly #o: LinkOptions;
  readonly #outbox: Outbox;
  readonly #clock: Clock;
  readonly #logger: Logger;
  #client: MqttClient | undefined;
  #up = false;
  #stopping = false;
  #backoff: number;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  /** Bumped on every close: PUBACK callbacks of an older connection change nothing. */
  #epoch = 0;
  readonly #inFlight = new Set<number>();
  readonly #acked: number[] = [];
  #ackFlush: NodeJS.Immediate | undefined;
  /** Devices that may have unsent rows, served in turn. */
  #active: string[] = [];
  readonly #activeSet = new Set<string>();
  #turn = 0;
  readonly #buffered = new Map<string, OutboxRow[]>();
  readonly #readUpTo = new Map<string, number>();
  #pumpScheduled = false;
  #lastProgress = 0;
  /** After a close with rows unacknowledged: how many rows still go out one at a time. */
  #oneAtATime = 0;
  /** The row sent alone and when, while #oneAtATime. */
  #alone: { seq: number; sentAt: number } | undefined;
  /** Closes each row sent alone has caused (few entries: only rows sent alone after a close). */
  readonly #strikes = new Map<number, number>();
  stalls = 0;
  connects = 0;

  constructor(options: LinkOptions, outbox: Outbox, clock: Clock, logger: Logger) {
    this.#o = options;
    this.#outbox = outbox;
    this.#clock = clock;
    this.#logger = logger.child({ upstream: options.name });
    this.#backoff = options.reconnectMinMs;
  }

  get up(): boolean {
    return this.#up;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  start(): void {
    const o = this.#o;
    const options: IClientOptions = {
      clientId: o.clientId,
      username: o.username,
      password: 'outpost',
      protocolVersion: 4,
      clean: true,
      keepalive: 30,
      reconnectPeriod: 0,
      connectTimeout: 15_000,
      resubscribe: false,
      ...o.tls,
      rejectUnauthorized: true,
    };
    if (o.will) options.will = { topic: o.will.topic, payload: Buffer.from(o.will.payload), qos: 1, retain: true };
    const urls = upstreamUrls(o.url);
    // With several URLs MQTT.js picks the next one at every (re)connect: after a close the link
    // tries the next central node, not the one that just went away.
    if (urls.length > 1) options.servers = urls.map(serverOf);
    const client = mqtt.connect(urls[0]!, options);
    this.#client = client;
    client.on('connect', () => this.#onConnect(client));
    client.on('close', () => this.#onClose(client));
    client.on('error', (err) => this.#logger.warn({ err: err.message, code: (err as { code?: unknown }).code }, 'upstream connection error'));
    client.on('message', (topic, payload) => {
      try {
        o.onMessage(topic, payload);
      } catch (err) {
        this.#logger.error({ err, topic }, 'upstream message failed');
      }
    });
    this.#watchdog = setInterval(() => this.#checkDrain(), Math.max(250, (o.stallSeconds * 1000) / 4)).unref();
  }

  /** New rows were committed for these devices. */
  notify(deviceIds: ReadonlySet<string>): void {
    for (const id of deviceIds) if (this.#o.owns(id)) this.#activate(id);
    this.#schedulePump();
  }

  #activate(deviceId: string): void {
    if (this.#activeSet.has(deviceId)) return;
    this.#activeSet.add(deviceId);
    this.#active.push(deviceId);
  }

  #onConnect(client: MqttClient): void {
    if (client !== this.#client) return;
    this.connects++;
    this.#backoff = this.#o.reconnectMinMs;
    this.#lastProgress = this.#clock.now();
    this.#logger.info('upstream link up');
    if (this.#o.subscriptions.length > 0) {
      client.subscribe(this.#o.subscriptions, { qos: 1 }, (err, granted) => {
        if (err) this.#logger.warn({ err: err.message }, 'upstream subscription failed');
        for (const g of granted ?? []) if (g.qos === 128) this.#logger.warn({ filter: g.topic }, 'upstream refused a subscription');
        if (!err && client === this.#client) this.#o.onSubscribed?.();
      });
    }
    // Every device with rows, in the order of its oldest row; anything read before is read again.
    this.#flushAcks();
    this.#active = [];
    this.#activeSet.clear();
    this.#buffered.clear();
    this.#readUpTo.clear();
    this.#turn = 0;
    for (const id of this.#outbox.rows.devicesWithRows()) if (this.#o.owns(id)) this.#activate(id);
    // Up before onUp: what it publishes (the retained online status) goes out on this connection
    // now, not at the next status refresh a minute later.
    this.#up = true;
    this.#o.onUp?.(client);
    this.#schedulePump();
  }

  #onClose(client: MqttClient): void {
    if (client !== this.#client) return;
    const wasUp = this.#up;
    this.#up = false;
    this.#epoch++;
    this.#judgeClose();
    // In-flight rows go back: out of MQTT.js's store (no replay of its own), still in SQLite.
    for (const id of Object.keys(client.outgoing)) client.removeOutgoingMessage(Number(id));
    this.#inFlight.clear();
    this.#buffered.clear();
    this.#readUpTo.clear();
    this.#flushAcks();
    // A clean stop closes the link on purpose: information, not a warning an operator should chase.
    if (wasUp && this.#stopping) this.#logger.info('upstream link closed (stopping)');
    else if (wasUp) this.#logger.warn('upstream link down');
    if (this.#stopping) return;
    const delay = this.#backoff;
    this.#backoff = Math.min(this.#backoff * 2, this.#o.reconnectMaxMs);
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = setTimeout(() => {
      if (!this.#stopping && client === this.#client) client.reconnect();
    }, delay);
    this.#reconnectTimer.unref();
  }

  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    // Never inside the transaction that announced the rows: they are sent once committed.
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    const client = this.#client;
    if (!client || !this.#up || this.#stopping) return;
    const epoch = this.#epoch;
    while (this.#inFlight.size < (this.#oneAtATime > 0 ? 1 : this.#o.window)) {
      const row = this.#nextRow();
      if (!row) break;
      if (row.payload.length > this.#o.maxMessageBytes) {
        this.#outbox.setAside(row, `payload of ${row.payload.length} bytes is over upstream.maxMessageBytes (${this.#o.maxMessageBytes})`);
        continue;
      }
      if ((this.#strikes.get(row.seq) ?? 0) >= STRIKES_TO_SET_ASIDE) {
        this.#strikes.delete(row.seq);
        this.#outbox.setAside(row, `the upstream closed the link each of the ${STRIKES_TO_SET_ASIDE} times it was sent alone`);
        continue;
      }
      if (this.#inFlight.size === 0) this.#lastProgress = this.#clock.now();
      if (this.#oneAtATime > 0) this.#alone = { seq: row.seq, sentAt: this.#clock.now() };
      this.#inFlight.add(row.seq);
      client.publish(row.topic, row.payload, { qos: 1 }, (err) => {
        if (epoch !== this.#epoch) return;
        this.#inFlight.delete(row.seq);
        if (err) return; // taken back on close; read again from SQLite on the next connection
        this.#strikes.delete(row.seq);
        if (this.#oneAtATime > 0) this.#oneAtATime--;
        this.#alone = undefined;
        this.#lastProgress = this.#clock.now();
        this.#acked.push(row.seq);
        this.#ackFlush ??= setImmediate(() => this.#flushAcks());
        this.#pump();
      });
    }
  }

  /** The next row in turn: one device's rows in order, devices taking turns. */
  #nextRow(): OutboxRow | undefined {
    while (this.#active.length > 0) {
      if (this.#turn >= this.#active.length) this.#turn = 0;
      const deviceId = this.#active[this.#turn]!;
      let buffer = this.#buffered.get(deviceId);
      if (!buffer || buffer.length === 0) {
        this.#flushAcks(); // acknowledged rows must be gone before reading further
        buffer = this.#outbox.rows.nextForDevice(deviceId, this.#readUpTo.get(deviceId) ?? 0, FETCH);
        if (buffer.length === 0) {
          this.#active.splice(this.#turn, 1);
          this.#activeSet.delete(deviceId);
          this.#buffered.delete(deviceId);
          continue;
        }
        this.#readUpTo.set(deviceId, buffer[buffer.length - 1]!.seq);
        this.#buffered.set(deviceId, buffer);
      }
      this.#turn++;
      return buffer.shift();
    }
    return undefined;
  }

  /**
   * A close with rows unacknowledged: the next connection sends one row at a time until as many
   * rows as could have been in flight got through, so a row the upstream refuses by closing is
   * sent alone and known. A row that was alone and closed the link soon after it was sent gets a strike.
   */
  #judgeClose(): void {
    const alone = this.#alone;
    this.#alone = undefined;
    if (this.#inFlight.size === 0) return;
    if (this.#oneAtATime > 0 && alone && this.#inFlight.size === 1 && this.#inFlight.has(alone.seq) && this.#clock.now() - alone.sentAt <= STRIKE_WINDOW_MS) {
      this.#strikes.set(alone.seq, (this.#strikes.get(alone.seq) ?? 0) + 1);
    }
    this.#oneAtATime = Math.max(this.#oneAtATime, this.#o.window);
  }

  #flushAcks(): void {
    if (this.#ackFlush) {
      clearImmediate(this.#ackFlush);
      this.#ackFlush = undefined;
    }
    if (this.#acked.length === 0) return;
    const seqs = this.#acked.splice(0);
    try {
      this.#outbox.acknowledged(seqs);
    } catch (err) {
      // Not deleted (database busy): they stay and go out again, a duplicate the central drops.
      this.#logger.error({ err, rows: seqs.length }, 'outbox: acknowledged rows not deleted');
    }
  }

  #checkDrain(): void {
    const client = this.#client;
    if (!client || !this.#up || this.#inFlight.size === 0) return;
    const silent = this.#clock.now() - this.#lastProgress;
    if (silent < this.#o.stallSeconds * 1000) return;
    this.stalls++;
    this.#logger.warn({ inFlight: this.#inFlight.size, silentMs: silent }, 'upstream link up but not draining: reconnecting');
    client.stream.destroy();
  }

  /** Publishes outside the outbox (status, applied revisions, device events), when connected; QoS 1 unless told. */
  publishDirect(topic: string, payload: string, retain: boolean, qos: 0 | 1 = 1): Promise<void> {
    const client = this.#client;
    if (!client || !this.#up) return Promise.resolve();
    return new Promise((resolve) => client.publish(topic, payload, { qos, retain }, () => resolve()));
  }

  async stop(final?: { topic: string; payload: string }): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#reconnectTimer);
    clearInterval(this.#watchdog);
    const client = this.#client;
    if (!client) return;
    if (final && this.#up) {
      await Promise.race([this.publishDirect(final.topic, final.payload, true), new Promise((r) => setTimeout(r, 2000))]);
    }
    // A clean DISCONNECT waits for the PUBACKs in flight, but not for an upstream that stopped answering.
    let timer: NodeJS.Timeout | undefined;
    const ended = new Promise<boolean>((resolve) => client.end(false, {}, () => resolve(true)));
    const clean = await Promise.race([ended, new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 3000)))]);
    clearTimeout(timer);
    if (!clean) client.stream?.destroy();
    // Acknowledgements that arrived count; the rest stays in the outbox for the next start.
    this.#flushAcks();
    this.#epoch++;
    this.#up = false;
  }
}

/** A URL as one of MQTT.js's `servers` (host, port, protocol). */
function serverOf(url: string): { host: string; port: number; protocol: 'mqtt' | 'mqtts' } {
  const u = new URL(url);
  const secure = u.protocol === 'mqtts:' || u.protocol === 'ssl:' || u.protocol === 'tls:';
  return { host: u.hostname, port: Number(u.port) || (secure ? 8883 : 1883), protocol: secure ? 'mqtts' : 'mqtt' };
}
