// The Basics Station door's limits come from `radio.basicStation.*` (docs/configuration.md): set
// small in the daemon's configuration, they hold against a WebSocket client playing stations; a
// value outside its range stops the daemon at start with the key and the rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { StationSimulator } from './station.js';

function configFile(basicStation: Record<string, unknown>): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'outpost-bs-config-'));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify({ radio: { basicStation: { auth: 'none', ...basicStation } } }));
  return { dir, path };
}

test('radio.basicStation.maxStations and maxMessageBytes set in the configuration are the door limits', { timeout: 60_000 }, async () => {
  const config = configFile({ maxStations: 1, maxMessageBytes: 4096 });
  const daemon = await startDaemon({ args: ['--config', config.path] });
  try {
    const base = `ws://127.0.0.1:${daemon.basicStationPort}`;
    const first = await StationSimulator.open(`${base}/router-B827EBFFFE6151B0`);
    assert.equal((await first.hello()).msgtype, 'router_config');
    // One station is the limit: a second EUI gets no socket.
    await assert.rejects(StationSimulator.open(`${base}/router-B827EBFFFE6151B1`), { status: 503 });
    // 4 KiB is the largest message: a 5 000-byte one closes the socket with 1009 (message too big).
    const closed = first.closed();
    first.send(JSON.stringify({ msgtype: 'version', padding: 'x'.repeat(5000) }));
    assert.equal(await closed, 1009);
    // The place is free again once the station is gone.
    const again = await StationSimulator.open(`${base}/router-B827EBFFFE6151B1`);
    assert.equal((await again.hello()).msgtype, 'router_config');
    again.close();
  } finally {
    await daemon.stop();
    removeDir(daemon.dataDir);
    removeDir(config.dir);
  }
});

test('a Basics Station limit out of its range stops the daemon at start, naming the key', { timeout: 30_000 }, () => {
  for (const [key, value, rule] of [
    ['maxMessageBytes', 100, />= 2048/],
    ['pingIntervalSeconds', 1, />= 5/],
    ['maxStations', 'many', /integer/],
  ] as const) {
    const config = configFile({ [key]: value });
    const dataDir = tempDataDir();
    try {
      const run = cli(['run', '--config', config.path, '--data', dataDir], { OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' });
      assert.notEqual(run.code, 0, `${key}: ${JSON.stringify(value)} must not start`);
      assert.match(run.stderr, new RegExp(`radio\\.basicStation\\.${key}`), run.stderr);
      assert.match(run.stderr, rule, run.stderr);
    } finally {
      removeDir(dataDir);
      removeDir(config.dir);
    }
  }
});
