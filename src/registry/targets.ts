import { ServiceError } from '../core/errors.js';
import type { Catalog, CachedAsset } from '../store/catalog.js';

/** How a request names an asset: by its device and name, or by its own id. */
export type AssetTarget = { deviceId: string; assetName: string } | { assetId: string };

/** The asset a request names, or DEVICE_NOT_FOUND / ASSET_NOT_FOUND (404) saying which part is unknown. */
export function resolveAsset(catalog: Catalog, target: AssetTarget): CachedAsset {
  if ('assetId' in target) {
    const asset = catalog.assetById(target.assetId);
    if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset ${target.assetId} not found`);
    return asset;
  }
  if (!catalog.device(target.deviceId)) throw new ServiceError('DEVICE_NOT_FOUND', `device ${target.deviceId} not found`);
  const asset = catalog.assetByName(target.deviceId, target.assetName);
  if (!asset) throw new ServiceError('ASSET_NOT_FOUND', `asset "${target.assetName}" not found on device ${target.deviceId}`);
  return asset;
}
