import { EventEmitter } from 'node:events';

/**
 * Radio and delivery events of a device (`device/<id>/events`, docs/mqtt.md): uplink metadata,
 * joins, refusals and downlink outcomes. Producers emit plain objects with a `type`; the MQTT door
 * publishes them (QoS 0) with the `at` they carry.
 */
export interface DeviceEvent {
  type: string;
  at: number;
  [member: string]: unknown;
}

export class DeviceEvents extends EventEmitter<{ event: [deviceId: string, event: DeviceEvent] }> {
  publish(deviceId: string, event: DeviceEvent): void {
    this.emit('event', deviceId, event);
  }

  /** For consumers that want events as they are published (`at` as the ISO string): the console's live view. */
  onDeviceEvent(listener: (deviceId: string, event: Record<string, unknown>) => void): void {
    this.on('event', (deviceId, event) => listener(deviceId, { ...event, at: new Date(event.at).toISOString() }));
  }
}

/** The JSON of an event (written once in the wire model, src/wire/messages.ts). */
export { eventPayload } from '../wire/messages.js';
