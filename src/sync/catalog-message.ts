import type { AssetRecord, DeviceRecord } from '../core/model.js';

/** `gateway/<GatewayID>/device/<DeviceID>`: how a gateway describes one of its devices to the central. */
export const catalogTopic = (gatewayId: string, deviceId: string) => `gateway/${gatewayId}/device/${deviceId}`;
export const gatewayStatusTopic = (gatewayId: string) => `gateway/${gatewayId}/status`;
export const gatewayErrorsTopic = (gatewayId: string) => `gateway/${gatewayId}/errors`;

export interface CatalogMessage {
  id: string;
  name: string;
  title: string | null;
  description: string | null;
  assets: Array<{ name: string; is: string; profile: unknown; title: string | null; description: string | null }>;
}

/** The catalog message of a device (docs/sync.md); assets sorted by name so an unchanged device gives the same text. */
export function catalogMessage(device: DeviceRecord, assets: readonly AssetRecord[]): CatalogMessage {
  return {
    id: device.id,
    name: device.name,
    title: device.title,
    description: device.description,
    assets: [...assets]
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((a) => ({ name: a.name, is: a.is, profile: a.profile, title: a.title, description: a.description })),
  };
}
