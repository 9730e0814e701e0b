import type { ServerResponse } from 'node:http';
import { canReadDevice, type Principal } from '../core/access.js';
import type { StatePipeline, StateEvent, RefusalEvent } from '../ingest/ingest.js';
import type { CommandEvent, CommandRouter } from '../commands/router.js';
import type { DeviceEvent } from '../ingest/device-events.js';

/** What the live view shows; `radio` covers LPWAN uplink, join and downlink events. */
export type LiveKind = 'state' | 'command' | 'error' | 'radio';
export const LIVE_KINDS: readonly LiveKind[] = ['state', 'command', 'error', 'radio'];

export interface LiveEvent {
  kind: LiveKind;
  deviceId: string;
  at: string;
  [member: string]: unknown;
}

/** A source of device events other than states, commands and refusals (the radio's `device/<id>/events`). */
export interface DeviceEventSource {
  onDeviceEvent(listener: (deviceId: string, event: DeviceEvent) => void): void;
}

interface Stream {
  res: ServerResponse;
  principal: Principal;
  /** Who holds the stream, for the per-principal limit (see principalKey). */
  holder: string;
  device: string | null;
  kinds: ReadonlySet<LiveKind>;
  dropped: number;
}

/** How many streams may be open (`http.eventStreams`, docs/security.md). */
export interface StreamLimits {
  /** Open streams at most; a browser tab holds one. */
  max: number;
  /** Streams one principal (a device, a gateway, an application token) may hold. */
  perPrincipal: number;
  /** Of `max`, slots only application tokens may take: device and gateway tokens together never fill the gateway. */
  reservedForApps: number;
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = { max: 32, perPrincipal: 4, reservedForApps: 8 };

/** Why a stream was not opened: the answer's message. */
export type OpenRefusal = string;

/**
 * One principal per device (all of a device's tokens are that device), per gateway, and per
 * application token: issuing itself more tokens is not something a device can do, so a device
 * holds at most `perPrincipal` streams however it connects.
 */
function principalKey(p: Principal): string {
  if (p.kind === 'device' && p.deviceId) return `device:${p.deviceId}`;
  if (p.kind === 'gateway' && p.gatewayId) return `gateway:${p.gatewayId}`;
  return `token:${p.tokenId}`;
}

export interface LiveEventsOptions {
  limits?: StreamLimits;
  /** A stream whose unsent data grows past this is a slow reader: events are dropped for it (and counted), never queued without bound. */
  maxBufferedBytes?: number;
  heartbeatMs?: number;
  /** A stream of a token revoked meanwhile is closed at the next heartbeat. */
  isTokenLive?: (tokenId: string) => boolean;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Fans the pipeline's own events out to `GET /events` streams (server-sent events), each filtered
 * by what its token may read. It listens to the same events as the MQTT door, so the console shows
 * exactly what was committed and refused, whichever door it came through.
 */
export class LiveEvents {
  readonly #streams = new Set<Stream>();
  /** Open streams per holder, and how many of all are held by device and gateway tokens. */
  readonly #held = new Map<string, number>();
  #heldByDevices = 0;
  readonly #limits: StreamLimits;
  readonly #maxBuffered: number;
  readonly #heartbeat: NodeJS.Timeout;
  eventsSent = 0;
  eventsDropped = 0;

