/**
 * The wire model's topics, written once (docs/architecture.md, "One wire model"): the device topics
 * of docs/mqtt.md ("Topics") and the gateway topics of docs/sync.md, for the MQTT door, the
 * gateway's upstream sync and the central alike. Parsing what clients publish, formatting what the
 * service publishes, and matching subscription filters. Pure functions, no broker state. The
 * payloads that travel on these topics are in messages.ts.
 */

/** What a client may publish to, as parsed from the topic alone (authorization comes after). */
export type PublishTopic =
  | { kind: 'asset-state'; deviceId: string; assetName: string }
  | { kind: 'asset-state-by-id'; assetId: string }
  | { kind: 'device-state'; deviceId: string }
  | { kind: 'asset-command'; deviceId: string; assetName: string }
  | { kind: 'asset-command-by-id'; assetId: string }
  | { kind: 'device-command'; deviceId: string }
  | { kind: 'unknown' };

const UNKNOWN: PublishTopic = { kind: 'unknown' };

/**
 * `asset/<AssetID>/state|command`, `device/<DeviceID>/state|command`,
 * `device/<DeviceID>/asset/<AssetName>/state|command`. Hand-rolled (no split, no regex): it runs for
 * every message.
 */
export function parsePublishTopic(topic: string): PublishTopic {
  const a = topic.indexOf('/');
  if (a <= 0) return UNKNOWN;
  const b = topic.indexOf('/', a + 1);
  if (b < 0 || b === a + 1) return UNKNOWN;
  const head = topic.slice(0, a);
  const id = topic.slice(a + 1, b);
  const c = topic.indexOf('/', b + 1);
  if (c < 0) {
    const leaf = topic.slice(b + 1);
    if (head === 'asset') {
      if (leaf === 'state') return { kind: 'asset-state-by-id', assetId: id };
      if (leaf === 'command') return { kind: 'asset-command-by-id', assetId: id };
    } else if (head === 'device') {
      if (leaf === 'state') return { kind: 'device-state', deviceId: id };
      if (leaf === 'command') return { kind: 'device-command', deviceId: id };
    }
    return UNKNOWN;
  }
  if (head !== 'device' || c !== b + 6 || topic.slice(b + 1, c) !== 'asset') return UNKNOWN;
  const d = topic.indexOf('/', c + 1);
  if (d < 0 || d === c + 1 || topic.indexOf('/', d + 1) >= 0) return UNKNOWN;
  const assetName = topic.slice(c + 1, d);
  const leaf = topic.slice(d + 1);
  if (leaf === 'state') return { kind: 'asset-state', deviceId: id, assetName };
  if (leaf === 'command') return { kind: 'asset-command', deviceId: id, assetName };
  return UNKNOWN;
}

export const assetTopic = (deviceId: string, assetName: string, leaf: 'state' | 'feed' | 'command') => `device/${deviceId}/asset/${assetName}/${leaf}`;
export const assetIdCommandTopic = (assetId: string) => `asset/${assetId}/command`;
export const deviceCommandTopic = (deviceId: string) => `device/${deviceId}/command`;
export const errorsTopic = (deviceId: string) => `device/${deviceId}/errors`;
export const eventsTopic = (deviceId: string) => `device/${deviceId}/events`;

// ---- gateway topics (docs/sync.md): between a gateway and its central, under gateway/<GatewayID>/

/** A gateway's description of one of its own devices (catalog, up). */
export const catalogTopic = (gatewayId: string, deviceId: string) => `gateway/${gatewayId}/device/${deviceId}`;
/** The gateway's retained status (up; re-published retained by the central). */
export const gatewayStatusTopic = (gatewayId: string) => `gateway/${gatewayId}/status`;
/** Refusals of the gateway's messages (central → gateway and read-scope readers). */
export const gatewayErrorsTopic = (gatewayId: string) => `gateway/${gatewayId}/errors`;
/** A managed device's definition (central → gateway). */
export const configDeviceTopic = (gatewayId: string, deviceId: string) => `gateway/${gatewayId}/config/device/${deviceId}`;
/** The filter a gateway subscribes for every managed device's definition. */
export const configDeviceFilter = (gatewayId: string) => `gateway/${gatewayId}/config/device/+`;
/** The revisions a gateway applied (gateway → central). */
export const configAppliedTopic = (gatewayId: string) => `gateway/${gatewayId}/config/applied`;
/** ABP session counters of a managed device (gateway → central, at most once a minute). */
export const lorawanCountersTopic = (gatewayId: string, deviceId: string) => `gateway/${gatewayId}/lorawan/${deviceId}`;

