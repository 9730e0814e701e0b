// The deliveries of one turn to one connection go out in one socket write (src/doors/mqtt/delivery-batch.ts),
// over a real TCP connection: held while the turn's deliveries are written, released one turn later,
// every byte delivered in order, and a connection that closes meanwhile is no problem.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import type { Client } from 'aedes';
import { DeliveryBatch } from '../../src/doors/mqtt/delivery-batch.js';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** A connected pair of real sockets: `sender` writes, everything `receiver` reads is collected. */
async function socketPair(): Promise<{ sender: Socket; received: () => Buffer; close: () => void }> {
  const chunks: Buffer[] = [];
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const sender = connect(port, '127.0.0.1');
  await new Promise((resolve) => sender.once('connect', resolve));
  const receiver = await accepted;
  receiver.on('data', (chunk: Buffer) => chunks.push(chunk));
  return {
    sender,
    received: () => Buffer.concat(chunks),
    close: () => {
      sender.destroy();
      receiver.destroy();
      server.close();
    },
  };
}

/** What aedes does per message: its hook runs, then the write comes in an immediate of its own, corked until the next tick. */
function deliver(batch: DeliveryBatch, client: Client, message: string): void {
  batch.hold(client);
  setImmediate(() => {
    client.conn.cork();
    client.conn.write(message);
    process.nextTick(() => client.conn.uncork());
  });
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('DeliveryBatch', () => {
  test("a turn's deliveries stay in the socket's buffer until the next turn, then arrive whole and in order", async () => {
    const pair = await socketPair();
    try {
      const batch = new DeliveryBatch();
      const client = { conn: pair.sender } as unknown as Client;
      const messages = Array.from({ length: 50 }, (_, i) => `message ${i};`);
      for (const m of messages) deliver(batch, client, m);
      await nextTurn(); // the check phase in which the 50 deliveries are written
      assert.equal(pair.sender.writableCorked, 1, 'held by the batch alone: each delivery gave its own cork back');
      assert.equal(pair.sender.writableLength, messages.join('').length, 'every delivery written, none sent yet');
      await nextTurn(); // the release
      assert.equal(pair.sender.writableCorked, 0);
      await until(() => pair.received().length === messages.join('').length, 'the 50 messages');
      assert.equal(pair.received().toString(), messages.join(''));
    } finally {
      pair.close();
    }
  });

  test('a delivery after the release is sent at once, and the next burst is held again', async () => {
    const pair = await socketPair();
    try {
      const batch = new DeliveryBatch();
      const client = { conn: pair.sender } as unknown as Client;
      deliver(batch, client, 'a;');
      await nextTurn();
      await nextTurn();
      assert.equal(pair.sender.writableCorked, 0);
      deliver(batch, client, 'b;');
      deliver(batch, client, 'c;');
      await nextTurn();
      assert.equal(pair.sender.writableCorked, 1);
      await nextTurn();
      await until(() => pair.received().toString() === 'a;b;c;', 'a, b and c');
    } finally {
      pair.close();
    }
  });

  test('a connection closed while held is released without an error, and closed ones are not held', async () => {
    const pair = await socketPair();
    const batch = new DeliveryBatch();
    const client = { conn: pair.sender } as unknown as Client;
    batch.hold(client);
    pair.close();
    await nextTurn();
    await nextTurn();
    assert.equal(pair.sender.writableCorked, 0, 'the cork taken before the close was given back');
    batch.hold(client);
    assert.equal(pair.sender.writableCorked, 0, 'a closed connection is not held again');
    batch.hold(null); // a delivery aedes makes with no client
    await nextTurn();
    await nextTurn();
  });
});
