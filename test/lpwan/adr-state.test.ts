// The ADR state machine on its own (src/lpwan/adr/): 200 000 random uplinks keep its invariants,
// and a stored MAC state that is damaged or from an older version reads as a fresh one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { adrOnUplink } from '../../src/lpwan/adr/adr-state.js';
import { ADR_HISTORY } from '../../src/lpwan/adr/adr.js';
import { initialMacState, readMacState } from '../../src/lpwan/mac/state.js';
import { AU915, EU868, US915 } from '../../src/lpwan/lorawan/regions.js';

/** A small deterministic generator, so a failure can be replayed. */
function seeded(seed: number) {
  // mulberry32
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('random uplinks: power stays in range, ADR never lowers the data rate, one request at a time, nothing without the ADR bit', () => {
  for (const region of [EU868, US915, AU915]) {
    const random = seeded(region.name.length * 7919);
    const state = initialMacState(region);
    const settings = { installationMargin: 10, maxDataRate: 5 };
    const maxDr = Math.min(settings.maxDataRate, region.maxAdrDataRate);
    let requests = 0;
    // The link changes now and then (a device moved, a gateway added): a base SNR with noise around it.
    let base = 0;
    for (let i = 0; i < 200_000; i++) {
      if (i % 400 === 0) base = Math.round(random() * 35 - 25);
      const pending = state.adrPending;
      const adrBit = random() < 0.9;
      const enabled = random() < 0.95;
      // The device answers a sent request most of the time, sometimes refuses, sometimes the answer is lost.
      const roll = random();
      const verdict = pending?.sent ? (roll < 0.7 ? 'accepted' : roll < 0.85 ? 'refused' : 'none') : 'none';
      const dataRate = verdict === 'accepted' ? pending!.dataRate : (state.dataRate ?? Math.floor(random() * (maxDr + 1)));
      const due = adrOnUplink(state, { dataRate, adrBit, bestSnr: base + Math.round(random() * 6 - 3), verdict }, enabled, region, settings);
      if (due) {
        requests++;
        const p = state.adrPending!;
        assert.ok(adrBit && enabled, 'a request only for a device that asks for ADR, with ADR on');
        assert.ok(p.dataRate >= state.dataRate!, 'ADR never lowers the data rate the device uses');
        assert.ok(p.dataRate <= Math.max(maxDr, state.dataRate ?? 0));
        assert.ok(p.txPower >= 0 && p.txPower <= region.maxTxPowerIndex);
        // The downlink goes out (most of the time).
        if (random() < 0.9) p.sent = true;
      }
      if (pending && !due) assert.ok(state.adrPending === null || state.adrPending === pending, 'never a second request while one waits');
      assert.ok(state.txPower >= 0 && state.txPower <= region.maxTxPowerIndex);
      assert.ok(state.history.length <= ADR_HISTORY);
      assert.ok(state.adrHoldoff >= 0 && state.adrHoldoff <= 20);
      if (!adrBit || !enabled) assert.equal(state.adrPending, null);
    }
    assert.ok(requests > 300, `${region.name}: ADR sent ${requests} requests`);
    assert.ok(state.adrNacks > 0 && state.adrUnanswered > 0, `${region.name}: ${state.adrNacks} refused, ${state.adrUnanswered} unanswered, ${requests} requests`);
  }
});

test('a stored MAC state that is damaged, partial or from an older version reads as a usable one', () => {
  assert.deepEqual(readMacState(null, EU868), initialMacState(EU868));
  assert.deepEqual(readMacState('{not json', EU868), initialMacState(EU868));
  const partial = readMacState(JSON.stringify({ dataRate: 3, txPower: 2, rx: { rxDelay: 1 } }), US915);
  assert.equal(partial.dataRate, 3);
  assert.equal(partial.txPower, 2);
  assert.deepEqual(partial.history, []);
  assert.equal(partial.rx.rx2Frequency, 923_300_000);
  assert.equal(partial.rx.rx2DataRate, 8);
  assert.equal(readMacState(null, EU868, 3).rx.rx2DataRate, 3, 'the configured RX2 data rate');
});
