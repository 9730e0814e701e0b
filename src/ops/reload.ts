import type { OutpostConfig } from '../core/config.js';

/** What a reload did: keys whose value changed, which of them took effect, which need a restart. */
export interface ReloadOutcome {
  changed: string[];
  applied: string[];
  needsRestart: string[];
  /** Appliers that failed, with their message: those keys keep their old value. */
  failed: Array<{ key: string; error: string }>;
}

/** Takes the new configuration for the keys under its prefix; `changed` lists those keys. */
export type ReloadApplier = (next: OutpostConfig, changed: string[]) => void | Promise<void>;

type Json = Record<string, unknown>;

/** Leaf key paths of a config; arrays are compared whole (a changed serial source list is one change). */
function leaves(value: unknown, prefix: string, out: Map<string, string>): Map<string, string> {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value as Json)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out.set(prefix, JSON.stringify(value));
  }
  return out;
}

/** Keys whose value differs between two configurations, sorted. */
export function changedKeys(before: OutpostConfig, after: OutpostConfig): string[] {
  const a = leaves(before, '', new Map());
  const b = leaves(after, '', new Map());
  const keys = new Set([...a.keys(), ...b.keys()]);
  return [...keys].filter((k) => a.get(k) !== b.get(k)).sort();
}

const covers = (prefix: string, key: string) => key === prefix || key.startsWith(prefix + '.');

/**
 * SIGHUP reloads (docs/operations.md, "Changing the configuration"). Each part of the daemon that
 * can take a new value without dropping connections registers an applier for its keys; a changed
 * key that no applier covers is reported as needing a restart and keeps running on its old value.
 * Radio and sync register their own keys the same way (`reloader.register('upstream', …)`).
 */
export class ConfigReloader {
  #current: OutpostConfig;
  readonly #appliers: Array<{ prefix: string; apply: ReloadApplier }> = [];

  constructor(current: OutpostConfig) {
    this.#current = structuredClone(current);
  }

  register(prefix: string, apply: ReloadApplier): void {
    this.#appliers.push({ prefix, apply });
    // The most specific prefix wins, so `http.bodyLimit` can be reloadable while `http` is not.
    this.#appliers.sort((x, y) => y.prefix.length - x.prefix.length);
  }

  /** Key prefixes that can change without a restart. */
  get reloadable(): string[] {
    return this.#appliers.map((a) => a.prefix).sort();
  }

  async reload(next: OutpostConfig): Promise<ReloadOutcome> {
    const changed = changedKeys(this.#current, next);
    const byApplier = new Map<ReloadApplier, string[]>();
    const needsRestart: string[] = [];
    for (const key of changed) {
      const applier = this.#appliers.find((a) => covers(a.prefix, key));
      if (!applier) needsRestart.push(key);
      else byApplier.set(applier.apply, [...(byApplier.get(applier.apply) ?? []), key]);
    }
    const applied: string[] = [];
    const failed: ReloadOutcome['failed'] = [];
    for (const [apply, keys] of byApplier) {
      try {
        await apply(next, keys);
        applied.push(...keys);
        for (const key of keys) setLeaf(this.#current as unknown as Json, key, getLeaf(next as unknown as Json, key));
      } catch (err) {
        for (const key of keys) failed.push({ key, error: (err as Error).message });
      }
    }
    // Keys that need a restart are not recorded as current: the next reload still reports them.
    return { changed, applied: applied.sort(), needsRestart, failed };
  }
}

function getLeaf(obj: Json, path: string): unknown {
  let node: unknown = obj;
  for (const part of path.split('.')) node = node && typeof node === 'object' ? (node as Json)[part] : undefined;
  return node;
}

function setLeaf(obj: Json, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = obj;
  for (const part of parts.slice(0, -1)) {
    if (!node[part] || typeof node[part] !== 'object') node[part] = {};
    node = node[part] as Json;
  }
  const last = parts[parts.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = structuredClone(value);
}
