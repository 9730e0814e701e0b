import { ConfigError, type SerialModemConfig } from '../../core/config.js';
import { isServiceError } from '../../core/errors.js';
import type { Clock } from '../../core/time.js';
import type { Logger } from '../../ops/logger.js';
import type { MetricsRegistry } from '../../ops/metrics.js';
import type { DeviceCodec } from '../../codec/index.js';
import type { Catalog } from '../../store/catalog.js';
import type { UplinkDecoder } from '../../ingest/decoders.js';
import { parseCodecSettings, type DeviceCodecs } from '../../device-codecs/device-codecs.js';
import type { StatePipeline } from '../../ingest/ingest.js';
import type { RadioFrame, RadioSourceHealth } from '../radio.js';
import { SerialModemSource } from './serial-modem-source.js';
import type { Door } from '../../doors/door.js';

export interface SerialModemsDeps {
  modems: readonly SerialModemConfig[];
  catalog: Catalog;
  pipeline: StatePipeline;
  codecs: DeviceCodecs;
  clock: Clock;
  logger: Logger;
  metrics: MetricsRegistry;
}

/** Where a modem's raw point-to-point frames go: states of one device, through a codec. */
interface RawRoute {
  deviceId: string | undefined;
  /** The modem's own codec (`radio.serial[].codec`); absent: the device's codec decodes. */
  decoder: UplinkDecoder | undefined;
  codec: DeviceCodec | undefined;
}

type RawOutcome = 'stored' | 'refused' | 'dropped_no_device' | 'dropped_unknown_device';

/**
 * The configured serial modems (`radio.serial`): one radio source each, and the raw P2P path for
 * frames no LoRaWAN device claims. Frames become states through the one pipeline like any door's.
 */
export class SerialModems implements Door {
  /** Its health is the `serial` section of /healthz (one entry per modem). */
  readonly name = 'serial';
  readonly sources: SerialModemSource[] = [];
  readonly #deps: SerialModemsDeps;
  readonly #routes = new Map<string, RawRoute>();
  /** Raw frames on their way into the store; stop() waits for them. */
  readonly #inFlight = new Set<Promise<void>>();
  readonly #rawFrames;

  constructor(deps: SerialModemsDeps) {
    this.#deps = deps;
    for (const modem of deps.modems) {
      const source = new SerialModemSource({
        path: modem.path,
        modem: modem.modem,
        baudRate: modem.baudRate,
        receive: { frequency: modem.frequency, spreadingFactor: modem.spreadingFactor, bandwidth: modem.bandwidth },
        txLeadMs: modem.txLeadMs,
        initTimeoutMs: modem.initTimeoutMs,
        reopenMaxMs: modem.reopenMaxMs,
        clock: deps.clock,
        logger: deps.logger,
      });
      this.sources.push(source);
      this.#routes.set(source.name, { deviceId: modem.device, decoder: undefined, codec: undefined });
    }
    this.#rawFrames = deps.metrics.counter('outpost_serial_raw_frames_total', 'Serial modem frames no LoRaWAN device claimed, by source and outcome');
    this.#registerMetrics();
  }

  /**
   * Without a LoRaWAN network server every frame a modem hears is a raw point-to-point frame. With
   * one, the network server takes the frames that are LoRaWAN for its devices and offers the rest
   * to `claimRaw` instead (call one or the other, before start).
   */
  routeAllFramesRaw(): void {
    for (const source of this.sources) {
      source.onFrame((frame) => {
        if (!this.claimRaw(frame)) this.countUnclaimed(frame);
      });
    }
  }

  /**
   * A frame that is not LoRaWAN for a known device: true when it came from one of these modems and
   * that modem names a `device` (it is then decoded and stored, asynchronously); false leaves it to
   * the caller, who counts it with `countUnclaimed`.
   */
  claimRaw(frame: RadioFrame): boolean {
    const route = this.#routes.get(frame.source);
    if (!route?.deviceId) return false;
    const work = this.#storeRaw(frame, route.deviceId, route.decoder);
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
    return true;
  }

