import type { TokenKind } from './ids.js';
import type { Profile } from './profiles.js';

/**
 * The domain records every layer speaks: devices, their assets, and the tokens that grant access.
 * They live in core (not in the store) so rules such as access checks depend on the model, never on
 * how it is persisted (docs/architecture.md, "Store").
 */

export type AssetKind = 'sensor' | 'actuator' | 'virtual' | 'config';
export const ASSET_KINDS: readonly AssetKind[] = ['sensor', 'actuator', 'virtual', 'config'];
export type Scope = 'read' | 'command' | 'admin';
export const SCOPES: readonly Scope[] = ['read', 'command', 'admin'];

export interface DeviceRecord {
  id: string;
  name: string;
  title: string | null;
  description: string | null;
  payloadFormat: string;
  codec: string | null;
  createdOn: number;
  updatedOn: number;
  /** At a central: the gateway this device is behind (its catalog and commands go through that gateway). */
  gatewayId?: string | null;
  /** At a central: when the gateway reported the device deleted (its data is kept). */
  removedAtGateway?: number | null;
}

export interface AssetRecord {
  id: string;
  deviceId: string;
  name: string;
  title: string | null;
  description: string | null;
  is: AssetKind;
  profile: Profile;
  createdOn: number;
  updatedOn: number;
}

export interface TokenRecord {
  id: string;
  kind: TokenKind;
  name: string;
  deviceId: string | null;
  scopes: Scope[];
  createdOn: number;
  revokedOn: number | null;
  /** A `gateway:` token's gateway (central role). */
  gatewayId?: string | null;
}
