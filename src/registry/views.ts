import type { AssetRecord, DeviceRecord, TokenRecord } from '../core/model.js';
import type { Store } from '../store/store.js';
import type { LatestState, StateReads } from '../store/state-reads.js';

const iso = (ms: number) => new Date(ms).toISOString();

export interface StateView {
  value: unknown;
  at: string;
}

/** Assets whose latest states one query of a streamed list reads: few values held at once, few round trips to PostgreSQL. */
const STREAM_CHUNK = 32;

/**
 * The asset object (docs/api.md, "Paths"), the shape the cloud SDKs parse. The views take the
 * latest states as data: the daemon reads them through its StateReads (SQLite or PostgreSQL), the
 * CLI from the SQLite file it opened.
 */
export function assetView(asset: AssetRecord, latest: LatestState | undefined) {
  return assetShape(asset, latest);
}

export async function readAssetView(asset: AssetRecord, states: StateReads) {
  return assetShape(asset, await states.latest(asset.id));
}

/** A device's assets with their latest states. */
export function deviceAssetsView(assets: readonly AssetRecord[], latest: ReadonlyMap<string, LatestState>) {
  return assets.map((asset) => assetShape(asset, latest.get(asset.id)));
}

/** The same, read in one query of latest states whatever the number of assets. */
export async function readDeviceAssetsView(deviceId: string, store: Pick<Store, 'assets'>, states: StateReads) {
  const assets = store.assets.list(deviceId);
  return deviceAssetsView(assets, await states.latestOf(assets.map((a) => a.id)));
}

/**
 * The same list a few assets at a time, their latest states read only when they are reached: for
 * answers streamed to the client (streamJson), which then never hold every value at once.
 */
export async function* eachDeviceAssetView(deviceId: string, store: Pick<Store, 'assets'>, states: StateReads) {
  const assets = store.assets.list(deviceId);
  for (let i = 0; i < assets.length; i += STREAM_CHUNK) {
    const chunk = assets.slice(i, i + STREAM_CHUNK);
    const latest = await states.latestOf(chunk.map((a) => a.id));
    for (const asset of chunk) yield assetShape(asset, latest.get(asset.id));
  }
}

function assetShape(asset: AssetRecord, latest: LatestState | undefined) {
  return {
    id: asset.id,
    deviceId: asset.deviceId,
    name: asset.name,
    title: asset.title,
    description: asset.description,
    is: asset.is,
    profile: asset.profile,
    state: latest ? ({ value: JSON.parse(latest.valueJson), at: iso(latest.at) } as StateView) : null,
    createdOn: iso(asset.createdOn),
    updatedOn: iso(asset.updatedOn),
  };
}

export function deviceView(device: DeviceRecord) {
  return {
    id: device.id,
    name: device.name,
    title: device.title,
    description: device.description,
    createdOn: iso(device.createdOn),
    updatedOn: iso(device.updatedOn),
    // Central role (docs/sync.md): the gateway a device is behind, and when that gateway deleted it.
    ...(device.gatewayId ? { gatewayId: device.gatewayId } : {}),
    ...(device.removedAtGateway ? { removedAtGateway: iso(device.removedAtGateway) } : {}),
  };
}

export function deviceWithAssetsView(device: DeviceRecord, assets: readonly AssetRecord[], latest: ReadonlyMap<string, LatestState>) {
  return { ...deviceView(device), assets: deviceAssetsView(assets, latest) };
}

export async function readDeviceWithAssetsView(device: DeviceRecord, store: Pick<Store, 'assets'>, states: StateReads) {
  return { ...deviceView(device), assets: await readDeviceAssetsView(device.id, store, states) };
}

/** Never includes the secret: only its hash is stored. */
export function tokenView(token: TokenRecord) {
  return {
    id: token.id,
    kind: token.kind,
    name: token.name,
    deviceId: token.deviceId,
    scopes: token.scopes,
    createdOn: iso(token.createdOn),
    revokedOn: token.revokedOn === null ? null : iso(token.revokedOn),
  };
}
