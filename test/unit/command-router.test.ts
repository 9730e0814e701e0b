// The command router in-process and without sockets: a real SQLite file in a temp dir, the real
// Store, Catalog and Registry, and two real sinks of its interface kept in memory (one counting
// subscribers as MQTT does, one queueing for its own devices as the radio does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openTestCore } from '../helpers/core.js';
import Database from 'better-sqlite3';
import { ServiceError } from '../../src/core/errors.js';
import type { Principal } from '../../src/core/access.js';
import { Store } from '../../src/store/store.js';
import { Catalog } from '../../src/store/catalog.js';
import { Registry } from '../../src/registry/registry.js';
import { commandPayload, type AssetCommand, type CommandEvent, type CommandRefusal, type CommandSink, type DeviceCommand } from '../../src/commands/router.js';

/** Delivers to in-memory subscribers of a device, as the MQTT sink does to its sessions: reports how many it reached. */
class SubscriberSink implements CommandSink {
  readonly name = 'mqtt';
  readonly subscribers = new Map<string, number>();
  readonly received: string[] = [];

  deliverAssetCommand(command: AssetCommand): number {
    this.received.push(commandPayload(command.value, command.at, command.meta));
    return this.subscribers.get(command.device.id) ?? 0;
  }

  deliverDeviceCommand(command: DeviceCommand): number {
    let reached = 0;
    for (const asset of command.assets) reached += this.deliverAssetCommand({ device: command.device, asset, value: command.values[asset.name]!, meta: command.meta, at: command.at });
    return reached;
  }
}

/** Queues commands of the devices it serves, one entry per command, as the radio queues one frame; others are not its business. */
class QueueSink implements CommandSink {
  readonly queued: Array<Record<string, unknown>> = [];
  constructor(
    readonly name: string,
    readonly devices: Set<string>,
  ) {}

  deliverAssetCommand(command: AssetCommand): string | undefined {
    return this.#queue(command.device.id, { [command.asset.name]: command.value });
  }

  deliverDeviceCommand(command: DeviceCommand): string | undefined {
    return this.#queue(command.device.id, command.values);
  }

  #queue(deviceId: string, values: Record<string, unknown>): string | undefined {
    if (!this.devices.has(deviceId)) return undefined;
    this.queued.push(values);
    return 'queued';
  }
}

function setup() {
  const opened = openTestCore('router');
  const { store, catalog, registry, commands: router } = opened.core;
  const mqtt = new SubscriberSink();
  const radio = new QueueSink('lpwan', new Set());
  router.addSink(radio);
  router.addSink(mqtt);
  const { device, token: deviceToken } = registry.createDevice({ name: 'lamp' });
  registry.createAsset(device.id, { name: 'led', is: 'actuator', profile: { type: 'boolean' } });
  registry.createAsset(device.id, { name: 'level', is: 'actuator', profile: { type: 'integer', minimum: 0, maximum: 10 } });
  registry.createAsset(device.id, { name: 'temperature', is: 'sensor', profile: { type: 'number' } });
  const principal = (scopes: string[]): Principal => catalog.principalForSecret(registry.createAppToken({ name: 'app', scopes }).secret)!;
  const reader = new Database(store.path, { readonly: true });
  const commands: CommandEvent[] = [];
  const refusals: CommandRefusal[] = [];
  router.on('command', (e) => commands.push(e));
  router.on('refused', (e) => refusals.push(e));
  return {
    catalog,
    registry,
    router,
    mqtt,
    radio,
    device,
    app: principal(['command']),
    reader: principal(['read']),
    deviceToken: catalog.principalForSecret(deviceToken)!,
    commands,
    refusals,
    recorded: () => reader.prepare('SELECT asset_id AS assetId, value, meta, source FROM commands ORDER BY rowid').all() as Array<Record<string, unknown>>,
    close: async () => {
      reader.close();
      await opened.close();
    },
  };
}

