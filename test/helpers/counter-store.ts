// A real store in a fresh temp dir holding one device with one integer sensor, and a maker of its
// next state: what the group commit tests write through a StateWriter.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store, type StoreOptions } from '../../src/store/store.js';
import type { StoredState } from '../../src/store/states.js';

export interface CounterStore {
  dir: string;
  store: Store;
  /** The ID of the device's one asset, `count`. */
  assetId: string;
  /** The next state of the device's `count` asset: values 0, 1, 2, … at increasing times. */
  state: () => StoredState;
  /** Closes the store and removes its dir. */
  close: () => void;
}

export function openCounterStore(name: string, options: StoreOptions = {}): CounterStore {
  const dir = mkdtempSync(join(tmpdir(), `outpost-${name}-`));
  const store = Store.open(dir, options);
  const now = Date.now();
  const { device } = store.devices.create({ name: 'meter' }, now);
  const asset = store.assets.create({ deviceId: device.id, name: 'count', title: null, description: null, is: 'sensor', profile: { type: 'integer' } }, now);
  let value = 0;
  return {
    dir,
    store,
    assetId: asset.id,
    state: () => ({ assetId: asset.id, at: now + value, valueJson: String(value++), receivedAt: now }),
    close: () => {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