/** What a topic under `gateway/<GatewayID>/` is. */
export type GatewayTopic =
  | { kind: 'status'; gatewayId: string }
  | { kind: 'errors'; gatewayId: string }
  | { kind: 'catalog'; gatewayId: string; deviceId: string }
  | { kind: 'config-device'; gatewayId: string; deviceId: string }
  | { kind: 'config-applied'; gatewayId: string }
  | { kind: 'lorawan-counters'; gatewayId: string; deviceId: string }
  | { kind: 'unknown'; gatewayId: string | undefined };

export function parseGatewayTopic(topic: string): GatewayTopic {
  const levels = topic.split('/');
  const gatewayId = levels[1];
  if (levels[0] !== 'gateway' || !gatewayId) return { kind: 'unknown', gatewayId: undefined };
  const [, , a, b, c] = levels;
  if (levels.length === 3 && a === 'status') return { kind: 'status', gatewayId };
  if (levels.length === 3 && a === 'errors') return { kind: 'errors', gatewayId };
  if (levels.length === 4 && a === 'device' && b) return { kind: 'catalog', gatewayId, deviceId: b };
  if (levels.length === 4 && a === 'lorawan' && b) return { kind: 'lorawan-counters', gatewayId, deviceId: b };
  if (levels.length === 4 && a === 'config' && b === 'applied') return { kind: 'config-applied', gatewayId };
  if (levels.length === 5 && a === 'config' && b === 'device' && c) return { kind: 'config-device', gatewayId, deviceId: c };
  return { kind: 'unknown', gatewayId };
}

/** The kind of a topic for metrics labels: its last level when it is one of ours, else `other`. */
export function topicKind(topic: string): string {
  const leaf = topic.slice(topic.lastIndexOf('/') + 1);
  switch (leaf) {
    case 'state':
    case 'feed':
    case 'command':
    case 'errors':
    case 'events':
      return leaf;
    default:
      return 'other';
  }
}

/** MQTT filter matching (3.1.1 §4.7): `+` one level, `#` this level and all below; `$` topics only by name. */
export function filterMatches(filter: string, topic: string): boolean {
  if (filter === topic) return true;
  if (topic.charCodeAt(0) === 36 /* $ */ && (filter.charCodeAt(0) === 43 || filter.charCodeAt(0) === 35)) return false;
  const f = filter.split('/');
  const t = topic.split('/');
  for (let i = 0; i < f.length; i++) {
    const level = f[i]!;
    if (level === '#') return true;
    if (i >= t.length) return false;
    if (level !== '+' && level !== t[i]) return false;
  }
  return f.length === t.length;
}

/**
 * The topics the service publishes to devices and applications, as templates (a central's device
 * command message on `device/<id>/command` is for gateways only: see the central's gateway hub): a literal level, or a variable (`D` device id,
 * `N` asset name, `A` asset id). Subscription ACLs are decided by which templates a filter can
 * match and what it pins the variables to.
 */
export type Template = { name: TemplateName; levels: string[] };
export type TemplateName = 'asset-command' | 'asset-id-command' | 'asset-state' | 'asset-feed' | 'device-state' | 'errors' | 'events';

export const TEMPLATES: readonly Template[] = [
  { name: 'asset-command', levels: ['device', 'D', 'asset', 'N', 'command'] },
  { name: 'asset-id-command', levels: ['asset', 'A', 'command'] },
  { name: 'asset-state', levels: ['device', 'D', 'asset', 'N', 'state'] },
  { name: 'asset-feed', levels: ['device', 'D', 'asset', 'N', 'feed'] },
  { name: 'device-state', levels: ['device', 'D', 'state'] },
  { name: 'errors', levels: ['device', 'D', 'errors'] },
  { name: 'events', levels: ['device', 'D', 'events'] },
];

const VARIABLES = new Set(['D', 'N', 'A']);

/** What a filter pins a template's variables to; a missing key means the filter leaves it open (`+`/`#`). */
export type Bindings = Partial<Record<'D' | 'N' | 'A', string>>;

/** Whether `filter` can match some topic of the template, and with which bindings; undefined if none. */
export function matchTemplate(filterLevels: readonly string[], template: Template): Bindings | undefined {
  const bindings: Bindings = {};
  const t = template.levels;
  for (let i = 0; i < filterLevels.length; i++) {
    const f = filterLevels[i]!;
    if (f === '#') return bindings; // matches the rest, whatever it is, variables left open
    if (i >= t.length) return undefined;
    const level = t[i]!;
    if (VARIABLES.has(level)) {
      if (f !== '+') {
        if (f === '') return undefined; // ids and names are never empty
        bindings[level as 'D' | 'N' | 'A'] = f;
      }
    } else if (f !== '+' && f !== level) {
      return undefined;
    }
  }
  return filterLevels.length === t.length ? bindings : undefined;
}
