import type { TokenKind } from './ids.js';
import type { Scope } from './model.js';

/** Who is asking: resolved from a token on every request or MQTT connection (docs/api.md, "Authentication and rights"). */
export interface Principal {
  tokenId: string;
  kind: TokenKind;
  /** The device a device token belongs to. */
  deviceId: string | null;
  scopes: readonly Scope[];
  /** A `gateway:` token's gateway (central role): it has the device rights of every device behind it. */
  gatewayId?: string | null;
  /** For a gateway token: whether a device is behind that gateway now (read through the catalog cache). */
  ownsDevice?: (deviceId: string) => boolean;
}

const hasScope = (p: Principal, scope: Scope) => p.kind === 'app' && p.scopes.includes(scope);

export const isAdmin = (p: Principal) => hasScope(p, 'admin');

/** Admin implies read: managing devices means seeing them. */
export const canReadAny = (p: Principal) => hasScope(p, 'read') || isAdmin(p);

export const isOwnDevice = (p: Principal, deviceId: string) =>
  p.kind === 'device' ? p.deviceId === deviceId : p.kind === 'gateway' && p.ownsDevice !== undefined && p.ownsDevice(deviceId);

export const canReadDevice = (p: Principal, deviceId: string) => isOwnDevice(p, deviceId) || canReadAny(p);

/** Devices create, change and delete their own assets (the cloud SDKs do); admins any. */
export const canManageAssets = (p: Principal, deviceId: string) => isOwnDevice(p, deviceId) || isAdmin(p);

/** Only the device itself publishes its states. */
export const canPublishState = (p: Principal, deviceId: string) => isOwnDevice(p, deviceId);

export const canCommand = (p: Principal) => hasScope(p, 'command');
