import { SerialModemError, type CommandAnswer, type CommandSpec } from './modem.js';

interface InFlight {
  spec: CommandSpec;
  lines: string[];
  resolve: (answer: CommandAnswer) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

interface Waiting {
  spec: CommandSpec;
  resolve: (answer: CommandAnswer) => void;
  reject: (err: Error) => void;
}

/**
 * One command in flight at a time, each with its own timeout. Modems answer in order and their
 * answers carry no id, so a second command written before the first is answered could take the
 * first one's answer. A timeout fails that command only; what to do about it is the caller's call.
 */
export class CommandChannel {
  readonly #write: (text: string) => void;
  readonly #defaultTimeoutMs: number;
  #inFlight: InFlight | undefined;
  readonly #waiting: Waiting[] = [];
  #closed: SerialModemError | undefined;
  timeouts = 0;
  /** Lines that arrived while a command was in flight but were no part of its answer. */
  skippedLines = 0;
  /** Lines that arrived with no command in flight and were no event either. */
  unexpectedLines = 0;

  constructor(write: (text: string) => void, defaultTimeoutMs: number) {
    this.#write = write;
    this.#defaultTimeoutMs = defaultTimeoutMs;
  }

  get busy(): boolean {
    return this.#inFlight !== undefined;
  }

  send(spec: CommandSpec): Promise<CommandAnswer> {
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      this.#waiting.push({ spec, resolve, reject });
      if (!this.#inFlight) this.#next();
    });
  }

  /** A line that is not an unsolicited event: the answer (or part of it) to the command in flight. */
  handleLine(line: string): void {
    const current = this.#inFlight;
    if (!current) {
      this.unexpectedLines++;
      return;
    }
    const { spec } = current;
    let outcome: 'ok' | 'error' | 'partial' | 'skip';
    try {
      outcome = spec.ok(line) ? 'ok' : spec.error(line) ? 'error' : spec.partial?.(line) ? 'partial' : 'skip';
    } catch {
      outcome = 'skip';
    }
    if (outcome === 'skip') {
      this.skippedLines++;
      return;
    }
    if (outcome === 'partial') {
      // Bounded: a modem stuck printing "partial" lines must not grow memory without end.
      if (current.lines.length < 32) current.lines.push(line);
      return;
    }
    this.#finish();
    if (outcome === 'ok') current.resolve({ lines: [...current.lines, line], final: line });
    else current.reject(new SerialModemError('COMMAND_FAILED', `${JSON.stringify(spec.text.slice(0, 60))} answered ${JSON.stringify(line.slice(0, 80))}`));
  }

  /** The port went away: every command in flight or waiting fails with `reason`. */
  close(reason: SerialModemError): void {
    this.#closed = reason;
    const current = this.#inFlight;
    if (current) {
      clearTimeout(current.timer);
      this.#inFlight = undefined;
      current.reject(reason);
    }
    for (const w of this.#waiting.splice(0)) w.reject(reason);
  }

  #next(): void {
    const w = this.#waiting.shift();
    if (!w) return;
    const timeoutMs = w.spec.timeoutMs ?? this.#defaultTimeoutMs;
    const timer = setTimeout(() => {
      if (this.#inFlight?.timer !== timer) return;
      this.timeouts++;
      this.#finish();
      w.reject(new SerialModemError('COMMAND_TIMEOUT', `no answer to ${JSON.stringify(w.spec.text.slice(0, 60))} within ${timeoutMs} ms`));
    }, timeoutMs);
    this.#inFlight = { spec: w.spec, lines: [], resolve: w.resolve, reject: w.reject, timer };
    try {
      this.#write(w.spec.text);
    } catch (err) {
      this.#finish();
      w.reject(new SerialModemError('PORT_CLOSED', `cannot write to the port: ${(err as Error).message}`));
    }
  }

  #finish(): void {
    if (this.#inFlight) clearTimeout(this.#inFlight.timer);
    this.#inFlight = undefined;
    // The next command goes out after the caller saw this answer (a microtask later), in order.
    queueMicrotask(() => {
      if (!this.#inFlight && !this.#closed) this.#next();
    });
  }
}
