import mqemitter from 'mqemitter';

/**
 * The emitter aedes routes every published message through (its `mq` option).
 *
 * aedes' default is an mqemitter with `concurrency: 100`: past 100 messages being delivered, further
 * messages wait in an in-memory queue, and each finished delivery starts the next queued message
 * from inside its own completion callback. A message that no subscription matches any more (its
 * subscriber just disconnected, and aedes removed the listener) completes synchronously, so draining
 * a queue of such messages recurses once per message: a burst of a few thousand messages followed by
 * the subscriber vanishing overflowed the stack ("Maximum call stack size exceeded" inside mqemitter)
 * and killed the process. The queue also made one frozen subscriber (100 deliveries waiting for its
 * socket to drain) stall the delivery of every other message of the broker until `drainTimeout`.
 *
 * With `concurrency: 0` mqemitter never queues: every message is handed to its subscribers' own
 * delivery functions at once, each of which writes in a later turn of the event loop (setImmediate),
 * so nothing recurses however many messages are published at once, and a slow subscriber only holds
 * its own socket's buffer until `drainTimeout` cuts it off. How many messages the service publishes is
 * bounded where they are made: per-token rate limits on states and commands, and one rate-limited
 * report per refused message on the errors topic (docs/mqtt.md).
 */
export function createFanout(): mqemitter.MQEmitter {
  return mqemitter({ concurrency: 0, matchEmptyLevels: true });
}
