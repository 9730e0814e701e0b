import { ServiceError } from '../core/errors.js';
import type { AssetRecord, DeviceRecord } from '../core/model.js';
import { isJsonObject, type JsonValue } from '../core/json.js';

/**
 * The wire model's payloads, written once (docs/architecture.md, "One wire model"): what travels on
 * the topics of topics.ts, formatted and read here for the MQTT door, the gateway's upstream sync
 * and the central. Pure functions.
 */

const iso = (ms: number) => new Date(ms).toISOString();

// ---- device topics (docs/mqtt.md)

/** A feed message, and a state as the gateway sends it upstream: `{"value", "at"}`, `at` always set. */
export function feedText(valueJson: string, at: number): string {
  return `{"value":${valueJson},"at":"${iso(at)}"}`;
}

/** An asset command on both command topics: `{value, at, meta?}`. */
export function commandPayload(value: JsonValue, at: number, meta: Record<string, JsonValue> | null): string {
  return JSON.stringify(meta ? { value, at: iso(at), meta } : { value, at: iso(at) });
}

/**
 * A device command on `device/<id>/command` (several assets at once, one LoRa frame for a radio
 * device): `{"values": {<asset>: value…}, "at", "meta"?}`, the body `PUT /device/<id>/command` takes.
 */
export function deviceCommandPayload(values: Record<string, JsonValue>, at: number, meta: Record<string, JsonValue> | null): string {
  return JSON.stringify(meta ? { values, at: iso(at), meta } : { values, at: iso(at) });
}

/** A device event on `device/<id>/events`: `at` as the service's ISO form, then the event's own members. */
export function eventPayload(event: { type: string; at: number; [member: string]: unknown }): string {
  return JSON.stringify({ ...event, at: iso(event.at) });
}

/** A report on `device/<id>/errors` or `gateway/<id>/errors`: `{"at", "topic", "code", "error"}`. */
export function errorReport(at: number, topic: string, code: string, error: string): string {
  return JSON.stringify({ at: iso(at), topic, code, error });
}

// ---- gateway topics (docs/sync.md)

export interface GatewayStatus {
  online: boolean;
  version?: string;
  outbox?: { depth: number; oldestAt: string | null };
}

export function gatewayStatusPayload(status: GatewayStatus): string {
  return JSON.stringify(status);
}

export const OFFLINE_STATUS = gatewayStatusPayload({ online: false });

/** `gateway/<GatewayID>/device/<DeviceID>`: how a gateway describes one of its devices to the central. */
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

