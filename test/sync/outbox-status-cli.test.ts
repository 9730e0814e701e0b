// `outpost outbox status` reads the running daemon's live figures over the control socket (link
// state and counters), whatever --config the CLI was given, and the database when no daemon runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, cli, cliJson, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { mosquitto } from '../helpers/mosquitto.js';
import { until } from '../helpers/wait.js';

interface OutboxView {
  from: string;
  link: string;
  depth: number;
  sent: number;
}

test('outbox status without --config shows the daemon\'s live link and counters, then the database once the daemon stopped', async () => {
  const broker = await mosquitto();
  await broker.start();
  const dataDir = tempDataDir();
  const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'field-sensor'], dataDir);
  cliJson(['asset', 'create', device.id, '--name', 'a', '--is', 'sensor', '--profile', '{"type":"integer"}'], dataDir);
  const config = join(dataDir, 'config.json');
  writeFileSync(config, JSON.stringify({ version: 1, upstream: { url: broker.url, reconnectMinMs: 100, reconnectMaxMs: 500, devices: { [device.id]: { id: 'remoteDevice0000000000009', token: 'device:t9' } } } }));
  const daemon = await startDaemon({ dataDir, args: ['--config', config] });
  const health = async () => (await api(daemon.url, 'GET', '/healthz')).body.upstream as { link: string; depth: number; sent: number };
  // Without --config: the CLI knows nothing of the upstream; the daemon does.
  const status = () => cliJson<OutboxView>(['outbox', 'status'], dataDir);
  try {
    await until('link up', async () => (await health()).link === 'up');
    for (let i = 0; i < 20; i++) assert.equal((await api(daemon.url, 'PUT', `/device/${device.id}/asset/a/state`, { token: device.token, json: { value: i } })).status, 200);
    await until('sent', async () => (await health()).depth === 0 && (await health()).sent >= 20);
    const sentByDaemon = (await health()).sent;
    // At once, without waiting for the daemon to persist its counters (once a second).
    const live = status();
    assert.equal(live.from, 'daemon');
    assert.equal(live.link, 'up', 'the daemon\'s link, not "off" for a CLI without --config');
    assert.equal(live.depth, 0);
    assert.equal(live.sent, sentByDaemon, 'the live counter, not the last persisted one');
    const human = cli(['outbox', 'status', '--data', dataDir]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /live from the daemon of .* \(pid \d+\)/);

    await broker.stop();
    await until('link down', async () => (await health()).link === 'down');
    assert.equal(status().link, 'down', 'a link that is down is shown down');
  } finally {
    assert.equal(await daemon.stop(), 0);
    await broker.stop().catch(() => {});
  }
  try {
    const stored = status();
    assert.equal(stored.from, 'database');
    assert.equal(stored.link, 'down', 'no daemon: nothing sends');
    assert.ok(stored.sent >= 20, 'the counters the daemon persisted at its stop');
    const human = cli(['outbox', 'status', '--data', dataDir]);
    assert.match(human.stdout, /no daemon runs on .*: figures from the database/);
  } finally {
    removeDir(dataDir);
  }
});

test('a clean gateway stop logs the closed upstream link as information, not as a warning', async () => {
  const broker = await mosquitto();
  await broker.start();
  const dataDir = tempDataDir();
  const device = cliJson<{ id: string }>(['device', 'create', '--name', 'field-sensor'], dataDir);
  const config = join(dataDir, 'config.json');
  writeFileSync(config, JSON.stringify({ version: 1, upstream: { url: broker.url, devices: { [device.id]: { id: 'remoteDevice0000000000008', token: 'device:t8' } } } }));
  const daemon = await startDaemon({ dataDir, args: ['--config', config] });
  try {
    await until('link up', async () => (await api(daemon.url, 'GET', '/healthz')).body.upstream.link === 'up');
    assert.equal(await daemon.stop(), 0);
    const lines = daemon.logs.map((l) => JSON.parse(l) as { level: number; msg: string });
    assert.deepEqual(lines.filter((l) => l.level >= 40).map((l) => l.msg), [], 'no warning on a clean stop');
    assert.ok(lines.some((l) => l.level === 30 && l.msg === 'upstream link closed (stopping)'), 'the closed link is still logged');
  } finally {
    await daemon.stop();
    await broker.stop();
    removeDir(dataDir);
  }
});
