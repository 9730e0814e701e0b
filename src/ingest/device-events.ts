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
  /** Listeners of the events with `at` as an ISO string: one copy per event serves them all. */
  readonly #isoListeners: Array<(deviceId: string, event: Record<string, unknown>) => void> = [];

  publish(deviceId: string, event: DeviceEvent): void {
    this.emit('event', deviceId, event);
  }

  /** For consumers that want events as they are published (`at` as the ISO string): the console's live view. */
  onDeviceEvent(listener: (deviceId: string, event: Record<string, unknown>) => void): void {
    if (this.#isoListeners.length === 0) {
      this.on('event', (deviceId, event) => {
        // Every uplink is an event: the copy and its date string are made once, not per listener.
        const shown = { ...event, at: new Date(event.at).toISOString() };
        for (const l of this.#isoListeners) l(deviceId, shown);
      });
    }
    this.#isoListeners.push(listener);
  }
}

/** The JSON of an event (written once in the wire model, src/wire/messages.ts). */
export { eventPayload } from '../wire/messages.js';
