import type { Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { Counter } from '../ops/metrics.js';
import type { Catalog } from '../store/catalog.js';
import type { LorawanDeviceStore } from '../store/lorawan-devices.js';
import type { StatePipeline } from '../ingest/ingest.js';
import type { DeviceEvents } from '../ingest/device-events.js';
import type { RadioFrame, RadioSource } from './radio.js';
import type { Region } from './lorawan/regions.js';
import type { AdrSettings } from './adr/adr.js';
import type { SessionRegistry } from './session-registry.js';
import type { DownlinkQueue } from './downlink-queue.js';
import type { Transmitter } from './downlink/transmitter.js';

/** The network server's settings (config `radio`; docs/lpwan.md). */
export interface NetworkSettings {
  /** NetID as printed (6 hex digits); OTAA DevAddrs get its NwkID as their top 7 bits. */
  netId: string;
  /** `radio.adr`; false = no LinkADRReq is ever sent. */
  adr: AdrSettings | false;
  /** RX2 (and Class C) data rate, when not the region's. */
  rx2DataRate: number;
  /** The 8-channel sub-band (1–8) the 72-channel plans' LinkADRReq masks enable. */
  subBand: number;
  classC: { ackTimeoutMs: number; retries: number };
}

/** Where a Class C device can be reached: the source and receiver of its last uplink. */
export interface LastHeard {
  source: RadioSource;
  receiver: string;
  replyTo: unknown;
}

/** What the network server is given and hands on to its steps unchanged: stores, clock, region, settings. */
export interface ServerFoundation {
  devices: LorawanDeviceStore;
  sessions: SessionRegistry;
  queue: DownlinkQueue;
  catalog: Catalog;
  pipeline: StatePipeline;
  /** Where the steps publish device events (the radio service limits refusals on the way: ./refusal-events.ts). */
  events: Pick<DeviceEvents, 'publish'>;
  clock: Clock;
  logger: Logger;
  region: Region;
  settings: NetworkSettings;
}

/** What every step of the network server works with: the foundation, the radio side and the server's own helpers. */
export interface ServerParts extends ServerFoundation {
  transmitter: Transmitter;
  random: (size: number) => Buffer;
  /** Whether the device has a codec of its own (an empty FRMPayload still goes to it). */
  hasCodec: (deviceId: string) => boolean;
  lastHeard: Map<string, LastHeard>;
  frames: Counter;
  refused: Counter;
  /** Counts a refusal by reason. */
  refuse(reason: string): void;
  /** Offers a frame no LoRaWAN device claims to the raw hook, or counts it. */
  offerUnclaimed(frame: RadioFrame, source: RadioSource, reason: string): void;
  /** Runs `work` after every earlier downlink work of this device (one downlink at a time per device); tracked for shutdown. */
  serialise(deviceId: string, work: () => Promise<void>): void;
  /** Whether downlink work of this device is running or waiting (`serialise`). */
  hasDownlinkWork(deviceId: string): boolean;
  /** Tracks asynchronous work (tests and shutdown wait for it). */
  track(work: Promise<void>): void;
  /** A Class C device may have something to send now. */
  wakeClassC(deviceId: string, reason: 'enqueued' | 'ack-timeout' | 'uplink'): void;
}
