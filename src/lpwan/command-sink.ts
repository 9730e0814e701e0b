import { ServiceError } from '../core/errors.js';
import { encodeCborCommand } from '../codec/index.js';
import type { DeviceCodecs } from '../device-codecs/device-codecs.js';
import type { AssetCommand, CommandSink, DeviceCommand } from '../commands/router.js';
import type { DeviceRecord } from '../core/model.js';
import type { SessionRegistry } from './session-registry.js';
import { parseDownlinkMeta, type DownlinkQueue } from './downlink-queue.js';
import type { JsonValue } from '../core/json.js';

/**
 * Commands for LoRaWAN devices (asset and device commands alike) become one downlink each: encoded
 * with the device's downlink codec now, queued until the device's next uplink opens a receive
 * window. Reports `queued` under `delivered.lpwan`; other devices are not its business.
 */
export class LpwanCommandSink implements CommandSink {
  readonly name = 'lpwan';
  readonly #sessions: SessionRegistry;
  readonly #codecs: DeviceCodecs;
  readonly #queue: DownlinkQueue;

  constructor(sessions: SessionRegistry, codecs: DeviceCodecs, queue: DownlinkQueue) {
    this.#sessions = sessions;
    this.#codecs = codecs;
    this.#queue = queue;
  }

  deliverAssetCommand(command: AssetCommand): string | undefined {
    return this.#queueCommand(command.device, { [command.asset.name]: command.value }, command.meta);
  }

  deliverDeviceCommand(command: DeviceCommand): string | undefined {
    return this.#queueCommand(command.device, command.values, command.meta);
  }

  #queueCommand(device: DeviceRecord, values: Record<string, JsonValue>, meta: Record<string, JsonValue> | null): string | undefined {
    const live = this.#sessions.device(device.id);
    if (!live) return undefined;
    const options = parseDownlinkMeta(meta);
    const codec = this.#codecs.get(device);
    const encoded = codec ? codec.encodeDownlink(values, options.port === undefined ? {} : { fPort: options.port }) : encodeCborCommand(values);
    if (encoded.errors.length > 0) {
      throw new ServiceError('ENCODE_FAILED', `the command cannot be encoded for device ${device.id} with its ${codec?.downlinkFormat ?? 'cbor'} downlink codec: ${encoded.errors.join('; ')}`);
    }
    const fPort = options.port ?? encoded.fPort ?? codec?.downlinkPort ?? live.fPort;
    if (!Number.isInteger(fPort) || fPort < 1 || fPort > 223) throw new ServiceError('FPORT_INVALID', `the downlink codec chose FPort ${fPort}; it must be from 1 to 223`);
    this.#queue.enqueue(device.id, { fPort, confirmed: options.confirmed || encoded.confirmed === true, payload: Buffer.from(encoded.bytes), ttlSeconds: options.ttlSeconds });
    return 'queued';
  }
}
