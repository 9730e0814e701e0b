/**
 * A way in or out of the daemon (HTTP, MQTT, the packet forwarder, serial modems, the upstream
 * link). Each role's composition (src/roles/) lists its doors in start order; the daemon starts
 * them in that order, stops them in reverse, and asks each for its health. A new door is a new
 * folder plus one line there (docs/architecture.md, "Doors and roles").
 */
export interface Door {
  /** Short and stable: the key of its section in /healthz (`radio`, `serial`, `upstream` …). */
  readonly name: string;
  /**
   * Binds and starts serving. Resolves with the ports it listens on, by name (`http`, `mqtt`,
   * `mqttTls`, `gwmp`), for the ready line; a door without a listener resolves with `{}`.
   * Rejects with a ConfigError naming the key when a setting cannot be applied (see listen.ts).
   */
  start(): Promise<Record<string, number>>;
  /**
   * Stops accepting and finishes what is in flight; the daemon commits and closes the store after.
   * Also called on a door whose start() failed half-way, so it must close whatever it did open.
   */
  stop(): Promise<void>;
  /** What /healthz shows under `name` (a JSON value); absent when the door has nothing to say. */
  health?(): unknown;
  /**
   * Why the door cannot do its job right now although the daemon serves (the upstream link is
   * down, say): /healthz then says `degraded` with this reason. Undefined when all is well.
   */
  degradedBecause?(): string | undefined;
}
