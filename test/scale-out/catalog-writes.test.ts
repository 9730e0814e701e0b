// A catalog write on a central node on PostgreSQL (docs/scale-out.md, "The catalog"), driven
// through the registry against a real PostgreSQL: answered once PostgreSQL committed it, its
// events after that; another node holding the catalog lock: refused after a bounded wait; PostgreSQL stopped in the middle of a node's life: the write is refused with
// STORE_UNAVAILABLE, the node's SQLite is unchanged and no event went out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/store/store.js';
import { Catalog } from '../../src/store/catalog.js';
import { Registry } from '../../src/registry/registry.js';
import { isServiceError } from '../../src/core/errors.js';
import { systemClock } from '../../src/core/time.js';
import { createLogger } from '../../src/ops/logger.js';
import { CentralDatabase } from '../../src/scale-out/postgres.js';
import { migratePostgres } from '../../src/scale-out/schema.js';
import { CatalogReplica } from '../../src/scale-out/catalog-replica.js';
import pg_ from 'pg';
import { startPostgres } from '../helpers/postgres.js';
import { removeDir } from '../helpers/daemon.js';

test('a catalog write through PostgreSQL: committed first, refused whole while it is away', { timeout: 90_000 }, async (t) => {
  const pg = await startPostgres();
  const url = await pg.createDatabase();
  const dbName = url.split('/').pop()!;
  const dir = mkdtempSync(join(tmpdir(), 'outpost-writes-'));
  const store = Store.open(dir);
  const catalog = new Catalog(store);
  const registry = new Registry(catalog, store, systemClock, { assetsPerDevice: 10 }, { devicesPerGateway: 10 });
  const db = new CentralDatabase(url);
  await migratePostgres(db);
  const replica = new CatalogReplica({ store, pg: db, logger: createLogger('silent'), catalog });
  registry.writes = replica;
  t.after(async () => {
    await replica.stop();
    await db.close().catch(() => {});
    store.close();
    await pg.dispose();
    removeDir(dir);
  });
  const revoked: string[] = [];
  registry.on('tokenRevoked', (id) => revoked.push(id));

  const { device, token, tokenId } = await registry.write(() => registry.createDevice({ name: 'pump' }));
  assert.equal(pg.psql(`SELECT row->>'name' FROM catalog_rows WHERE tbl = 'devices' AND pk = '["${device.id}"]'`, dbName), 'pump');
  assert.equal(store.devices.get(device.id)?.name, 'pump', 'in the cache once committed');
  assert.equal(Number(pg.psql(`SELECT max(seq) FROM catalog_rows`, dbName)) > 0, true);

  // A refusal by the rules is the rules' answer, and nothing reaches PostgreSQL.
  const rowsBefore = pg.psql('SELECT count(*) FROM catalog_rows', dbName);
  await assert.rejects(registry.write(() => registry.createDevice({ id: device.id, name: 'again' })), (err: unknown) => isServiceError(err) && err.code === 'DEVICE_EXISTS');
  assert.equal(pg.psql('SELECT count(*) FROM catalog_rows', dbName), rowsBefore);

  // Another node holding the catalog lock (stalled mid-write): a write waits a bounded time, then 503.
  const holder = new pg_.Client({ connectionString: url });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT pg_advisory_xact_lock($1)', [0x6f757471]);
  const waitedFrom = Date.now();
  await assert.rejects(registry.write(() => registry.createDevice({ name: 'blocked' })), (err: unknown) => isServiceError(err) && err.code === 'STORE_UNAVAILABLE' && /catalog lock/.test(err.message));
  const waited = Date.now() - waitedFrom;
  assert.ok(waited >= 9000 && waited < 20_000, `waited ${waited} ms`);
  await holder.query('ROLLBACK');
  await holder.end();
  assert.equal(store.devices.list().some((d) => d.name === 'blocked'), false);

  await pg.stop('fast');
  const devices = store.devices.list().length;
  await assert.rejects(registry.write(() => registry.createDevice({ name: 'refused' })), (err: unknown) => isServiceError(err) && err.code === 'STORE_UNAVAILABLE');
  await assert.rejects(registry.write(() => registry.revokeToken(tokenId)), (err: unknown) => isServiceError(err) && err.code === 'STORE_UNAVAILABLE');
  assert.equal(store.devices.list().length, devices, 'no device added to the cache');
  assert.equal(store.tokens.get(tokenId)?.revokedOn, null, 'the token still live in the cache');
  assert.equal(catalog.principalForSecret(token)?.tokenId, tokenId, 'and still accepted');
  assert.deepEqual(revoked, [], 'no revocation went out');

  await pg.start();
  let revokedOnce = false;
  for (let i = 0; i < 50 && !revokedOnce; i++) {
    try {
      await registry.write(() => registry.revokeToken(tokenId));
      revokedOnce = true;
    } catch (err) {
      if (!isServiceError(err) || err.code !== 'STORE_UNAVAILABLE') throw err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  assert.ok(revokedOnce, 'taken again once PostgreSQL is back');
  assert.deepEqual(revoked, [tokenId], 'the revocation went out after its commit');
  assert.notEqual(store.tokens.get(tokenId)?.revokedOn, null);
  assert.notEqual(pg.psql(`SELECT row->>'revoked_on' FROM catalog_rows WHERE tbl = 'tokens' AND pk = '["${tokenId}"]'`, dbName), '');
});
