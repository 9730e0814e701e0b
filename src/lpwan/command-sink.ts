import { ServiceError } from '../core/errors.js';
import { encodeCborCommand } from '../codec/index.js';
import type { DeviceCodecs } from '../device-codecs/device-codecs.js';
import type { AssetCommand, CommandSink, DeviceCommand, SinkOutcome } from '../commands/router.js';
import type { DeviceRecord } from '../core/model.js';
import type { SessionRegistry } from './session-registry.js';
import { parseDownlinkMeta, type DownlinkQueue } from './downlink-queue.js';
import type { JsonValue } from '../core/json.js';
import type { CommandedValueStore } from '../store/commanded-values.js';

/**
 * Commands for LoRaWAN devices (asset and device commands alike) become one downlink each: encoded
 * with the device's downlink codec now, queued until the device's next uplink opens a receive
 * window. Reports `queued` under `delivered.lpwan` (with the codec's warnings, if any); other
 * devices are not its business.
 *
 * A frame often carries several assets at once (a dimmer's level, fade, on and scene): the codec
 * takes the assets a command leaves out from the values last commanded to the device (kept in
 * SQLite, so a restart does not forget them), not from zero (docs/codecs.md, "Previous values").
 */
export class LpwanCommandSink implements CommandSink {
  readonly name = 'lpwan';
  readonly #sessions: SessionRegistry;
  readonly #codecs: DeviceCodecs;
  readonly #queue: DownlinkQueue;
  readonly #commanded: CommandedValueStore;

  constructor(sessions: SessionRegistry, codecs: DeviceCodecs, queue: DownlinkQueue, commanded: CommandedValueStore) {
    this.#sessions = sessions;
    this.#codecs = codecs;
    this.#queue = queue;
    this.#commanded = commanded;
  }

  deliverAssetCommand(command: AssetCommand): SinkOutcome {
    return this.#queueCommand(command.device, { [command.asset.name]: command.value }, command.meta, command.at);
  }

  deliverDeviceCommand(command: DeviceCommand): SinkOutcome {
    return this.#queueCommand(command.device, command.values, command.meta, command.at);
  }

  #queueCommand(device: DeviceRecord, values: Record<string, JsonValue>, meta: Record<string, JsonValue> | null, at: number): SinkOutcome {
    // At a central, a device behind a gateway is that gateway's radio's business: the command goes
    // down the sync link (docs/sync.md) and the gateway queues the downlink. Queuing it here too
    // would report a "queued" outcome no radio of this central will ever send.
    if (device.gatewayId) return undefined;
    const live = this.#sessions.device(device.id);
    if (!live) return undefined;
    const options = parseDownlinkMeta(meta);
    const codec = this.#codecs.get(device);
    const previous = this.#commanded.get(device.id);
    const encoded = codec ? codec.encodeDownlink(values, options.port === undefined ? { previous } : { previous, fPort: options.port }) : encodeCborCommand(values);
    if (encoded.errors.length > 0) {
      throw new ServiceError('ENCODE_FAILED', `the command cannot be encoded for device ${device.id} with its ${codec?.downlinkFormat ?? 'cbor'} downlink codec: ${encoded.errors.join('; ')}`);
    }
    const fPort = options.port ?? encoded.fPort ?? codec?.downlinkPort ?? live.fPort;
    if (!Number.isInteger(fPort) || fPort < 1 || fPort > 223) throw new ServiceError('FPORT_INVALID', `the downlink codec chose FPort ${fPort}; it must be from 1 to 223`);
    const warnings = encoded.warnings;
    this.#queue.enqueue(device.id, { fPort, confirmed: options.confirmed || encoded.confirmed === true, payload: Buffer.from(encoded.bytes), ttlSeconds: options.ttlSeconds, warnings });
    // Only what was encoded and queued becomes the previous value of the next command.
    this.#commanded.remember(device.id, values, at);
    return warnings.length > 0 ? { outcome: 'queued', warnings } : 'queued';
  }
}
