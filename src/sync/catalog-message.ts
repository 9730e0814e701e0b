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

/**
 * What a device may put in its catalog message (docs/security.md, "Sync limits"): titles and
 * descriptions are cut to these lengths (in UTF-16 code units, ending with "…"). A device token may
 * write its own assets' descriptions, and without a bound three 60 KB descriptions made a message
 * larger than the central accepts, which stopped every device's sync.
 */
export const CATALOG_TITLE_MAX = 256;
export const CATALOG_DESCRIPTION_MAX = 1024;

function cut(text: string | null, max: number): string | null {
  if (text === null || text.length <= max) return text;
  let end = max - 1;
  // Never split a surrogate pair: the cut text stays valid Unicode.
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/** The catalog message of a device (docs/sync.md); assets sorted by name so an unchanged device gives the same text. */
export function catalogMessage(device: DeviceRecord, assets: readonly AssetRecord[]): CatalogMessage {
  return {
    id: device.id,
    name: device.name,
    title: cut(device.title, CATALOG_TITLE_MAX),
    description: cut(device.description, CATALOG_DESCRIPTION_MAX),
    assets: [...assets]
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((a) => ({ name: a.name, is: a.is, profile: a.profile, title: cut(a.title, CATALOG_TITLE_MAX), description: cut(a.description, CATALOG_DESCRIPTION_MAX) })),
  };
}

/**
 * The catalog message as sent, within `maxBytes` when it can be: a device with many assets whose
 * cut texts still do not fit goes without its assets' titles and descriptions (names, kinds and
 * profiles are what the central needs to take the device's states). What still does not fit is
 * set aside by the link like any row the upstream cannot take.
 */
export function catalogText(device: DeviceRecord, assets: readonly AssetRecord[], maxBytes: number): string {
  const message = catalogMessage(device, assets);
  const text = JSON.stringify(message);
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return JSON.stringify({ ...message, assets: message.assets.map((a) => ({ ...a, title: null, description: null })) });
}
