// What the API's route modules are built from, and the device and asset look-ups with their
// read/manage checks that most of them share.
import { canManageAssets, canReadDevice } from '../../../core/access.js';
import type { Clock } from '../../../core/time.js';
import type { CachedAsset, Catalog } from '../../../store/catalog.js';
import type { Store } from '../../../store/store.js';
import type { StateReads } from '../../../store/state-reads.js';
import type { DeviceRecord } from '../../../core/model.js';
import type { StatePipeline } from '../../../ingest/ingest.js';
import { resolveAsset, type AssetTarget } from '../../../registry/targets.js';
import type { CommandRouter } from '../../../commands/router.js';
import type { Registry } from '../../../registry/registry.js';
import type { DeviceCodecs } from '../../../device-codecs/device-codecs.js';
import type { RedecodeRunner } from '../../../device-codecs/redecode.js';
import type { LorawanProvisioning } from '../../../lpwan/provisioning.js';
import { forbid, requireAdmin } from '../access.js';
import type { RequestContext } from '../router.js';

export interface ApiDeps {
  catalog: Catalog;
  /** The aggregates the read paths list from (history, uplinks, tokens, the device list) and codec trials read. */
  store: Pick<Store, 'devices' | 'assets' | 'tokens' | 'states' | 'uplinks' | 'redecodeJobs' | 'gateways' | 'fleet' | 'managedHere'>;
  /** Latest states and history: the SQLite file, or PostgreSQL on central nodes (docs/scale-out.md). */
  states: StateReads;
  registry: Registry;
  pipeline: StatePipeline;
  commands: CommandRouter;
  codecs: DeviceCodecs;
  redecode: RedecodeRunner;
  lorawan?: LorawanProvisioning;
  clock: Clock;
  /** Most bytes of stored payloads and values one page of a list answer carries (`http.pageBytes`, docs/api.md "Pages"). */
  pageBytes: () => number;
  health: () => { status: 'ok' | 'degraded' | 'failing' } & Record<string, unknown>;
  metricsText: () => string;
}

export const iso = (ms: number) => new Date(ms).toISOString();

/** The asset a path names: `/asset/<assetId>/…` or `/device/<deviceId>/asset/<name>/…`. */
export function assetTarget(ctx: RequestContext): AssetTarget {
  return ctx.params.assetId !== undefined ? { assetId: ctx.params.assetId } : { deviceId: ctx.params.deviceId!, assetName: ctx.params.name! };
}

/** The path's device (404), if the token may read it (403). */
export function readableDevice(deps: ApiDeps, ctx: RequestContext): DeviceRecord {
  const p = ctx.principal();
  const device = deps.registry.requireDevice(ctx.params.deviceId!);
  if (!canReadDevice(p, device.id)) forbid(`this token may not read device ${device.id}`);
  return device;
}

/** The path's device (404), if the token may change its assets (403). */
export function manageableDevice(deps: ApiDeps, ctx: RequestContext): DeviceRecord {
  const p = ctx.principal();
  const device = deps.registry.requireDevice(ctx.params.deviceId!);
  if (!canManageAssets(p, device.id)) forbid(`this token may not change the assets of device ${device.id}`);
  return device;
}

/** The path's device for an admin-only path: 403 before 404, so a non-admin learns nothing. */
export function adminDevice(deps: ApiDeps, ctx: RequestContext): DeviceRecord {
  requireAdmin(ctx);
  return deps.registry.requireDevice(ctx.params.deviceId!);
}

/** The path's asset (404), if the token may read its device (403). */
export function readableAsset(deps: ApiDeps, ctx: RequestContext): CachedAsset {
  const p = ctx.principal();
  const asset = resolveAsset(deps.catalog, assetTarget(ctx));
  if (!canReadDevice(p, asset.deviceId)) forbid(`this token may not read device ${asset.deviceId}`);
  return asset;
}
