// Durability (kill -9 during a QoS 1 burst), the retained feed after restarts, limits and TLS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { api, cliJson, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { connectClient, within, wrap } from './helpers.js';

function storedValues(dataDir: string, deviceId: string, asset: string): number[] {
  const db = new Database(join(dataDir, 'outpost.db'), { readonly: true });
  try {
    const rows = db
      .prepare('SELECT s.value FROM states s JOIN assets a ON a.id = s.asset_id WHERE a.device_id = ? AND a.name = ?')
      .pluck()
      .all(deviceId, asset) as string[];
    return rows.map((v) => JSON.parse(v) as number);
  } finally {
    db.close();
  }
}

test('kill -9 in the middle of a QoS 1 burst: every acknowledged state is in the database; the retained feed survives', async () => {
  let daemon = await startDaemon({ env: { OUTPOST_RATE_LIMIT: '0' } });
  const dataDir = daemon.dataDir;
  try {
    const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'burst'], dataDir);
    cliJson(['asset', 'create', device.id, '--name', 'n', '--is', 'sensor', '--profile', '{"type":"integer"}'], dataDir);
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${daemon.mqttPort}`, { username: device.token, reconnectPeriod: 0 });
    client.on('error', () => {});
    const total = 30_000;
    const acked: number[] = [];
    let killed = false;
    const killedAt = new Promise<void>((resolve) => {
      for (let i = 0; i < total; i++) {
        client.publish(`device/${device.id}/asset/n/state`, `{"value":${i}}`, { qos: 1 }, (err) => {
          if (err) return;
          acked.push(i);
          if (!killed && acked.length >= 3000) {
            killed = true;
            daemon.proc.kill('SIGKILL');
            resolve();
          }
        });
      }
    });
    await within(killedAt, 30_000, 'not enough PUBACKs');
    await daemon.exited;
    await new Promise((r) => setTimeout(r, 100)); // PUBACKs already in the socket buffer still count
    const ackedCount = acked.length;
    client.end(true);
    assert.ok(ackedCount < total, 'the daemon died in the middle of the burst');
    const stored = new Set(storedValues(dataDir, device.id, 'n'));
    const missing = acked.filter((v) => !stored.has(v));
    assert.deepEqual(missing.slice(0, 10), [], `${missing.length} of ${ackedCount} acknowledged states are missing (stored ${stored.size})`);
    assert.ok(stored.size >= ackedCount);
    console.log(`durability: ${ackedCount} PUBACKs received before kill -9, ${stored.size} states stored`);

    // Restart: the latest feed message is delivered retained, rebuilt from SQLite.
    daemon = await startDaemon({ dataDir, env: { OUTPOST_RATE_LIMIT: '0' } });
    const app = cliJson<{ token: string }>(['token', 'create', '--name', 'reader', '--scopes', 'read'], dataDir).token;
    const latest = await api(daemon.url, 'GET', `/device/${device.id}/asset/n/state`, { token: app });
    assert.equal(latest.status, 200);
    const sub = await connectClient(daemon.mqttPort, app);
    await sub.subscribeCode(`device/${device.id}/asset/+/feed`);
    const retained = await sub.waitFor((m) => m.topic === `device/${device.id}/asset/n/feed`);
    assert.equal(retained.retain, true);
    assert.deepEqual(JSON.parse(retained.text), latest.body.state);
    await sub.end();

    // And after a clean restart too, with a newer state.
    const dev = await connectClient(daemon.mqttPort, device.token);
    await dev.client.publishAsync(`device/${device.id}/asset/n/state`, '{"value": -1, "at": "2099-01-01T00:00:00Z"}', { qos: 1 });
    await dev.end();
    assert.equal(await daemon.stop(), 0);
    daemon = await startDaemon({ dataDir });
    const sub2 = await connectClient(daemon.mqttPort, device.token);
    await sub2.subscribeCode(`device/${device.id}/asset/n/feed`);
    const again = await sub2.waitFor((m) => m.topic === `device/${device.id}/asset/n/feed`);
    assert.equal(again.retain, true);
    assert.deepEqual(JSON.parse(again.text), { value: -1, at: '2099-01-01T00:00:00.000Z' });
    await sub2.end();
  } finally {
    await daemon.stop();
    removeDir(dataDir);
  }
});

test('payload and rate limits are reported on the errors topic; TLS listener', async () => {
  const dir = tempDataDir();
  const certDir = tempDataDir();
  const cert = join(certDir, 'cert.pem');
  const key = join(certDir, 'key.pem');
  const ssl = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-subj', '/CN=localhost', '-days', '1'], { encoding: 'utf8' });
  assert.equal(ssl.status, 0, ssl.stderr);
  const configFile = join(certDir, 'outpost.json');
  writeFileSync(configFile, JSON.stringify({ version: 1, mqtt: { payloadLimit: 64, tls: { enabled: true, port: 0, cert, key } }, limits: { rate: 1, burst: 3 } }));
  const daemon = await startDaemon({ dataDir: dir, args: ['--config', configFile] });
  try {
    const ready = JSON.parse(daemon.logs.find((l) => l.includes('"msg":"ready"'))!);
    assert.ok(ready.ports.mqttTls > 0, 'ready line reports ports.mqttTls');
    const device = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'limited'], dir);
    cliJson(['asset', 'create', device.id, '--name', 't', '--is', 'sensor', '--profile', '{"type":"number"}'], dir);
    const dev = await connectClient(daemon.mqttPort, device.token);
    await dev.subscribeCode(`device/${device.id}/errors`);
    const topic = `device/${device.id}/asset/t/state`;
    await dev.client.publishAsync(topic, JSON.stringify({ value: 1, pad: 'x'.repeat(100) }), { qos: 1 });
    const tooLarge = await dev.waitFor((m) => JSON.parse(m.text).code === 'PAYLOAD_TOO_LARGE');
    assert.equal(JSON.parse(tooLarge.text).topic, topic);
    for (let i = 0; i < 6; i++) await dev.client.publishAsync(topic, `{"value": ${i}}`, { qos: 1 });
    await dev.waitFor((m) => JSON.parse(m.text).code === 'RATE_LIMITED');
    assert.ok(dev.client.connected, 'limits do not close the connection');
    await dev.end();

    const secure = wrap(
      await mqtt.connectAsync(`mqtts://127.0.0.1:${ready.ports.mqttTls}`, { username: device.token, rejectUnauthorized: false, reconnectPeriod: 0 }),
    );
    assert.equal(await secure.subscribeCode(`device/${device.id}/asset/t/feed`), 1);
    const refused = await secure.subscribeCode('#');
    assert.equal(refused, 128);
    await secure.end();
  } finally {
    await daemon.stop();
    removeDir(dir);
    removeDir(certDir);
  }
});
