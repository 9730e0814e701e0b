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

  /**
   * For the console (live view, recent radio). Every uplink is an event, and most are shown to
   * nobody: each consumer copies and dates (ISO) only what it sends or keeps, when it does.
   */
  onDeviceEvent(listener: (deviceId: string, event: DeviceEvent) => void): void {
    this.on('event', listener);
  }
}

/** The JSON of an event (written once in the wire model, src/wire/messages.ts). */
export { eventPayload } from '../wire/messages.js';
