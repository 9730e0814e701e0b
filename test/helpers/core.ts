// The daemon's own core (store, catalog, group commit, pipeline, registry, command router, device
// codecs), composed exactly as `outpost run` composes it but with no door open: what the unit
// tests of ingest, commands and codecs run against, on a real SQLite file in a fresh temp dir.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type OutpostConfig } from '../../src/core/config.js';
import { systemClock } from '../../src/core/time.js';
import { createLogger } from '../../src/ops/logger.js';
import { Core } from '../../src/roles/core.js';

export interface TestCore {
  dir: string;
  core: Core;
  /** Closes the core (last commit, store, lock) and removes the data dir. */
  close(): Promise<void>;
}

/** `tune` may change the configuration before the core opens (limits, store settings). */
export function openTestCore(name: string, tune?: (config: OutpostConfig) => void): TestCore {
  const dir = mkdtempSync(join(tmpdir(), `outpost-${name}-`));
  const config = loadConfig({ dataDir: dir, env: {} });
  tune?.(config);
  const core = Core.open(config, createLogger('silent'), systemClock);
  return {
    dir,
    core,
    close: async () => {
      await core.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
