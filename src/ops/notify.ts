import { spawn } from 'node:child_process';
import type { Logger } from './logger.js';

/**
 * Readiness and watchdog notifications to systemd (`Type=notify`, `WatchdogSec=`), as described in
 * docs/operations.md ("How the watchdog works").
 *
 * The protocol is one datagram on the AF_UNIX socket named by NOTIFY_SOCKET. Node has no unix
 * datagram sockets (node:dgram is UDP only, node:net is stream only), so the daemon runs
 * `systemd-notify`, which is on every systemd machine, and the unit says `NotifyAccess=all`.
 * systemd-notify (systemd >= 246) waits until systemd has processed the message (a barrier), so the
 * message cannot be lost because the short-lived sender exited before systemd looked up its unit.
 * The alternatives were a native module (unix-dgram, sd-notify: a compiler and libsystemd-dev on
 * the Pi, and packages that lag behind Node releases) or a helper process kept running.
 *
 * Outside systemd (no NOTIFY_SOCKET) every method does nothing.
 */
export class SystemdNotifier {
  readonly #socket: string | undefined;
  readonly #watchdogMicros: number;
  readonly #logger: Logger;
  readonly #command: string;
  #timer: NodeJS.Timeout | undefined;
  #inFlight = false;
  #warned = false;
  /** Notifications sent and acknowledged by systemd-notify (exit 0), for tests and metrics. */
  sent = 0;

  constructor(env: NodeJS.ProcessEnv, logger: Logger, command = 'systemd-notify') {
    this.#socket = env.NOTIFY_SOCKET || undefined;
    const watchdogPid = env.WATCHDOG_PID ? Number(env.WATCHDOG_PID) : process.pid;
    const usec = Number(env.WATCHDOG_USEC);
    // WATCHDOG_PID names the process the watchdog is meant for; a child started with our
    // environment must not ping on our behalf.
    this.#watchdogMicros = Number.isFinite(usec) && usec > 0 && watchdogPid === process.pid ? usec : 0;
    this.#logger = logger;
    this.#command = command;
  }

  get enabled(): boolean {
    return this.#socket !== undefined;
  }

  /** Interval between watchdog pings in ms (half of WatchdogSec, as systemd advises), or 0. */
  get watchdogIntervalMs(): number {
    return this.#watchdogMicros > 0 ? Math.max(1, Math.floor(this.#watchdogMicros / 2000)) : 0;
  }

  /**
   * READY=1, then watchdog pings every half period for as long as `healthy()` says yes. A stalled
   * event loop sends nothing (the timer does not fire), an unhealthy store sends nothing: either
   * way systemd restarts the service when WatchdogSec passes.
   */
  ready(status: string, healthy: () => boolean = () => true): void {
    if (!this.enabled) return;
    this.#send(['READY=1', `STATUS=${status}`]);
    const every = this.watchdogIntervalMs;
    if (every > 0) {
      this.#timer = setInterval(() => {
        if (healthy()) this.#send(['WATCHDOG=1']);
        else this.#logger.warn('watchdog ping withheld: the daemon reports itself unhealthy');
      }, every);
      this.#timer.unref();
    }
  }

  reloading(): void {
    this.#send(['RELOADING=1']);
  }

  reloaded(status: string): void {
    this.#send(['READY=1', `STATUS=${status}`]);
  }

  stopping(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#send(['STOPPING=1']);
  }

  #send(assignments: string[]): void {
    if (!this.enabled) return;
    // One ping at a time: if systemd is slow to answer a barrier, pings must not pile up processes.
    if (assignments[0] === 'WATCHDOG=1' && this.#inFlight) return;
    this.#inFlight = true;
    const child = spawn(this.#command, assignments, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, NOTIFY_SOCKET: this.#socket } });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    let settled = false;
    const done = (problem: string | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(killer);
      this.#inFlight = false;
      if (problem === undefined) {
        this.sent++;
        return;
      }
      // Said once: a missing systemd-notify would otherwise fill the journal every few seconds.
      if (!this.#warned) this.#logger.warn({ command: this.#command, problem }, 'systemd notification failed (see docs/operations.md, watchdog)');
      this.#warned = true;
    };
    child.once('error', (err) => done(err.message));
    child.once('exit', (code, signal) => done(code === 0 ? undefined : `exit ${code ?? signal}: ${stderr.trim()}`));
  }
}
