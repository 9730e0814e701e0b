import type { AssetRecord, DeviceRecord, TokenRecord } from '../core/model.js';
import type { Store } from '../store/store.js';

const iso = (ms: number) => new Date(ms).toISOString();

export interface StateView {
  value: unknown;
  at: string;
}

type LatestState = { at: number; valueJson: string } | undefined;

/** The asset object (docs/api.md, "Paths"), the shape the cloud SDKs parse. */
export function assetView(asset: AssetRecord, store: Pick<Store, 'states'>) {
  return assetShape(asset, store.states.latest(asset.id));
}

/** A device's assets with their latest states: two queries, whatever their number. */
export function deviceAssetsView(deviceId: string, store: Pick<Store, 'assets' | 'states'>) {
  const latest = store.states.latestOfDevice(deviceId);
  return store.assets.list(deviceId).map((asset) => assetShape(asset, latest.get(asset.id)));
}

/**
 * The same list one asset at a time, each latest state read only when its asset is reached: for
 * answers streamed to the client (streamJson), which then never hold every value at once.
 */
export function* eachDeviceAssetView(deviceId: string, store: Pick<Store, 'assets' | 'states'>) {
  for (const asset of store.assets.list(deviceId)) yield assetShape(asset, store.states.latest(asset.id));
}

function assetShape(asset: AssetRecord, latest: LatestState) {
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

export function deviceWithAssetsView(device: DeviceRecord, store: Pick<Store, 'assets' | 'states'>) {
  return { ...deviceView(device), assets: deviceAssetsView(device.id, store) };
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
