import type { Aedes } from 'aedes';
import type { CachedAsset } from '../../store/catalog.js';
import type { AssetCommand, CommandSink, DeviceCommand } from '../../commands/router.js';
import { commandPayload } from '../../wire/messages.js';
import { assetIdCommandTopic, assetTopic } from '../../wire/topics.js';
import type { SubscriptionIndex } from '../../doors/mqtt/subscriptions.js';

const noop = () => {};

/**
 * Delivers commands to MQTT subscribers (docs/mqtt.md, "Topics"): `{value, at, meta?}` on both command
 * topics, QoS as subscribed, never retained, only to clients subscribed right now. Only the device's
 * own sessions may subscribe to its command topics (the ACL), so counting deliveries looks at those.
 */
export class MqttCommandSink implements CommandSink {
  readonly name = 'mqtt';
  readonly #broker: Aedes;
  readonly #subscriptions: SubscriptionIndex;

  constructor(broker: Aedes, subscriptions: SubscriptionIndex) {
    this.#broker = broker;
    this.#subscriptions = subscriptions;
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
    for (const client of this.#subscriptions.deviceSessions(deviceId) ?? []) {
      if (client.closed) continue;
      for (const topic of topics) if (this.#subscriptions.matches(client, topic)) delivered++;
    }
    const bytes = Buffer.from(payload);
    for (const topic of topics) this.#broker.publish({ cmd: 'publish', topic, payload: bytes, qos: 1, retain: false, dup: false }, noop);
    return delivered;
  }
}
