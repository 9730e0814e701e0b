// The SQLite side of a central node on PostgreSQL (docs/scale-out.md, "The catalog"): a catalog
// write tried on the node's file and rolled back, with the rows it touched read out (cascades
// included), and the cache written from PostgreSQL's rows with a cursor that skips what it holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/store/store.js';
import { Catalog } from '../../src/store/catalog.js';
import { Registry } from '../../src/registry/registry.js';
import { ReplicaLog, isCatalogCache, type CatalogRow } from '../../src/store/replica-log.js';
import { isServiceError } from '../../src/core/errors.js';
import { systemClock } from '../../src/core/time.js';

function openNode() {
  const store = Store.open(mkdtempSync(join(tmpdir(), 'outpost-cache-')));
  const catalog = new Catalog(store);
  const registry = new Registry(catalog, store, systemClock, { assetsPerDevice: 10 }, { devicesPerGateway: 10 });
  return { store, catalog, registry };
}

test('a dry run returns the rows a write would change and leaves the file as it was', (t) => {
  const { store, registry } = openNode();
  t.after(() => store.close());
  const { result, changes } = store.dryRunCatalogWrite(() => registry.createDevice({ name: 'pump' }));
  assert.equal(store.devices.get(result.device.id), undefined, 'rolled back');
  assert.equal(store.tokens.get(result.tokenId), undefined, 'its token too');
  const tables = changes.map((c) => c.tbl).sort();
  assert.deepEqual(tables, ['devices', 'tokens']);
  const device = changes.find((c) => c.tbl === 'devices')!;
  assert.equal(device.pk, JSON.stringify([result.device.id]));
  assert.equal(device.row!.name, 'pump');
  // Nothing is noted outside a dry run: a write made directly afterwards leaves the next run empty.
  registry.createDevice({ name: 'direct' });
  assert.deepEqual(store.dryRunCatalogWrite(() => 1).changes, []);
});

test('a dry run notes what a cascade removes, and a refused write changes nothing', (t) => {
  const { store, registry } = openNode();
  t.after(() => store.close());
  const { device, tokenId } = registry.createDevice({ name: 'pump' });
  const asset = registry.createAsset(device.id, { name: 't', is: 'sensor', profile: { type: 'number' } });
  const { changes } = store.dryRunCatalogWrite(() => registry.deleteDevice(device.id));
  const removed = changes.filter((c) => c.row === null).map((c) => `${c.tbl}:${c.pk}`).sort();
  assert.deepEqual(removed, [`assets:["${asset.id}"]`, `devices:["${device.id}"]`, `tokens:["${tokenId}"]`].sort());
  assert.ok(store.devices.get(device.id), 'still there');
  assert.throws(
    () => store.dryRunCatalogWrite(() => registry.createAsset(device.id, { name: 't', is: 'sensor', profile: { type: 'number' } })),
    (err: unknown) => isServiceError(err) && err.code === 'ASSET_EXISTS',
  );
  assert.equal(store.assets.list(device.id).length, 1);
});

test('the cache takes rows above its cursor only, and says it is a cache', (t) => {
  const source = openNode();
  const node = openNode();
  t.after(() => {
    source.store.close();
    node.store.close();
  });
  const { result, changes } = source.store.dryRunCatalogWrite(() => source.registry.createDevice({ name: 'pump' }));
  const rows: CatalogRow[] = changes.map((c, i) => ({ ...c, seq: 10 + i }));
  const log = new ReplicaLog(node.store.path);
  t.after(() => log.close());
  assert.equal(isCatalogCache(node.store.path), true);
  assert.equal(log.cursor(), 0);
  assert.equal(log.apply(rows), rows.length);
  assert.equal(log.cursor(), 10 + rows.length - 1);
  // Written through another connection: the node's catalog notices, as it does the CLI's commits.
  assert.equal(node.catalog.syncWithDisk(), true);
  assert.equal(node.catalog.device(result.device.id)?.name, 'pump');
  // An older version of the row (a pull that read before a newer write was applied) is skipped.
  const stale = rows.find((r) => r.tbl === 'devices')!;
  assert.equal(log.apply([{ ...stale, row: { ...stale.row, name: 'stale' }, seq: 5 }]), 0);
  assert.equal(node.store.devices.get(result.device.id)!.name, 'pump');
  // A deletion above the cursor removes it.
  assert.equal(log.apply([{ tbl: 'devices', pk: stale.pk, row: null, seq: 99 }]), 1);
  assert.equal(node.store.devices.get(result.device.id), undefined);
  assert.equal(log.cursor(), 99);
  assert.equal(isCatalogCache(source.store.path), false);
});