const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The catalog message of a device; assets sorted by name so an unchanged device gives the same text. */
export function catalogMessage(device: DeviceRecord, assets: readonly AssetRecord[]): CatalogMessage {
  return {
    id: device.id,
    name: device.name,
    title: cut(device.title, CATALOG_TITLE_MAX),
    description: cut(device.description, CATALOG_DESCRIPTION_MAX),
    assets: [...assets]
      .sort(byName)
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

/**
 * `gateway/<GatewayID>/config/device/<DeviceID>` (central → gateway): a managed device's whole
 * definition at one revision, or its removal from that gateway. `lorawan` is the
 * `PUT /device/<id>/lorawan` body, keys included: it only ever travels on the gateway's own
 * authenticated link. `tokenHash` is the hash of the device token (never the token), so the token
 * issued at the central works at the gateway.
 */
export interface ManagedDeviceDefinition {
  revision: number;
  device: { id: string; name: string; title: string | null; description: string | null };
  assets: Array<{ name: string; is: string; profile: unknown; title: string | null; description: string | null }>;
  codec: { uplink: unknown; downlink?: unknown } | null;
  lorawan?: Record<string, unknown>;
  tokenHash: string | null;
}

export type ManagedDeviceMessage = ManagedDeviceDefinition | { revision: number; deleted: true };

/** The definition without its revision: what the central compares to know whether a device changed. */
export function managedDeviceContent(definition: Omit<ManagedDeviceDefinition, 'revision'>): string {
  return JSON.stringify({ ...definition, assets: [...definition.assets].sort(byName) });
}

export function managedDevicePayload(message: ManagedDeviceMessage): string {
  return JSON.stringify(message);
}

const bad = (why: string): never => {
  throw new ServiceError('INVALID_BODY', `config message: ${why}`);
};

function textOrNull(v: unknown, what: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') bad(`${what} must be a string or null`);
  return v as string;
}

/** Reads a config message (the gateway trusts its central, but a malformed one must not get half applied). */
export function parseManagedDeviceMessage(deviceId: string, payload: Buffer): ManagedDeviceMessage {
  let body: unknown;
  try {
    body = JSON.parse(payload.toString('utf8'));
  } catch {
    return bad('not valid JSON');
  }
  if (!isJsonObject(body)) return bad('must be a JSON object');
  const revision = body.revision;
  if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 1) return bad('"revision" must be a positive integer');
  if (body.deleted === true) return { revision, deleted: true };
  const device = body.device;
  if (!isJsonObject(device) || device.id !== deviceId) return bad(`"device.id" must be the topic's device ${deviceId}`);
  if (typeof device.name !== 'string' || device.name.length === 0) return bad('"device.name" must be a non-empty string');
  if (!Array.isArray(body.assets)) return bad('"assets" must be an array');
  const assets = body.assets.map((a) => {
    if (!isJsonObject(a) || typeof a.name !== 'string' || typeof a.is !== 'string' || a.profile === undefined) return bad('every asset needs "name", "is" and "profile"');
    return { name: a.name, is: a.is, profile: a.profile, title: textOrNull(a.title, 'asset "title"'), description: textOrNull(a.description, 'asset "description"') };
  });
  const codec = body.codec === null || body.codec === undefined ? null : isJsonObject(body.codec) ? (body.codec as ManagedDeviceDefinition['codec']) : bad('"codec" must be an object or null');
  if (body.lorawan !== undefined && body.lorawan !== null && !isJsonObject(body.lorawan)) bad('"lorawan" must be an object');
  const definition: ManagedDeviceDefinition = {
    revision,
    device: { id: deviceId, name: device.name, title: textOrNull(device.title, '"device.title"'), description: textOrNull(device.description, '"device.description"') },
    assets,
    codec,
    tokenHash: textOrNull(body.tokenHash, '"tokenHash"'),
  };
  if (isJsonObject(body.lorawan)) definition.lorawan = body.lorawan;
  return definition;
}

/** `gateway/<GatewayID>/config/applied` (gateway → central): the revision applied per managed device. */
export type AppliedRevisions = Record<string, number>;

export function parseAppliedRevisions(payload: Buffer): AppliedRevisions {
  let body: unknown;
  try {
    body = JSON.parse(payload.toString('utf8'));
  } catch {
    return bad('applied revisions are not valid JSON');
  }
  if (!isJsonObject(body)) return bad('applied revisions must be a JSON object {"<DeviceID>": revision}');
  const out: AppliedRevisions = {};
  for (const [id, revision] of Object.entries(body)) {
    if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 0) return bad(`revision of ${id} must be a non-negative integer`);
    out[id] = revision;
  }
  return out;
}

/** `gateway/<GatewayID>/lorawan/<DeviceID>` (gateway → central): an ABP device's session counters. */
export interface LorawanCounters {
  fCntUp: number;
  fCntDown: number;
}

export function parseLorawanCounters(payload: Buffer): LorawanCounters {
  let body: unknown;
  try {
    body = JSON.parse(payload.toString('utf8'));
  } catch {
    return bad('counters are not valid JSON');
  }
  const counter = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
  if (!isJsonObject(body) || !counter(body.fCntUp) || !counter(body.fCntDown)) return bad('counters must be {"fCntUp", "fCntDown"}, 32-bit integers');
  return { fCntUp: body.fCntUp as number, fCntDown: body.fCntDown as number };
}
