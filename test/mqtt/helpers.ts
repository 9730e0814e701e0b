// MQTT test helpers: MQTT.js clients that record what they receive, and the Debian mosquitto clients.
import { spawn } from 'node:child_process';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';

export interface Received {
  topic: string;
  payload: Buffer;
  text: string;
  retain: boolean;
  qos: number;
}

export interface TestClient {
  client: MqttClient;
  received: Received[];
  closed: Promise<void>;
  /** Waits until a received message passes `pred`; returns it. */
  waitFor(pred: (m: Received) => boolean, timeoutMs?: number): Promise<Received>;
  /** Resolves with the SUBACK code of one filter (0/1 granted, 128 refused). */
  subscribeCode(filter: string, qos?: 0 | 1): Promise<number>;
  end(): Promise<void>;
}

export async function connectClient(port: number, token: string | undefined, options: IClientOptions = {}): Promise<TestClient> {
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, {
    username: token,
    password: 'anything-at-all',
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...options,
  });
  return wrap(client);
}

export function wrap(client: MqttClient): TestClient {
  const received: Received[] = [];
  const waiters: Array<{ pred: (m: Received) => boolean; resolve: (m: Received) => void }> = [];
  client.on('message', (topic, payload, packet) => {
    const m = { topic, payload, text: payload.toString(), retain: packet.retain, qos: packet.qos };
    received.push(m);
    for (const w of [...waiters]) {
      if (w.pred(m)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  });
  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  return {
    client,
    received,
    closed,
    waitFor(pred, timeoutMs = 5000) {
      const found = received.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching message in ${timeoutMs} ms; got ${JSON.stringify(received.map((r) => [r.topic, r.text]))}`)), timeoutMs);
        waiters.push({
          pred,
          resolve: (m) => {
            clearTimeout(timer);
            resolve(m);
          },
        });
      });
    },
    async subscribeCode(filter, qos = 1) {
      try {
        const granted = await client.subscribeAsync(filter, { qos });
        return granted[0]!.qos;
      } catch (err) {
        const granted = (err as { packet?: { granted?: number[] } }).packet?.granted;
        if (granted) return granted[0]!;
        throw err;
      }
    },
    async end() {
      await client.endAsync(true);
    },
  };
}

/** Connects and expects a refusal; returns the CONNACK return code. */
export async function connectRefusedCode(port: number, token: string | undefined, options: IClientOptions = {}): Promise<number> {
  try {
    // (MQTT 3.1.1 allows no password without a user name)
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { username: token, password: token === undefined ? undefined : 'x', reconnectPeriod: 0, connectTimeout: 5000, ...options });
    await c.endAsync(true);
    return 0;
  } catch (err) {
    return (err as { code?: number }).code ?? -1;
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves when `p` does; rejects with `message` after `ms`. */
export function within<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]).finally(() => clearTimeout(timer));
}

/** Polls `check` until it returns true (or fails after `ms`). */
export async function eventually(check: () => boolean | Promise<boolean>, ms: number, message: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(message);
    await sleep(25);
  }
}

export interface ProcResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a mosquitto client (mosquitto_pub / mosquitto_sub) to completion. */
export function runTool(cmd: string, args: string[], timeoutMs = 10_000): Promise<ProcResult> {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('error', reject);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Starts `mosquitto_sub -d -v …`; `subscribed` resolves at its SUBACK (with the granted codes),
 * `done` when it exits, with the received `topic payload` lines (debug lines removed).
 */
export function startSub(args: string[], timeoutMs = 15_000): { subscribed: Promise<string>; done: Promise<{ code: number | null; lines: string[]; raw: string }> } {
  // stdbuf: mosquitto_sub block-buffers stdout on a pipe, and we need its SUBACK line as it happens.
  const proc = spawn('stdbuf', ['-oL', 'mosquitto_sub', '-d', '-v', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let raw = '';
  let onSubscribed: (line: string) => void = () => {};
  const subscribed = within(new Promise<string>((resolve) => (onSubscribed = resolve)), 5000, 'mosquitto_sub did not subscribe').catch((err: Error) => {
    throw new Error(`${err.message}: ${raw}`);
  });
  const seen = (d: Buffer) => {
    raw += d.toString();
    const m = /Subscribed \(mid: \d+\): ([\d, ]+)/.exec(raw);
    if (m) onSubscribed(m[1]!);
  };
  proc.stdout.on('data', seen);
  proc.stderr.on('data', seen);
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const done = new Promise<{ code: number | null; lines: string[]; raw: string }>((resolve) =>
    proc.on('exit', (code) => {
      clearTimeout(timer);
      const lines = raw.split('\n').filter((l) => l && !l.startsWith('Client ') && !l.startsWith('Subscribed '));
      resolve({ code, lines, raw });
    }),
  );
  return { subscribed, done };
}
