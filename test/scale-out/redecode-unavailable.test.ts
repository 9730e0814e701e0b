// Re-decoding replaces states in the node's SQLite file, which a central on PostgreSQL does not
// keep (docs/scale-out.md, "What is not shared (yet)"): there it is refused with 409
// REDECODE_UNAVAILABLE, over HTTP and from the CLI, instead of a 202 for a job that changes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, cli, cliJson, removeDir, startDaemon, tempDataDir } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';

test('a central on PostgreSQL refuses re-decoding with REDECODE_UNAVAILABLE (HTTP and CLI)', { timeout: 120_000 }, async (t) => {
  const pg = await startPostgres();
  const url = await pg.createDatabase();
  const dataDir = tempDataDir();
  const env = { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: url };
  const node = await startDaemon({ dataDir, env });
  t.after(async () => {
    await node.stop();
    await pg.dispose();
    removeDir(dataDir);
  });
  const admin = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,admin'], dataDir, env).token;
  const created = await api(node.url, 'POST', '/devices', { token: admin, json: { name: 'meter' } });
  assert.equal(created.status, 201, created.text);
  const deviceId = (created.body as { id: string }).id;

  const refused = await api(node.url, 'POST', `/device/${deviceId}/redecode`, { token: admin, json: {} });
  assert.equal(refused.status, 409, refused.text);
  assert.equal(refused.body.code, 'REDECODE_UNAVAILABLE', refused.text);
  assert.match(refused.body.error, /PostgreSQL/);
  // No job was left behind for the node to pick up.
  assert.equal((await api(node.url, 'GET', `/device/${deviceId}/redecode`, { token: admin })).status, 404);

  const fromCli = cli(['device', 'redecode', deviceId, '--data', dataDir], env);
  assert.notEqual(fromCli.code, 0, fromCli.stdout);
  assert.match(fromCli.stderr, /re-decoding is not available on a central on PostgreSQL/);
});
