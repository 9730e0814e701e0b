// A raw TCP MQTT connection for tests that must send what no well-behaved client sends: packets are
// built with mqtt-packet (the encoder MQTT.js and aedes use) or written byte by byte.
import { connect, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import mqttPacket, { type Packet } from 'mqtt-packet';

export interface RawConnection {
  socket: Socket;
  /** Every packet the broker sent, parsed. */
  packets: Packet[];
  /** Resolves when the broker (or we) closed the connection. */
  closed: Promise<void>;
  isClosed(): boolean;
  send(bytes: Uint8Array | Packet): boolean;
  /** Waits for a packet of this type; rejects if the connection closes first or after `ms`. */
  next(cmd: Packet['cmd'], ms?: number): Promise<Packet>;
  close(): void;
}

/** MQTT's remaining length (a variable byte integer: 7 bits a byte, low first), for hand-built packets. */
export function remainingLength(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    out.push(byte);
  } while (n > 0);
  return out;
}

export function rawConnect(port: number): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const parser = mqttPacket.parser();
    const packets: Packet[] = [];
    const waiters = new Set<() => void>();
    let isClosed = false;
    parser.on('packet', (p: Packet) => {
      packets.push(p);
      for (const w of [...waiters]) w();
    });
    parser.on('error', () => socket.destroy());
    socket.on('data', (d) => parser.parse(d));
    socket.on('error', () => {});
    const closed = new Promise<void>((done) =>
      socket.once('close', () => {
        isClosed = true;
        for (const w of [...waiters]) w();
        done();
      }),
    );
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve({
        socket,
        packets,
        closed,
        isClosed: () => isClosed,
        send(bytes) {
          if (isClosed || socket.destroyed) return false;
          const buf = bytes instanceof Uint8Array ? bytes : mqttPacket.generate(bytes);
          return socket.write(buf);
        },
        next(cmd, ms = 5000) {
          let seen = 0;
          return new Promise((ok, fail) => {
            const check = () => {
              for (; seen < packets.length; seen++) {
                if (packets[seen]!.cmd === cmd) {
                  cleanup();
                  return ok(packets[seen]!);
                }
              }
              if (isClosed) {
                cleanup();
                fail(new Error(`connection closed before a ${cmd}`));
              }
            };
            const timer = setTimeout(() => {
              cleanup();
              fail(new Error(`no ${cmd} in ${ms} ms`));
            }, ms);
            const cleanup = () => {
              clearTimeout(timer);
              waiters.delete(check);
            };
            waiters.add(check);
            check();
          });
        },
        close() {
          socket.destroy();
        },
      });
    });
    socket.once('error', reject);
  });
}

/** A connection that sent CONNECT with this token and got CONNACK 0. */
export async function rawSession(port: number, token: string, clientId = ''): Promise<RawConnection> {
  const c = await rawConnect(port);
  c.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId, keepalive: 60, username: token, password: Buffer.from('x') });
  const connack = (await c.next('connack')) as { returnCode?: number };
  if (connack.returnCode !== 0) throw new Error(`CONNACK ${connack.returnCode}`);
  return c;
}

/** Resident memory of a process in bytes (Linux). */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}
