import { ServiceError } from '../core/errors.js';
import { canPublishState, type Principal } from '../core/access.js';
import type { Catalog } from '../store/catalog.js';
import type { AssetTarget } from '../registry/targets.js';
import type { AlongsideWrite } from '../ingest/state-writer.js';
import type { UplinkDecoder } from '../ingest/decoders.js';
import type { StateInput } from '../ingest/messages.js';

/**
 * How a device-state payload is to be read (docs/architecture.md, "Ingest and commands"):
 * `json` and `cbor` as the sender declared them, `device` as the device's codec or payload format
 * says, `codec` through a codec only.
 */
export type PayloadFormat = 'json' | 'cbor' | 'device' | 'codec';

/** One asset's state as bytes: an API body (`json`, `cbor`) or MQTT's text forms (`text`). */
export type AssetStateForm = 'json' | 'cbor' | 'text';

export type UplinkPayload =
  /** A device state: any number of assets, by name. `decoder`: the door's own codec for these bytes (a serial modem's). */
  | { bytes: Uint8Array; format: PayloadFormat; decoder?: UplinkDecoder }
  /** One asset's state: a device state with one asset, read knowing the asset (its profile type). */
  | { asset: string; bytes: Uint8Array; form: AssetStateForm }
  /** States already decoded, by asset name. */
  | { states: Record<string, StateInput> };

/**
 * One message of a device, as every door hands it to the pipeline (HTTP and MQTT states, radio and
 * serial frames). The door has authenticated the sender and checked its rights; from here on the
 * road is the same whatever the door.
 */
export interface Uplink {
  deviceId: string;
  /** The door or source it came through: `http`, `mqtt`, `gwmp:<gateway EUI>`, `serial:<path>` … */
  via: string;
  payload: UplinkPayload;
  /** What refusal messages call the message: `body`, `device state`, `uplink`, `asset "<name>"`. */
  label: string;
  /** Where its refusals are reported: the MQTT topic or HTTP request line it came on. */
  topic: string;
  /** The transport's port (LoRaWAN FPort): codecs get it, and it is kept with the raw bytes. */
  fPort?: number;
  /** When the door received it (ms since epoch; defaults to now): the `at` of states without one. */
  receivedAt?: number;
  /**
   * Sent again by a gateway whose link broke with it in flight: a state the asset already holds
   * (same `at` and value) is acknowledged but stored and announced once (docs/sync.md).
   */
  resent?: boolean;
  /** The door's own writes that must commit with this message (a radio session's frame counters). */
  alongside?: AlongsideWrite;
  /** Opaque data of the door, carried to each state event for the door's own replies (the MQTT echo's exact bytes). */
  reply?: unknown;
}

const forbidden = (deviceId: string) => new ServiceError('FORBIDDEN', `this token may not publish states of device ${deviceId}`);

/** The rights check before a device state: the device must exist (404) and the token be the device's (403). */
export function authorizeDeviceState(catalog: Catalog, principal: Principal, deviceId: string): void {
  if (!catalog.device(deviceId)) throw new ServiceError('DEVICE_NOT_FOUND', `device ${deviceId} not found`);
  if (!canPublishState(principal, deviceId)) throw forbidden(deviceId);
}

/**
 * The rights check before an asset state; returns the device and asset name it is for. Unknown
 * names answer 404 before rights are looked at (as every read does). An unknown asset on the
 * publisher's own device passes: the pipeline refuses it and reports it on the device's errors.
 */
export function authorizeAssetState(catalog: Catalog, principal: Principal, target: AssetTarget): { deviceId: string; assetName: string } {
  if ('assetId' in target) {
    const asset = catalog.assetById(target.assetId);
    if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset ${target.assetId} not found`);
    if (!canPublishState(principal, asset.deviceId)) throw forbidden(asset.deviceId);
    return { deviceId: asset.deviceId, assetName: asset.name };
  }
  if (!catalog.device(target.deviceId)) throw new ServiceError('DEVICE_NOT_FOUND', `device ${target.deviceId} not found`);
  if (!canPublishState(principal, target.deviceId)) {
    if (!catalog.assetByName(target.deviceId, target.assetName)) {
      throw new ServiceError('ASSET_NOT_FOUND', `asset "${target.assetName}" not found on device ${target.deviceId}`);
    }
    throw forbidden(target.deviceId);
  }
  return target;
}
