import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StoreHealth, type StoreProblem } from '../../src/store/health.js';

const sqliteError = (code: string) => Object.assign(new Error(code), { code });

test('a write refused for space is degraded until a write succeeds a minute after the last refusal', () => {
  let now = 1_000_000;
  const health = new StoreHealth('/data/outpost.db', { now: () => now });
  const problems: StoreProblem[] = [];
  health.onProblem = (p) => problems.push(p);
  assert.deepEqual(health.report(), { status: 'ok' });

  const refusal = health.observe(sqliteError('SQLITE_FULL'));
  assert.equal(refusal?.code, 'STORAGE_UNAVAILABLE');
  assert.equal(refusal?.status, 503);
  assert.equal(health.report().status, 'degraded');
  assert.match(health.report().reason!, /lack of space .*SQLITE_FULL/);
  health.observe(sqliteError('SQLITE_FULL'));
  assert.equal(problems.length, 1, 'reported once while it lasts');

  now += 30_000;
  health.writeSucceeded();
  assert.equal(health.report().status, 'degraded', 'one success right after does not clear it');
  now += 30_000;
  health.writeSucceeded();
  assert.deepEqual(health.report(), { status: 'ok' });

  health.observe(sqliteError('SQLITE_FULL'));
  assert.equal(problems.length, 2, 'a new episode is reported again');
});

test('a damaged file is failing for good, reported once, and mapped to 503 like every storage failure', () => {
  const health = new StoreHealth('/data/outpost.db', { now: () => 0 });
  const problems: StoreProblem[] = [];
  health.onProblem = (p) => problems.push(p);
  for (const code of ['SQLITE_CORRUPT', 'SQLITE_CORRUPT_INDEX', 'SQLITE_NOTADB']) {
    const refusal = health.observe(sqliteError(code));
    assert.equal(refusal?.status, 503, code);
    assert.match(refusal!.message, /damaged/);
  }
  health.writeSucceeded();
  const report = health.report();
  assert.equal(report.status, 'failing');
  assert.match(report.reason!, /SQLITE_CORRUPT.*restore the newest backup of \/data\/outpost\.db/);
  assert.equal(problems.length, 1);
  assert.equal(problems[0]!.kind, 'corrupt');
  assert.equal(health.observe(new TypeError('not storage')), undefined, 'other failures are not storage failures');
});

test('a database file over the store.maxBytes in force is degraded; raising or lifting the cap (a reload) clears it', async () => {
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'outpost-health-'));
  try {
    const path = join(dir, 'outpost.db');
    writeFileSync(path, Buffer.alloc(8192));
    const health = new StoreHealth(path, { now: () => 0 });
    assert.equal(health.report().status, 'ok', 'no cap');
    health.setMaxBytes(4096);
    assert.equal(health.report().status, 'degraded');
    assert.match(health.report().reason!, /8192 bytes, over store\.maxBytes \(4096\)/);
    health.setMaxBytes(16384);
    assert.equal(health.report().status, 'ok');
    health.setMaxBytes(0);
    assert.equal(health.report().status, 'ok');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
