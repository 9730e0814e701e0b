// The same behaviour on both engines (docs/scale-out.md): the single-machine central's end-to-end
// test (test/sync/central.test.ts: the gateway catalog, a central outage under continuous ingest,
// kill -9 of a gateway mid-drain, commands to an online and an offline gateway, what a gateway
// token may not touch) runs again, unchanged, against a central node on PostgreSQL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { ROOT } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';

test('test/sync/central.test.ts passes against a central on PostgreSQL', { timeout: 400_000 }, async (t) => {
  const pg = await startPostgres();
  t.after(() => pg.dispose());
  const url = await pg.createDatabase();
  const env: NodeJS.ProcessEnv = { ...process.env, OUTPOST_TEST_POSTGRES_URL: url };
  delete env.NODE_TEST_CONTEXT; // a child test run of its own, reporting here
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', 'test/sync/central.test.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  assert.equal(code, 0, output.slice(-6000));
  // It did run against PostgreSQL: the states are there.
  assert.ok(Number(pg.psql('SELECT count(*) FROM states', url.split('/').pop())) > 1000, 'states stored in PostgreSQL');
  assert.match(output, /pass [1-9]/);
});