  constructor(pipeline: StatePipeline, commands: CommandRouter, options: LiveEventsOptions = {}) {
    this.#limits = options.limits ?? DEFAULT_STREAM_LIMITS;
    this.#maxBuffered = options.maxBufferedBytes ?? 256 * 1024;
    pipeline.on('state', (e) => this.#stateEvent(e));
    pipeline.on('refused', (e) => this.#refusalEvent(e));
    commands.on('command', (e) => this.#commandEvent(e));
    // A comment line now and then keeps proxies and NAT tables from closing an idle stream.
    const isTokenLive = options.isTokenLive ?? (() => true);
    this.#heartbeat = setInterval(() => {
      for (const s of this.#streams) {
        if (!isTokenLive(s.principal.tokenId)) {
          s.res.end('event: revoked\ndata: {}\n\n');
          this.#release(s);
        } else if (s.res.writableLength < this.#maxBuffered) s.res.write(': keep-alive\n\n');
      }
    }, options.heartbeatMs ?? 5_000).unref();
  }

  get streamCount(): number {
    return this.#streams.size;
  }

  addSource(source: DeviceEventSource): void {
    source.onDeviceEvent((deviceId, event) => {
      if (!this.#wanted(deviceId, 'radio')) return;
      this.#send({ ...event, kind: 'radio', deviceId, at: iso(event.at), type: event.type });
    });
  }

  /**
   * Starts a stream on `res`, or says why not: the gateway serves `max` streams already, this
   * principal holds `perPrincipal`, or device and gateway tokens hold every slot not reserved for
   * application tokens (so the console always finds one while devices hold theirs).
   */
  open(res: ServerResponse, principal: Principal, filter: { device: string | null; kinds: ReadonlySet<LiveKind> }): true | OpenRefusal {
    const { max, perPrincipal, reservedForApps } = this.#limits;
    const holder = principalKey(principal);
    const isApp = principal.kind === 'app';
    if (this.#streams.size >= max) return `this gateway serves ${max} event streams already (http.eventStreams.max)`;
    const held = this.#held.get(holder) ?? 0;
    if (held >= perPrincipal) return `this ${principal.kind === 'app' ? 'token' : principal.kind} holds ${held} event streams already, the most one may (http.eventStreams.perPrincipal); close one first`;
    if (!isApp && this.#heldByDevices >= max - reservedForApps) {
      return `device and gateway tokens hold ${this.#heldByDevices} event streams, the most they may together; the other ${reservedForApps} are kept for application tokens (http.eventStreams.reservedForApps)`;
    }
    const stream: Stream = { res, principal, holder, device: filter.device, kinds: filter.kinds, dropped: 0 };
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: 3000\n\n`);
    this.#streams.add(stream);
    this.#held.set(holder, held + 1);
    if (!isApp) this.#heldByDevices++;
    res.on('close', () => this.#release(stream));
    return true;
  }

  /** Forgets a stream once (it may end by revocation and then close). */
  #release(stream: Stream): void {
    if (!this.#streams.delete(stream)) return;
    const held = (this.#held.get(stream.holder) ?? 1) - 1;
    if (held > 0) this.#held.set(stream.holder, held);
    else this.#held.delete(stream.holder);
    if (stream.principal.kind !== 'app') this.#heldByDevices--;
  }

  /** Ends every stream, so a shutdown does not wait for browsers to hang up. */
  close(): void {
    clearInterval(this.#heartbeat);
    for (const s of this.#streams) s.res.end();
    this.#streams.clear();
    this.#held.clear();
    this.#heldByDevices = 0;
  }

  #wanted(deviceId: string, kind: LiveKind): boolean {
    for (const s of this.#streams) if (s.kinds.has(kind) && (s.device === null || s.device === deviceId)) return true;
    return false;
  }

  #stateEvent(e: StateEvent): void {
    if (this.#streams.size === 0 || !this.#wanted(e.device.id, 'state')) return;
    this.#send({ kind: 'state', deviceId: e.device.id, asset: e.asset.name, value: e.value, at: iso(e.at), source: e.source });
  }

  #refusalEvent(e: RefusalEvent): void {
    if (this.#streams.size === 0 || !this.#wanted(e.deviceId, 'error')) return;
    this.#send({ kind: 'error', deviceId: e.deviceId, topic: e.topic, code: e.code, error: e.error, at: iso(e.at) });
  }

  #commandEvent(e: CommandEvent): void {
    if (this.#streams.size === 0 || !this.#wanted(e.deviceId, 'command')) return;
    this.#send({ kind: 'command', deviceId: e.deviceId, values: e.values, meta: e.meta, delivered: e.delivered, at: iso(e.at), source: e.source, ...(e.warnings ? { warnings: e.warnings } : {}) });
  }

  #send(event: LiveEvent): void {
    let text: string | undefined;
    for (const s of this.#streams) {
      if (!s.kinds.has(event.kind) || (s.device !== null && s.device !== event.deviceId)) continue;
      if (!canReadDevice(s.principal, event.deviceId)) continue;
      if (s.res.writableLength > this.#maxBuffered) {
        s.dropped++;
        this.eventsDropped++;
        continue;
      }
      if (s.dropped > 0) {
        // Tell the reader what it missed, once it keeps up again.
        s.res.write(`event: dropped\ndata: {"count":${s.dropped}}\n\n`);
        s.dropped = 0;
      }
      text ??= `data: ${JSON.stringify(event)}\n\n`;
      s.res.write(text);
      this.eventsSent++;
    }
  }
}
