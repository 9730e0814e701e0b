// central.postgres and central.redis (docs/scale-out.md): what the config refuses, and the exit
// code and message a daemon started with it gives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/core/config.js';
import { cli, removeDir, tempDataDir } from '../helpers/daemon.js';

const refused = (env: Record<string, string>, pattern: RegExp) =>
  assert.throws(() => loadConfig({ env }), (e: unknown) => e instanceof ConfigError && pattern.test(e.message), JSON.stringify(env));

test('central.postgres and central.redis: URLs, only for a central, Redis only with PostgreSQL', () => {
  const c = loadConfig({ env: { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: 'postgres://u@db/outpost', OUTPOST_REDIS_URL: 'redis://cache:6379' } });
  assert.equal(c.central.postgres, 'postgres://u@db/outpost');
  assert.equal(c.central.redis, 'redis://cache:6379');
  assert.equal(loadConfig({ env: {} }).central.postgres, null);
  refused({ OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: 'mysql://db/outpost' }, /central\.postgres.*pattern/);
  refused({ OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: 'postgres://db/o', OUTPOST_REDIS_URL: 'memcache://x' }, /central\.redis.*pattern/);
  refused({ OUTPOST_ROLE: 'central', OUTPOST_REDIS_URL: 'redis://cache:6379' }, /central\.redis: needs central\.postgres/);
  refused({ OUTPOST_POSTGRES_URL: 'postgres://db/o' }, /central\.postgres: only with role "central"/);
});

test('outpost run exits 2 naming the key, 1 when PostgreSQL does not answer; outpost migrate without PostgreSQL says what it needs', () => {
  const dir = tempDataDir();
  try {
    const run = cli(['run', '--data', dir], { OUTPOST_ROLE: 'central', OUTPOST_REDIS_URL: 'redis://127.0.0.1:1', OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0' });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /central\.redis: needs central\.postgres/);
    // PostgreSQL not there: exit 1 with one line naming the setting (the service manager retries).
    const noDatabase = cli(['run', '--data', dir], { OUTPOST_ROLE: 'central', OUTPOST_POSTGRES_URL: 'postgres://postgres@127.0.0.1:1/outpost', OUTPOST_HTTP_PORT: '0', OUTPOST_MQTT_PORT: '0', OUTPOST_GWMP_PORT: '0', OUTPOST_BS_PORT: '0' });
    assert.equal(noDatabase.code, 1, noDatabase.stderr);
    assert.match(noDatabase.stderr, /^outpost: central\.postgres: PostgreSQL does not answer, the node cannot start/m);
    const migrate = cli(['migrate', '--data', dir]);
    assert.equal(migrate.code, 2);
    assert.match(migrate.stderr, /needs central\.postgres/);
  } finally {
    removeDir(dir);
  }
});
