// The fuzz targets of `npm run fuzz` with a small count, so every test run exercises them: no
// input may crash, answer 500, hang or grow memory without bound (test/fuzz/targets.ts), and a
// short run of the packet forwarder datagrams against the daemon (test/fuzz/gwmp-socket.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fuzzInProcess, fuzzOverSockets } from './runner.js';
import { fuzzGwmpDatagrams } from './gwmp-socket.js';
import { fuzzStationMessages } from './bs-socket.js';

const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));

test(`every parser a device reaches survives 2 000 generated inputs per target, in-process (seed ${seed})`, { timeout: 600_000 }, async () => {
  const reports = await fuzzInProcess({ count: 2000, seed, log: (line) => console.log(`# ${line}`) });
  assert.ok(reports.length >= 10, 'every target ran');
  for (const r of reports) {
    assert.equal(r.inputs, 2000, r.target);
    assert.equal(r.accepted + r.refused, r.inputs, r.target);
    assert.deepEqual(r.findings, [], r.target);
  }
});

test(`the compiled daemon answers 300 hostile HTTP requests below 500 and keeps serving (seed ${seed})`, { timeout: 300_000 }, async () => {
  const report = await fuzzOverSockets({ count: 300, seed, log: (line) => console.log(`# ${line}`) });
  assert.equal(report.inputs, 300);
  assert.deepEqual(report.findings, []);
});

test(`the compiled daemon survives 5 000 hostile packet forwarder datagrams and keeps serving (seed ${seed})`, { timeout: 300_000 }, async () => {
  const report = await fuzzGwmpDatagrams({ count: 5000, seed, log: (line) => console.log(`# ${line}`) });
  assert.equal(report.inputs, 5000);
  assert.deepEqual(report.findings, []);
});

test(`the compiled daemon survives 2 000 hostile Basics Station messages from registered stations (seed ${seed})`, { timeout: 300_000 }, async () => {
  const report = await fuzzStationMessages({ count: 2000, seed, log: (line) => console.log(`# ${line}`) });
  assert.equal(report.inputs, 2000);
  assert.deepEqual(report.findings, []);
});
