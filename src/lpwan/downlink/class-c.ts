import type { ServerParts } from '../server-parts.js';
import { sendDataDownlink } from './data-downlink.js';
import { classCWindow } from './windows.js';

/**
 * Class C downlinks (docs/lpwan.md, "Class C"): a Class C device listens on its RX2 parameters
 * whenever it is not transmitting, so a queued command goes at once — through the source and
 * gateway that heard the device last — instead of waiting for an uplink. A confirmed one that is
 * not acknowledged by the next uplink or within the ACK timeout goes again, up to the configured
 * retries, then leaves the queue as `expired` (`no-ack`).
 */
export class ClassCScheduler {
  readonly #parts: () => ServerParts;
  /** ACK timers of confirmed items in flight, per device. */
  readonly #ackTimers = new Map<string, NodeJS.Timeout>();
  #stopped = false;

  constructor(parts: () => ServerParts) {
    this.#parts = parts;
  }

  /**
   * Something may be sendable now: a new item (`enqueued`), an ACK timeout, or an uplink whose
   * Class A answer just went (a confirmed item sent again restarts its timer).
   */
  wake(deviceId: string, reason: 'enqueued' | 'ack-timeout' | 'uplink'): void {
    if (this.#stopped) return;
    const parts = this.#parts();
    const device = parts.sessions.device(deviceId);
    if (!device || device.deviceClass !== 'C') return;
    if (reason === 'uplink') {
      this.#armAckTimer(deviceId);
      return;
    }
    // After the command's 202 has gone: never inside the request that queued it.
    setImmediate(() => parts.serialise(deviceId, () => this.#send(deviceId, reason === 'ack-timeout')));
  }

  async #send(deviceId: string, resendSent: boolean): Promise<void> {
    const parts = this.#parts();
    for (;;) {
      const device = parts.sessions.device(deviceId);
      const session = device?.session;
      const heard = parts.lastHeard.get(deviceId);
      // Never heard since the start: the command waits for the device's next uplink (Class A).
      if (!device || device.deviceClass !== 'C' || !session || !heard || !heard.source.capabilities.immediate) return;
      if (parts.queue.openCount(deviceId) === 0) return;
      const before = parts.queue.openCount(deviceId);
      await sendDataDownlink(parts, device, session, {
        source: heard.source,
        receiver: heard.receiver,
        replyTo: heard.replyTo,
        receivedAt: parts.clock.now(),
        windows: [classCWindow(device.mac.rx)],
        ackOwed: false,
        mustAnswer: false,
        macAnswers: [],
        resendSent,
      });
      resendSent = false;
      const head = parts.queue.open(deviceId)[0];
      if (head && head.confirmed && head.status === 'sent') {
        this.#armAckTimer(deviceId);
        return;
      }
      // An unconfirmed item went (or left the queue): the next one may go too; stop when nothing moved.
      if (parts.queue.openCount(deviceId) >= before) return;
    }
  }

  #armAckTimer(deviceId: string): void {
    const parts = this.#parts();
    clearTimeout(this.#ackTimers.get(deviceId));
    const head = parts.queue.open(deviceId)[0];
    if (!head || !head.confirmed || head.status !== 'sent') {
      this.#ackTimers.delete(deviceId);
      return;
    }
    const timer = setTimeout(() => {
      this.#ackTimers.delete(deviceId);
      this.wake(deviceId, 'ack-timeout');
    }, parts.settings.classC.ackTimeoutMs);
    timer.unref();
    this.#ackTimers.set(deviceId, timer);
  }

  forget(deviceId: string): void {
    clearTimeout(this.#ackTimers.get(deviceId));
    this.#ackTimers.delete(deviceId);
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#ackTimers.values()) clearTimeout(timer);
    this.#ackTimers.clear();
  }
}
