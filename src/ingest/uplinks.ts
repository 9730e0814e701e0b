import type { Principal } from '../core/access.js';
import type { DeviceStateOutcome, StatePipeline } from '../ingest/ingest.js';
import type { DeviceStateDecoder, RawUplink, UplinkDecoder } from '../ingest/decoders.js';
import type { AlongsideWrite } from '../ingest/state-writer.js';

export interface UplinkOptions {
  /** The device's token when the door has one; a radio door authenticates by MIC and passes none. */
  principal?: Principal;
  /** Names the message on the device's errors topic (default `device/<id>/state`). */
  topic?: string;
  /** The door's own writes that commit with the uplink and its states (frame counters). */
  alongside?: AlongsideWrite;
  /** Decodes with this instead of the device's codec (a serial modem's configured raw codec). */
  decoder?: UplinkDecoder;
}

/**
 * Raw bytes from any door into the pipeline: decoded by the device's codec (with the port), the
 * bytes kept and the states stored in one transaction, refusals reported on the errors topic.
 */
export function publishUplink(pipeline: StatePipeline, decoders: DeviceStateDecoder, uplink: RawUplink, options: UplinkOptions = {}): Promise<DeviceStateOutcome> {
  return pipeline.publishDeviceState({
    principal: options.principal,
    deviceId: uplink.deviceId,
    receivedAt: uplink.receivedAt,
    source: uplink.source,
    topic: options.topic ?? `device/${uplink.deviceId}/state`,
    alongside: options.alongside,
    decode: (device) => decoders.decodeUplink(device, uplink, 'uplink', options.decoder),
  });
}
