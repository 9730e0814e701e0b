/**
 * A way in or out of the daemon (HTTP, MQTT, the packet forwarder, serial modems, the upstream
 * link). Each role's composition lists its doors; the daemon starts them in that order, stops them
 * in reverse, and asks each for its health. A new door is a new folder plus one line there.
 */
export interface Door {
  /** Short and stable: the key of its section in /healthz and `outpost status` (`http`, `mqtt`, `radio` …). */
  readonly name: string;
  /**
   * Binds and starts serving. Resolves with the ports it listens on, by name (`http`, `mqtt`,
   * `mqttTls`, `gwmp`), for the ready line; a door without a listener resolves with `{}`.
   * Rejects with a ConfigError naming the key when a setting cannot be applied.
   */
  start(): Promise<Record<string, number>>;
  /** Stops accepting and finishes what is in flight; the daemon commits and closes the store after. */
  stop(): Promise<void>;
  /** What /healthz shows for this door; absent when it has nothing to say. */
  health?(): Record<string, unknown>;
}