test('only an application token with the "command" scope sends commands; a refused one is not recorded nor delivered', async () => {
  const t = setup();
  try {
    for (const principal of [t.reader, t.deviceToken]) {
      assert.throws(() => t.router.sendAssetCommand({ principal, via: 'http', target: { deviceId: t.device.id, assetName: 'led' }, body: { value: true } }), (err: ServiceError) => err.code === 'FORBIDDEN');
      assert.throws(() => t.router.sendDeviceCommand({ principal, via: 'http', deviceId: t.device.id, body: { led: true } }), (err: ServiceError) => err.code === 'FORBIDDEN');
    }
    assert.deepEqual(t.recorded(), []);
    assert.deepEqual(t.mqtt.received, []);
    assert.equal(t.router.commandsSent, 0);
  } finally {
    await t.close();
  }
});

test('commands are checked against the asset: actuators only, values by their profile, every asset of a device command', async () => {
  const t = setup();
  try {
    const send = (assetName: string, body: unknown) => () => t.router.sendAssetCommand({ principal: t.app, via: 'http', target: { deviceId: t.device.id, assetName }, body });
    assert.throws(send('led', { value: 'on' }), (err: ServiceError) => err.code === 'PROFILE_MISMATCH' && err.message.startsWith('asset "led": '));
    assert.throws(send('level', { value: 11 }), (err: ServiceError) => err.code === 'PROFILE_MISMATCH');
    assert.throws(send('temperature', { value: 1 }), (err: ServiceError) => err.code === 'NOT_ACTUATOR');
    assert.throws(send('ghost', { value: 1 }), (err: ServiceError) => err.code === 'ASSET_NOT_FOUND');
    assert.throws(send('led', { meta: {} }), (err: ServiceError) => err.code === 'INVALID_MESSAGE' && /"value" is required/.test(err.message));
    assert.throws(send('led', { value: true, meta: 5 }), (err: ServiceError) => err.code === 'INVALID_BODY');
    // One bad asset refuses the whole device command: it goes out as one frame or not at all.
    assert.throws(() => t.router.sendDeviceCommand({ principal: t.app, via: 'http', deviceId: t.device.id, body: { led: true, level: 99 } }), (err: ServiceError) => err.code === 'PROFILE_MISMATCH');
    assert.throws(() => t.router.sendDeviceCommand({ principal: t.app, via: 'http', deviceId: t.device.id, body: {} }), (err: ServiceError) => err.code === 'INVALID_MESSAGE');
    assert.deepEqual(t.recorded(), []);
    // Keys in any case, as the cloud SDKs send them.
    const ok = t.router.sendAssetCommand({ principal: t.app, via: 'http', target: { deviceId: t.device.id, assetName: 'level' }, body: { Value: 3, Meta: { port: 5 } } });
    assert.match(ok.at, /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(t.recorded(), [{ assetId: t.catalog.assetByName(t.device.id, 'level')!.id, value: '3', meta: '{"port":5}', source: 'http' }]);
  } finally {
    await t.close();
  }
});

test('each sink reports its own outcome under its name; counts of sinks of one name add up', async () => {
  const t = setup();
  try {
    const target = { deviceId: t.device.id, assetName: 'led' };
    // Nobody subscribed, not a radio device: the defaults the API always shows.
    assert.deepEqual(t.router.sendAssetCommand({ principal: t.app, via: 'http', target, body: { value: true } }).delivered, { mqtt: 0, lpwan: 'none' });
    t.mqtt.subscribers.set(t.device.id, 2);
    t.radio.devices.add(t.device.id);
    assert.deepEqual(t.router.sendAssetCommand({ principal: t.app, via: 'http', target, body: { value: false } }).delivered, { mqtt: 2, lpwan: 'queued' });
    // A new way down is a new sink: it reports under its own name, nothing else changes.
    const second = new SubscriberSink();
    second.subscribers.set(t.device.id, 1);
    t.router.addSink(second);
    t.router.addSink(new QueueSink('upstream', new Set([t.device.id])));
    const device = t.router.sendDeviceCommand({ principal: t.app, via: 'mqtt', deviceId: t.device.id, body: { values: { led: true, level: 4 }, meta: { confirmed: true } } });
    assert.deepEqual(device.delivered, { mqtt: 6, lpwan: 'queued', upstream: 'queued' });
    assert.deepEqual(t.radio.queued.at(-1), { led: true, level: 4 }, 'the radio gets the device command as one');
    assert.equal(t.commands.length, 3);
    assert.deepEqual(t.commands[2]!.delivered, device.delivered);
    assert.deepEqual(t.commands[2]!.values, { led: true, level: 4 });
    assert.deepEqual(t.recorded().at(-1), { assetId: null, value: '{"led":true,"level":4}', meta: '{"confirmed":true}', source: 'mqtt' });
    assert.equal(t.router.commandsSent, 3);
  } finally {
    await t.close();
  }
});

test('refusals are reported for commands published on the broker, whatever refused them, and only for those', async () => {
  const t = setup();
  try {
    const topic = `device/${t.device.id}/asset/led/command`;
    const mqtt = { principal: t.app, via: 'mqtt', publishedOn: topic };
    assert.throws(() => t.router.sendAssetCommand({ ...mqtt, target: { deviceId: t.device.id, assetName: 'led' }, body: { value: 7 } }), (err: ServiceError) => err.code === 'PROFILE_MISMATCH');
    assert.equal(t.refusals.length, 1);
    const [report] = t.refusals;
    assert.deepEqual({ ...report, at: undefined }, { deviceId: t.device.id, topic, code: 'PROFILE_MISMATCH', error: report!.error, at: undefined });
    assert.match(report!.error, /^asset "led": /);
    // By asset id: the report still goes to the asset's device.
    const assetId = t.catalog.assetByName(t.device.id, 'temperature')!.id;
    assert.throws(() => t.router.sendAssetCommand({ ...mqtt, publishedOn: `asset/${assetId}/command`, target: { assetId }, body: { value: 1 } }), (err: ServiceError) => err.code === 'NOT_ACTUATOR');
    assert.deepEqual(t.refusals.slice(1).map((r) => [r.deviceId, r.topic, r.code]), [[t.device.id, `asset/${assetId}/command`, 'NOT_ACTUATOR']]);
    // A device command's refusal likewise.
    assert.throws(() => t.router.sendDeviceCommand({ ...mqtt, publishedOn: `device/${t.device.id}/command`, deviceId: t.device.id, body: { ghost: 1 } }), (err: ServiceError) => err.code === 'ASSET_NOT_FOUND');
    assert.equal(t.refusals.at(-1)!.code, 'ASSET_NOT_FOUND');
    // What a door refused before the router saw it goes through the same rule.
    t.router.refuse(mqtt, t.device.id, new ServiceError('INVALID_JSON', 'command: not valid JSON'));
    assert.deepEqual(t.refusals.slice(3).map((r) => [r.code, r.topic]), [['INVALID_JSON', topic]]);
    t.router.refuse(mqtt, t.device.id, new Error('a bug'));
    assert.equal(t.refusals.length, 4, 'only ServiceErrors are refusals; anything else is a failure, not reported');
    const before = t.refusals.length;
    // HTTP answers the refusal itself, the upstream logs it; an unknown device has no errors topic.
    assert.throws(() => t.router.sendAssetCommand({ principal: t.app, via: 'http', target: { deviceId: t.device.id, assetName: 'led' }, body: { value: 7 } }));
    assert.throws(() => t.router.sendAssetCommand({ principal: t.app, via: 'upstream', target: { deviceId: t.device.id, assetName: 'led' }, body: { value: 7 } }));
    assert.throws(() => t.router.sendDeviceCommand({ ...mqtt, deviceId: 'x'.repeat(24), body: { led: true } }), (err: ServiceError) => err.code === 'DEVICE_NOT_FOUND');
    assert.equal(t.refusals.length, before);
    assert.deepEqual(t.recorded(), []);
  } finally {
    await t.close();
  }
});
