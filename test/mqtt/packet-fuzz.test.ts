// The MQTT packet fuzz (packet-fuzz.ts) with a small count, so every test run exercises it; the full
// 100 000 inputs run with `npm run fuzz`. FUZZ_SEED replays a run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fuzzMqttPackets } from './packet-fuzz.js';

const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const count = 5000;

test(`the MQTT listener survives ${count} random and mutated packets from raw sockets, before and after CONNECT (seed ${seed})`, { timeout: 600_000 }, async () => {
  const report = await fuzzMqttPackets({ count, seed, log: (line) => console.log(line) });
  assert.deepEqual(report.findings, []);
  assert.equal(report.inputs, count);
  assert.ok(report.refused > 0 && report.accepted > 0, 'the inputs both passed and broke the protocol');
});
