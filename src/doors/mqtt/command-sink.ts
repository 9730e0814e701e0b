import type { Aedes, Client } from 'aedes';
import type { CachedAsset } from '../../store/catalog.js';
import { commandPayload, type AssetCommand, type CommandSink, type DeviceCommand } from '../../commands/router.js';
import { assetIdCommandTopic, assetTopic, filterMatches } from '../../doors/mqtt/topics.js';

const noop = () => {};

/**
 * Delivers commands to MQTT subscribers (docs/mqtt.md, "Topics"): `{value, at, meta?}` on both command
 * topics, QoS as subscribed, never retained, only to clients subscribed right now. Only the device's
 * own sessions may subscribe to its command topics (the ACL), so counting deliveries looks at those.
 */
export class MqttCommandSink implements CommandSink {
  readonly name = 'mqtt';
  readonly #broker: Aedes;
  readonly #byDevice: ReadonlyMap<string, ReadonlySet<Client>>;

  constructor(broker: Aedes, sessionsByDevice: ReadonlyMap<string, ReadonlySet<Client>>) {
    this.#broker = broker;
    this.#byDevice = sessionsByDevice;
  }

  deliverAssetCommand(command: AssetCommand): number {
    return this.#deliver(command.device.id, command.asset, commandPayload(command.value, command.at, command.meta));
  }

  /** MQTT has no device command topic: each asset's value goes out as that asset's command. */
  deliverDeviceCommand(command: DeviceCommand): number {
    let delivered = 0;
    for (const asset of command.assets) delivered += this.#deliver(command.device.id, asset, commandPayload(command.values[asset.name]!, command.at, command.meta));
    return delivered;
  }

  /** Publishes on both topics; returns the subscriber deliveries (a client on both topics counts twice). */
  #deliver(deviceId: string, asset: CachedAsset, payload: string): number {
    const topics = [assetTopic(deviceId, asset.name, 'command'), assetIdCommandTopic(asset.id)];
    let delivered = 0;
    for (const client of this.#byDevice.get(deviceId) ?? []) {
      if (client.closed) continue;
      const filters = Object.keys((client as unknown as { subscriptions: Record<string, unknown> }).subscriptions);
      for (const topic of topics) if (filters.some((f) => filterMatches(f, topic))) delivered++;
    }
    const bytes = Buffer.from(payload);
    for (const topic of topics) this.#broker.publish({ cmd: 'publish', topic, payload: bytes, qos: 1, retain: false, dup: false }, noop);
    return delivered;
  }
}
