import type { Client } from 'aedes';
import type { Principal } from '../../core/access.js';

/**
 * What the MQTT door asks about `gateway:` sessions at a central (docs/sync.md). The rules live in
 * src/sync/central; the door only calls these at its hook points.
 */
export interface GatewaySessions {
  opened(principal: Principal, client: Client): void;
  closed(principal: Principal, client: Client): void;
  /** A publish under `gateway/…` (catalog, status, fleet reports) from any session, or a gateway's `device/<id>/events`; returns why it is not allowed, or nothing. */
  publish(principal: Principal, topic: string, payload: Buffer): string | undefined;
  /** A gateway's state for a device: false when the device is not behind it (reported, acknowledged). */
  mayPublishState(principal: Principal, deviceId: string, topic: string): boolean;
  /** A decision on the filter, or undefined to leave it to the device/app ACL. */
  maySubscribe(principal: Principal, filter: string): boolean | undefined;
  /** Whether a service message may reach this session (wildcards of a gateway see only its devices). */
  mayReceive(principal: Principal | undefined, topic: string): boolean;
  /**
   * Settles once what the gateway's last publishes changed is shared with the other central nodes
   * (docs/scale-out.md): their PUBACK waits for it. Absent on one machine.
   */
  shared?(): Promise<void>;
  /**
   * Settles once the gateway's catalog messages taken so far are written, or undefined when none is
   * being written: its states wait for it (several central nodes write the catalog to PostgreSQL
   * first, and a state must not find its device missing because its catalog message is on the way).
   */
  writing?(gatewayId: string): Promise<void> | undefined;
  /** The gateway subscribed: commands kept while it was offline go out now. */
  subscribed(principal: Principal): void;
}