  /** Counts a frame of one of these modems that nobody claimed (no LoRaWAN device, no raw `device`). */
  countUnclaimed(frame: RadioFrame): void {
    if (this.#routes.has(frame.source)) this.#count(frame, 'dropped_no_device');
  }

  /** Compiles each modem's raw codec before any door opens: a bad one stops the daemon with exit 2. */
  async prepare(): Promise<void> {
    const { modems, codecs } = this.#deps;
    for (const [i, modem] of modems.entries()) {
      if (modem.codec === undefined) continue;
      const key = `radio.serial.${i}.codec`;
      let compiled: Awaited<ReturnType<DeviceCodecs['compile']>>;
      try {
        compiled = await codecs.compile(parseCodecSettings(modem.codec));
      } catch (err) {
        const problems = isServiceError(err) && Array.isArray(err.details?.errors) ? `: ${(err.details.errors as unknown[]).join('; ')}` : '';
        throw new ConfigError(`config key ${key}: ${(err as Error).message}${problems}`);
      }
      const route = this.#routes.get(this.sources[i]!.name)!;
      const { codec, version } = compiled;
      route.codec = codec;
      route.decoder = {
        version: `${version}@${key}`,
        decode: (payload, context) => codec.decodeUplink(payload, { fPort: context.fPort, receivedAt: new Date(context.receivedAt) }),
      };
    }
  }

  /** A modem that is missing now is retried in the background; it never holds up the start. */
  async start(): Promise<Record<string, number>> {
    for (const source of this.sources) await source.start();
    return {};
  }

  async stop(): Promise<void> {
    await Promise.all(this.sources.map((s) => s.stop()));
    await Promise.allSettled([...this.#inFlight]);
    for (const route of this.#routes.values()) route.codec?.dispose();
  }

  health(): RadioSourceHealth[] {
    return this.sources.map((s) => s.health());
  }

  async #storeRaw(frame: RadioFrame, deviceId: string, decoder: UplinkDecoder | undefined): Promise<void> {
    const { logger, catalog, pipeline } = this.#deps;
    if (!catalog.device(deviceId)) return this.#count(frame, 'dropped_unknown_device');
    let outcome: RawOutcome;
    try {
      const result = await pipeline.ingest({
        deviceId,
        via: frame.source,
        // The modem's own codec when it has one, else the device's.
        payload: { bytes: frame.payload, format: 'codec', decoder },
        label: 'uplink',
        topic: `device/${deviceId}/state`,
        receivedAt: frame.receivedAt,
      });
      outcome = Object.keys(result.states).length > 0 || result.refused.length === 0 ? 'stored' : 'refused';
    } catch (err) {
      // Refusals are already reported on the device's errors topic, and the bytes kept.
      outcome = 'refused';
      if (!isServiceError(err)) logger.error({ err, source: frame.source }, 'raw serial frame failed');
    }
    this.#count(frame, outcome);
  }

  #count(frame: RadioFrame, outcome: RawOutcome): void {
    this.#rawFrames.inc({ source: frame.source, outcome });
    if (outcome.startsWith('dropped')) {
      this.#deps.logger.debug({ source: frame.source, bytes: frame.payload.length, outcome }, 'serial frame dropped: not LoRaWAN for a known device and no raw device configured');
    }
  }

  #registerMetrics(): void {
    const { metrics } = this.#deps;
    const per = (read: (h: RadioSourceHealth) => number) => () => this.health().map((h): [Record<string, string>, number] => [{ source: h.source }, read(h)]);
    const detail = (name: string) => per((h) => Number(h.detail?.[name] ?? 0));
    metrics.gauge('outpost_serial_modem_up', 'Whether the serial modem is open, initialised and receiving (1) or not (0)', per((h) => (h.up ? 1 : 0)));
    metrics.counterFrom('outpost_serial_frames_received_total', 'Frames the serial modem received', per((h) => h.framesReceived));
    metrics.counterFrom('outpost_serial_frames_sent_total', 'Downlinks the serial modem transmitted', per((h) => h.framesSent));
    metrics.counterFrom('outpost_serial_errors_total', 'Serial modem failures (port lost, command failed or timed out, unreadable reports)', per((h) => h.errors));
    metrics.counterFrom('outpost_serial_reopens_total', 'Times the serial port was opened again after it vanished or init failed', detail('reopens'));
    metrics.counterFrom('outpost_serial_command_timeouts_total', 'Serial modem commands that got no answer in time', detail('commandTimeouts'));
    metrics.counterFrom('outpost_serial_ignored_lines_total', 'Lines from the modem that were neither an event nor an answer (noise)', detail('ignoredLines'));
  }
}
