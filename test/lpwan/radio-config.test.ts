// The radio config keys of the network server (docs/configuration.md): defaults, and refusals that
// name the key and the rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/core/config.js';

test('radio keys: defaults, accepted values, and refusals naming the key', () => {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-radio-config-'));
  try {
    const file = (radio: unknown) => {
      const path = join(dir, `c${Math.random()}.json`);
      writeFileSync(path, JSON.stringify({ version: 1, radio }));
      return path;
    };
    const refused = (radio: unknown, pattern: RegExp) => assert.throws(() => loadConfig({ file: file(radio), env: {} }), (e: unknown) => e instanceof ConfigError && pattern.test(e.message));
    const d = loadConfig({ env: {} }).radio;
    assert.equal(d.dedupMs, 200);
    assert.deepEqual(d.adr, { installationMargin: 10, maxDataRate: 5 });
    assert.deepEqual(d.classC, { ackTimeoutS: 30, retries: 2 });
    assert.equal(d.subBand, 2);
    assert.equal(d.rx2DataRate, undefined);
    const c = loadConfig({ file: file({ region: 'AU915', adr: false, subBand: 8, rx2DataRate: 8, classC: { ackTimeoutS: 5, retries: 0 } }), env: {} }).radio;
    assert.equal(c.region, 'AU915');
    assert.equal(c.adr, false);
    assert.equal(c.rx2DataRate, 8);
    assert.equal(loadConfig({ file: file({ region: 'AS923', rx2DataRate: 2 }), env: {} }).radio.rx2DataRate, 2);
    refused({ region: 'CN470' }, /radio\.region.*"EU868", "US915", "AU915", "AS923"/);
    refused({ rx2DataRate: 8 }, /radio\.rx2DataRate: DR8 is not a LoRa downlink data rate of EU868/);
    refused({ region: 'US915', rx2DataRate: 0 }, /radio\.rx2DataRate: DR0 is not a LoRa downlink data rate of US915/);
    refused({ subBand: 9 }, /radio\.subBand/);
    refused({ adr: { installationMargin: 10, maxDataRate: 5, extra: 1 } }, /radio\.adr/);
    refused({ adr: true }, /radio\.adr/);
    refused({ classC: { ackTimeoutS: 0, retries: 2 } }, /radio\.classC\.ackTimeoutS/);
    refused({ dedupMs: 5000 }, /radio\.dedupMs/);
    // The old key of the door's own deduplication is gone (radio.dedupMs replaces it).
    refused({ gwmp: { host: '0.0.0.0', port: 1700, dedupWindowMs: 200 } }, /radio\.gwmp/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
