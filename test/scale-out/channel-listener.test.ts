// The central's LISTEN connection (src/scale-out/channel-listener.ts) against a real PostgreSQL:
// notifications arrive, and a stop leaves no connection open, even one still being opened when the
// stop came (its socket alone kept a stopped daemon's process alive).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChannelListener } from '../../src/scale-out/channel-listener.js';
import { createLogger } from '../../src/ops/logger.js';
import { startPostgres } from '../helpers/postgres.js';
import { sleep, until } from '../helpers/wait.js';

test('a LISTEN connection: notifications arrive, and stop closes it even while it is being opened', { timeout: 120_000 }, async (t) => {
  const pg = await startPostgres();
  t.after(() => pg.dispose());
  const url = await pg.createDatabase();
  const database = url.split('/').pop()!;
  const listening = (channel: string) => Number(pg.psql(`SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN ${channel}'`, database).trim());

  await t.test('notifications reach the handler; stop closes the connection', async () => {
    const got: string[] = [];
    const listener = new ChannelListener({ url, channel: 'test_notes', onNotify: (p) => got.push(p), logger: createLogger('silent'), what: 'notes' });
    await listener.start();
    assert.equal(listening('test_notes'), 1);
    pg.psql("NOTIFY test_notes, 'hello'", database);
    await until('the notification', () => got.includes('hello'), 5000);
    await listener.stop();
    await until('the connection closed', () => listening('test_notes') === 0, 5000);
  });

  await t.test('stopped while the connection is being opened: nothing stays open', async () => {
    for (let i = 0; i < 3; i++) {
      const listener = new ChannelListener({ url, channel: `test_race${i}`, onNotify: () => {}, logger: createLogger('silent'), what: 'notes' });
      const started = listener.start();
      await listener.stop();
      await started;
      await sleep(300);
      assert.equal(listening(`test_race${i}`), 0, 'no LISTEN connection left after stop');
    }
  });
});
