import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { configValidator } from './config-validator.js';
import { parse as parseJsonc, printParseErrorCode, type ParseError } from 'jsonc-parser';

export interface OutpostConfig {
  version: 1;
  role: 'gateway' | 'central';
  dataDir: string;
  log: { level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent' };
  http: {
    enabled: boolean;
    host: string;
    port: number;
    bodyLimit: number;
    /** Most bytes of stored payloads and values in one page of a list answer (docs/api.md, "Pages"). */
    pageBytes: number;
    /** Live event streams (`GET /events`): in all, per principal, and slots kept for application tokens (docs/security.md). */
    eventStreams: { max: number; perPrincipal: number; reservedForApps: number };
  };
  mqtt: {
    enabled: boolean;
    host: string;
    port: number;
    payloadLimit: number;
    /** Largest CONNECT packet (the first packet of a connection), in bytes after the fixed header. */
    connectPacketLimit: number;
    maxClientIdBytes: number;
    maxSubscriptionsPerConnection: number;
    /** Reports per second per device on `device/<id>/errors`, sustained, and at once. */
    errorsPerSecond: number;
    errorsBurst: number;
    tls: { enabled: boolean; port: number; cert: string | null; key: string | null };
  };
  limits: {
    rate: number;
    burst: number;
    assetsPerDevice: number;
    historyPerAsset: number;
    historyDays: number;
    rawUplinksPerDevice: number;
    rawUplinkDays: number;
    jsonDepth: number;
    downlinksPerDevice: number;
    downlinkTtlSeconds: number;
  };
  store: { synchronous: 'normal' | 'full'; pruneIntervalSeconds: number; maxBytes: number; checkOnStart: boolean };
  codec: { js: { memoryBytes: number; stackBytes: number; timeoutMs: number; scriptBytes: number } };
  upstream: UpstreamConfig;
  /** The central role's bounds on what its gateways may do (docs/sync.md, docs/security.md). */
  central: CentralConfig;
  /** Radio: the LoRaWAN region, the packet forwarder door and serial modems (docs/lpwan.md). */
  radio: RadioConfig;
}

export interface BasicStationConfig {
  host: string;
  port: number;
  /** `token`: a registered station's token on the upgrade; `none`: any station (a closed LAN). */
  auth: 'token' | 'none';
  /** PEM files: with them the socket is `wss://`; with `ca` stations need a client certificate whose CN is their EUI. */
  tls: { cert: string; key: string; ca: string | null } | null;
  // What one station, or anyone reaching the port, may cost the door (docs/security.md, "Basics Station limits").
  /** Largest message a station may send; ws closes the socket (1009) beyond. Uplinks are < 1 KiB. */
  maxMessageBytes: number;
  /** Data sockets at once (one per registered station). */
  maxStations: number;
  /** Discovery sockets at once; each is closed after its answer or after 5 s. */
  maxDiscovery: number;
  /** Messages per second a station may send, sustained, and at once; the rest are dropped and counted. */
  messagesPerSecond: number;
  messagesBurst: number;
  /** Unsent bytes queued for a station before it is taken as stalled and disconnected. */
  maxQueuedBytes: number;
  /** Downlinks waiting for their `dntxed` at once. */
  maxPending: number;
  /** A station is pinged this often and dropped when it did not answer the previous ping. */
  pingIntervalSeconds: number;
}

export interface RadioConfig {
  region: 'EU868' | 'US915' | 'AU915' | 'AS923';
  /** 6 hex digits; OTAA DevAddrs carry its NwkID. */
  netId: string;
  /** Copies of one uplink from every source and gateway are merged for this long (ms). */
  dedupMs: number;
  /** ADR (docs/lpwan.md, "ADR"); `false`: no LinkADRReq is ever sent. */
  adr: { installationMargin: number; maxDataRate: number } | false;
  /** RX2 and Class C data rate (DR index) when not the region's default. */
  rx2DataRate?: number;
  /** US915/AU915: the 8-channel sub-band (1–8) ADR's channel masks enable. */
  subBand: number;
  /** Confirmed Class C downlinks: resent when not acknowledged within `ackTimeoutS`, up to `retries` times. */
  classC: { ackTimeoutS: number; retries: number };
  /** The Semtech UDP packet forwarder door; `false` turns it off. */
  gwmp: { host: string; port: number; maxDatagramBytes: number; maxGateways: number; gatewayExpirySeconds: number } | false;
  /** The LoRa Basics Station door (LNS protocol over WebSocket); `false` turns it off. */
  basicStation: BasicStationConfig | false;
  serial?: SerialModemConfig[];
}

/** Central role (docs/sync.md): what one gateway may create here. */
export interface CentralConfig {
  /** Most devices assigned to one gateway; catalog messages creating more are refused on `gateway/<id>/errors`. */
  devicesPerGateway: number;
  /**
   * Several central nodes (docs/scale-out.md): PostgreSQL keeps what the central stores (states
   * acknowledged only after it committed them, the catalog every node replicates, commands waiting
   * for gateways); null: the SQLite file, one machine.
   */
  postgres: string | null;
  /** Redis between the nodes' MQTT doors (messages, retained messages, wills); null: one node. */
  redis: string | null;
}

/** Upstream sync of a gateway (docs/sync.md). No `url`: no sync. */
export interface UpstreamConfig {
  /** One URL, or several tried in turn (a list, or comma-separated): a gateway fails over between central nodes. */
  url: string | string[] | null;
  /** With `token` (`gateway:…`): an Outpost central, one connection for every device. */
  gatewayId: string | null;
  token: string | null;
  /** PEM files for `mqtts://`: the CA that signed the upstream's certificate, and an optional client certificate. */
  ca: string | null;
  cert: string | null;
  key: string | null;
  /** QoS 1 messages in flight per connection. */
  window: number;
  maxBytes: number;
  maxAgeDays: number;
  whenFull: 'drop-oldest' | 'reject-new';
  /** A third-party upstream: local Device ID → the upstream's device ID and token (one connection each). */
  devices: Record<string, { id: string; token: string }> | null;
  /** Reconnect backoff: doubles from `reconnectMinMs` up to `reconnectMaxMs`, back to the minimum once connected. */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /** The drain watchdog: a link with messages in flight and no PUBACK for this long is dropped and reconnected. */
  stallSeconds: number;
  /** How often the gateway refreshes its retained status at the central. */
  statusIntervalSeconds: number;
  /**
   * Largest payload the upstream takes in one message (an Outpost central's `mqtt.payloadLimit`):
   * an outbox row above it is set aside (counted), never sent, so it cannot block the queue.
   */
  maxMessageBytes: number;
}

/** One serial LoRa modem (docs/lpwan.md, "Serial modems"). */
export interface SerialModemConfig {
  path: string;
  modem: 'rn2483' | 'rak3172' | 'rak811';
  baudRate: number;
  frequency: number;
  spreadingFactor: number;
  bandwidth: 125 | 250 | 500;
  /** Codec settings as PUT /device/<id>/codec takes them, for frames that are not LoRaWAN. */
  codec?: unknown;
  /** The device whose states the non-LoRaWAN frames of this modem are. */
  device?: string;
  txLeadMs?: number;
  initTimeoutMs?: number;
  reopenMaxMs?: number;
}

/** Embedded defaults: `npm start` with no file runs on these (documented key by key in docs/configuration.md). */
export const DEFAULT_CONFIG: OutpostConfig = {
  version: 1,
  role: 'gateway',
  dataDir: './data',
  log: { level: 'info' },
  http: { enabled: true, host: '0.0.0.0', port: 8080, bodyLimit: 65536, pageBytes: 1024 * 1024, eventStreams: { max: 32, perPrincipal: 4, reservedForApps: 8 } },
  mqtt: {
    enabled: true,
    host: '0.0.0.0',
    port: 1883,
    payloadLimit: 65536,
    connectPacketLimit: 8192,
    maxClientIdBytes: 256,
    maxSubscriptionsPerConnection: 256,
    errorsPerSecond: 10,
    errorsBurst: 50,
    tls: { enabled: false, port: 8883, cert: null, key: null },
  },
  limits: {
    rate: 1000,
    burst: 5000,
    assetsPerDevice: 1024,
    historyPerAsset: 10000,
    historyDays: 30,
    rawUplinksPerDevice: 1000,
    rawUplinkDays: 30,
    jsonDepth: 32,
    downlinksPerDevice: 16,
    downlinkTtlSeconds: 86400,
  },
  store: { synchronous: 'full', pruneIntervalSeconds: 60, maxBytes: 0, checkOnStart: true },
  codec: { js: { memoryBytes: 16 * 1024 * 1024, stackBytes: 256 * 1024, timeoutMs: 100, scriptBytes: 64 * 1024 } },
  upstream: {
    url: null,
    gatewayId: null,
    token: null,
    ca: null,
    cert: null,
    key: null,
    window: 64,
    maxBytes: 256 * 1024 * 1024,
    maxAgeDays: 30,
    whenFull: 'drop-oldest',
    devices: null,
    reconnectMinMs: 1000,
    reconnectMaxMs: 60_000,
    stallSeconds: 60,
    statusIntervalSeconds: 60,
    maxMessageBytes: 65536,
  },
  central: { devicesPerGateway: 1000, postgres: null, redis: null },
  radio: {
    region: 'EU868',
    netId: '000000',
    dedupMs: 200,
    adr: { installationMargin: 10, maxDataRate: 5 },
    subBand: 2,
    classC: { ackTimeoutS: 30, retries: 2 },
    gwmp: { host: '0.0.0.0', port: 1700, maxDatagramBytes: 32768, maxGateways: 1000, gatewayExpirySeconds: 3600 },
    basicStation: {
      host: '0.0.0.0',
      port: 3001,
      auth: 'token',
      tls: null,
      maxMessageBytes: 16384,
      maxStations: 1000,
      maxDiscovery: 64,
      messagesPerSecond: 200,
      messagesBurst: 1000,
      maxQueuedBytes: 1048576,
      maxPending: 4096,
      pingIntervalSeconds: 30,
    },
    serial: [],
  },
};

const port = { type: 'integer', minimum: 0, maximum: 65535 };
const positive = { type: 'integer', minimum: 1 };
const nonNegative = { type: 'integer', minimum: 0 };
const strict = (properties: Record<string, unknown>) => ({ type: 'object', additionalProperties: false, properties });

const SERIAL_MODEM_SCHEMA = {
  ...strict({
    path: { type: 'string', minLength: 1 },
    modem: { enum: ['rn2483', 'rak3172', 'rak811'] },
    baudRate: { type: 'integer', minimum: 300, maximum: 4000000 },
    // Every LoRa band a supported modem covers (433, 470, 868, 915 MHz), in Hz.
    frequency: { type: 'integer', minimum: 137000000, maximum: 1020000000 },
    spreadingFactor: { type: 'integer', minimum: 7, maximum: 12 },
    bandwidth: { enum: [125, 250, 500] },
    codec: { type: 'object' },
    device: { type: 'string', minLength: 1 },
    txLeadMs: { type: 'integer', minimum: 0, maximum: 1000 },
    initTimeoutMs: { type: 'integer', minimum: 50, maximum: 60000 },
    reopenMaxMs: { type: 'integer', minimum: 1000, maximum: 3600000 },
  }),
  required: ['path', 'modem', 'baudRate', 'frequency', 'spreadingFactor', 'bandwidth'],
};

/** Exported for the build, which precompiles it (config-validator.ts). */
export const CONFIG_SCHEMA = strict({
  version: { const: 1 },
  role: { enum: ['gateway', 'central'] },
  dataDir: { type: 'string', minLength: 1 },
  log: strict({ level: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] } }),
  http: strict({
    enabled: { type: 'boolean' },
    host: { type: 'string', minLength: 1 },
    port,
    bodyLimit: positive,
    // Below a few KiB most pages would hold one row; a page always holds at least one.
    pageBytes: { type: 'integer', minimum: 4096 },
    eventStreams: strict({ max: positive, perPrincipal: positive, reservedForApps: nonNegative }),
  }),
  mqtt: strict({
    enabled: { type: 'boolean' },
    host: { type: 'string', minLength: 1 },
    port,
    payloadLimit: positive,
    // A CONNECT carries a client id, a token, a password and perhaps a will: below 1 KiB some
    // legitimate clients would not fit.
    connectPacketLimit: { type: 'integer', minimum: 1024 },
    // 23 is what MQTT 3.1.1 promises every client id may use.
    maxClientIdBytes: { type: 'integer', minimum: 23, maximum: 65535 },
    maxSubscriptionsPerConnection: positive,
    errorsPerSecond: positive,
    errorsBurst: positive,
    tls: strict({
      enabled: { type: 'boolean' },
      port,
      cert: { type: ['string', 'null'] },
      key: { type: ['string', 'null'] },
    }),
  }),
  limits: strict({
    rate: nonNegative,
    burst: positive,
    assetsPerDevice: positive,
    historyPerAsset: positive,
    historyDays: positive,
    rawUplinksPerDevice: positive,
    rawUplinkDays: positive,
    // Above a few hundred levels recursive code (JSON.stringify, validation) could run out of stack.
    jsonDepth: { type: 'integer', minimum: 2, maximum: 256 },
    downlinksPerDevice: positive,
    downlinkTtlSeconds: positive,
  }),
  store: strict({ synchronous: { enum: ['normal', 'full'] }, pruneIntervalSeconds: positive, maxBytes: nonNegative, checkOnStart: { type: 'boolean' } }),
  codec: strict({
    js: strict({ memoryBytes: { type: 'integer', minimum: 1048576 }, stackBytes: positive, timeoutMs: positive, scriptBytes: positive }),
  }),
  upstream: strict({
    // One URL, or a list tried in turn: `pattern` applies to a string, the rest to a list.
    url: { type: ['string', 'array', 'null'], pattern: '^(mqtt|mqtts|tcp|ssl|tls)://', minItems: 1, maxItems: 16, items: { type: 'string', pattern: '^(mqtt|mqtts|tcp|ssl|tls)://' } },
    gatewayId: { type: ['string', 'null'], pattern: '^[A-Za-z0-9]{24}$' },
    token: { type: ['string', 'null'], minLength: 1 },
    ca: { type: ['string', 'null'] },
    cert: { type: ['string', 'null'] },
    key: { type: ['string', 'null'] },
    window: { type: 'integer', minimum: 1, maximum: 65535 },
    maxBytes: positive,
    maxAgeDays: { type: 'number', exclusiveMinimum: 0 },
    whenFull: { enum: ['drop-oldest', 'reject-new'] },
    devices: {
      type: ['object', 'null'],
      additionalProperties: { ...strict({ id: { type: 'string', minLength: 1 }, token: { type: 'string', minLength: 1 } }), required: ['id', 'token'] },
    },
    reconnectMinMs: positive,
    reconnectMaxMs: positive,
    stallSeconds: positive,
    statusIntervalSeconds: positive,
    // Below 1 KiB not even a catalog message of one device with a few assets would fit.
    maxMessageBytes: { type: 'integer', minimum: 1024 },
  }),
  central: strict({
    devicesPerGateway: positive,
    postgres: { type: ['string', 'null'], pattern: '^postgres(ql)?://' },
    redis: { type: ['string', 'null'], pattern: '^rediss?://' },
  }),
  radio: strict({
    region: { enum: ['EU868', 'US915', 'AU915', 'AS923'] },
    netId: { type: 'string', pattern: '^[0-9A-Fa-f]{6}$' },
    dedupMs: { type: 'integer', minimum: 0, maximum: 2000 },
    adr: {
      anyOf: [
        { const: false },
        strict({ installationMargin: { type: 'number', minimum: -20, maximum: 40 }, maxDataRate: { type: 'integer', minimum: 0, maximum: 15 } }),
      ],
    },
    rx2DataRate: { type: 'integer', minimum: 0, maximum: 15 },
    subBand: { type: 'integer', minimum: 1, maximum: 8 },
    classC: strict({ ackTimeoutS: { type: 'number', exclusiveMinimum: 0, maximum: 3600 }, retries: { type: 'integer', minimum: 0, maximum: 10 } }),
    gwmp: {
      anyOf: [
        { const: false },
        strict({
          host: { type: 'string', minLength: 1 },
          port,
          // Below 1 KiB a PUSH_DATA with one full-size packet would not fit; 65 507 is UDP's own limit.
          maxDatagramBytes: { type: 'integer', minimum: 1024, maximum: 65507 },
          maxGateways: { type: 'integer', minimum: 1, maximum: 100000 },
          // Forwarders send PULL_DATA every few seconds: under a minute a live gateway could be forgotten.
          gatewayExpirySeconds: { type: 'integer', minimum: 60 },
        }),
      ],
    },
    // The object form first: a mistake inside it is then the error reported, not "must be false".
    basicStation: {
      anyOf: [
        strict({
          host: { type: 'string', minLength: 1 },
          port,
          auth: { enum: ['token', 'none'] },
          tls: { anyOf: [{ ...strict({ cert: { type: 'string', minLength: 1 }, key: { type: 'string', minLength: 1 }, ca: { type: ['string', 'null'] } }), required: ['cert', 'key'] }, { type: 'null' }] },
          // A router_config and a full-size uplink are well under 2 KiB; ws's own default is 100 MiB.
          maxMessageBytes: { type: 'integer', minimum: 2048, maximum: 1048576 },
          maxStations: { type: 'integer', minimum: 1, maximum: 100000 },
          maxDiscovery: { type: 'integer', minimum: 1, maximum: 10000 },
          messagesPerSecond: { type: 'integer', minimum: 1, maximum: 100000 },
          messagesBurst: { type: 'integer', minimum: 1, maximum: 1000000 },
          maxQueuedBytes: { type: 'integer', minimum: 65536, maximum: 268435456 },
          maxPending: { type: 'integer', minimum: 1, maximum: 1000000 },
          // Under 5 s a station on a slow cellular link could be dropped between two pongs.
          pingIntervalSeconds: { type: 'integer', minimum: 5, maximum: 3600 },
        }),
        { const: false },
      ],
    },
    serial: { type: 'array', items: SERIAL_MODEM_SCHEMA },
  }),
});

/** Rules across keys of `http.eventStreams` that the schema cannot say. */
function checkEventStreams(e: OutpostConfig['http']['eventStreams'] | undefined): void {
  // A file checked on its own (not merged over the defaults yet) may leave the section out.
  if (!e) return;
  if (e.perPrincipal > e.max) throw new ConfigError('config key http.eventStreams.perPrincipal: must not be above http.eventStreams.max');
  if (e.reservedForApps >= e.max) throw new ConfigError('config key http.eventStreams.reservedForApps: must be below http.eventStreams.max (device tokens need a slot too)');
}

/** Rules across keys of `upstream` that the schema cannot say. */
function checkUpstream(u: UpstreamConfig): void {
  if (!u.url) return;
  for (const [i, url] of upstreamUrls(u.url).entries()) {
    if (!/^(mqtt|mqtts|tcp|ssl|tls):\/\/[^/\s]+/.test(url)) throw new ConfigError(`config key upstream.url: URL ${i + 1} (${JSON.stringify(url)}) must be mqtt://host:port or mqtts://host:port`);
  }
  const devices = u.devices && Object.keys(u.devices).length > 0;
  if (u.token !== null || u.gatewayId !== null) {
    if (!u.token || !u.gatewayId) throw new ConfigError('config key upstream: "gatewayId" and "token" go together (both printed by `outpost gateway create` at the central)');
    if (!u.token.startsWith('gateway:')) throw new ConfigError('config key upstream.token: must be a gateway token ("gateway:…"); for a third-party upstream use upstream.devices');
    if (devices) throw new ConfigError('config key upstream.devices: not with a gateway token (an Outpost central knows the devices by the gateway catalog)');
  } else if (!devices) {
    throw new ConfigError('config key upstream: with "url" set, give "gatewayId" and "token" (an Outpost central) or "devices" (a third-party upstream)');
  }
  if ((u.cert === null) !== (u.key === null)) throw new ConfigError('config key upstream.cert: a client certificate needs both "cert" and "key"');
  if (u.reconnectMaxMs < u.reconnectMinMs) throw new ConfigError('config key upstream.reconnectMaxMs: must not be below upstream.reconnectMinMs');
}

/** Several central nodes (docs/scale-out.md): PostgreSQL and Redis are the central's, and Redis only with PostgreSQL. */
function checkCentral(config: OutpostConfig): void {
  const c = config.central;
  if (!c) return;
  for (const key of ['postgres', 'redis'] as const) {
    if (c[key] && config.role !== 'central') throw new ConfigError(`config key central.${key}: only with role "central" (a gateway keeps its SQLite file)`);
  }
  if (c.redis && !c.postgres) throw new ConfigError('config key central.redis: needs central.postgres (the nodes share their store in PostgreSQL, their MQTT messages in Redis)');
}

/** upstream.url as the list of central URLs the gateway tries in turn (a string may list several, comma-separated). */
export function upstreamUrls(url: string | readonly string[] | null): string[] {
  if (url === null) return [];
  const list = typeof url === 'string' ? url.split(',') : [...url];
  return list.map((u) => u.trim()).filter((u) => u.length > 0);
}

/** An invalid configuration; the daemon exits 2 with this message, which names the key and the rule. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Json = Record<string, unknown>;

function merge(base: Json, override: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(override)) {
    const b = base[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b) ? merge(b as Json, v as Json) : v;
  }
  return out;
}

function setPath(target: Json, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    if (!node[key] || typeof node[key] !== 'object') node[key] = {};
    node = node[key] as Json;
  }
  node[path[path.length - 1]!] = value;
}

/** Environment overrides (docs/configuration.md, "Environment variables"), applied above the config file. */
const ENV_OVERRIDES: Array<[string, string[], 'string' | 'integer']> = [
  ['OUTPOST_DATA_DIR', ['dataDir'], 'string'],
  ['OUTPOST_HTTP_PORT', ['http', 'port'], 'integer'],
  ['OUTPOST_MQTT_PORT', ['mqtt', 'port'], 'integer'],
  ['OUTPOST_GWMP_PORT', ['radio', 'gwmp', 'port'], 'integer'],
  ['OUTPOST_BS_PORT', ['radio', 'basicStation', 'port'], 'integer'],
  ['OUTPOST_LOG_LEVEL', ['log', 'level'], 'string'],
  ['OUTPOST_ROLE', ['role'], 'string'],
  ['OUTPOST_RATE_LIMIT', ['limits', 'rate'], 'integer'],
  ['OUTPOST_UPSTREAM_URL', ['upstream', 'url'], 'string'],
  ['OUTPOST_UPSTREAM_GATEWAY_ID', ['upstream', 'gatewayId'], 'string'],
  ['OUTPOST_UPSTREAM_TOKEN', ['upstream', 'token'], 'string'],
  ['OUTPOST_POSTGRES_URL', ['central', 'postgres'], 'string'],
  ['OUTPOST_REDIS_URL', ['central', 'redis'], 'string'],
];

function envValue(name: string, raw: string, kind: 'string' | 'integer'): unknown {
  if (kind === 'string') return raw;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name}: must be an integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

export interface ConfigSources {
  /** `--config FILE`; falls back to OUTPOST_CONFIG. */
  file?: string;
  /** `--data DIR`; above every other source. */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * The config file is JSON that may carry comments and trailing commas (like config/example.jsonc),
 * so the documented example can be installed as the config file and edited in place.
 */
export function parseConfigText(text: string, file: string): unknown {
  const errors: ParseError[] = [];
  const parsed: unknown = parseJsonc(text, errors, { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false });
  if (errors.length > 0) {
    const { error, offset } = errors[0]!;
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - before.lastIndexOf('\n');
    throw new ConfigError(`config file ${file}: not valid JSON at line ${line}, column ${column} (${printParseErrorCode(error)})`);
  }
  return parsed;
}

/** Every key path the schema knows (`mqtt.tls.cert`, `radio.serial[].path`), for the example and docs checks. */
export function configKeyPaths(): string[] {
  const walk = (schema: Record<string, unknown>, prefix: string): string[] => {
    const items = schema.items as Record<string, unknown> | undefined;
    if (items && typeof items === 'object') return walk(items, `${prefix}[]`);
    const properties = schema.properties as Record<string, Record<string, unknown>> | undefined;
    if (!properties) return prefix ? [prefix] : [];
    return Object.entries(properties).flatMap(([key, sub]) => walk(sub, prefix ? `${prefix}.${key}` : key));
  };
  return walk(CONFIG_SCHEMA as Record<string, unknown>, '');
}

export function loadConfig(sources: ConfigSources = {}): OutpostConfig {
  const env = sources.env ?? process.env;
  let merged: Json = structuredClone(DEFAULT_CONFIG) as unknown as Json;
  const file = sources.file ?? env.OUTPOST_CONFIG;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`config file ${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    const parsed = parseConfigText(text, file);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError(`config file ${file}: must be a JSON object`);
    merged = merge(merged, parsed as Json);
  }
  for (const [name, path, kind] of ENV_OVERRIDES) {
    const raw = env[name];
    if (raw !== undefined && raw !== '') setPath(merged, path, envValue(name, raw, kind));
  }
  if (sources.dataDir) merged.dataDir = sources.dataDir;
  validateConfig(merged);
  checkConsistency(merged);
  const config = merged as unknown as OutpostConfig;
  config.dataDir = resolve(config.dataDir);
  return config;
}

export function validateConfig(candidate: unknown): asserts candidate is OutpostConfig {
  const { validate } = configValidator(CONFIG_SCHEMA);
  if (validate(candidate)) {
    checkUpstream((candidate as OutpostConfig).upstream);
    checkEventStreams((candidate as OutpostConfig).http?.eventStreams);
    checkCentral(candidate as OutpostConfig);
    return;
  }
  const e = validate.errors![0]!;
  const p = e.params as Record<string, unknown>;
  // A missing key is named by its own path, not by the object that lacks it.
  const path = e.keyword === 'required' ? `${e.instancePath}/${String(p.missingProperty)}` : e.instancePath;
  const key = path.slice(1).replaceAll('/', '.') || '(top level)';
  const rule =
    e.keyword === 'additionalProperties'
      ? `unknown key ${JSON.stringify(p.additionalProperty)} (additionalProperties)`
      : e.keyword === 'required'
        ? 'is required (required)'
        : e.keyword === 'enum'
          ? `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')} (enum)`
          : `${e.message} (${e.keyword})`;
  throw new ConfigError(`config key ${key}: ${rule}`);
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]']);

/** Rules between keys that a schema cannot say, checked once at start like the rest. */
export function checkConsistency(config: OutpostConfig): void {
  const { tls } = config.mqtt;
  if (config.mqtt.enabled && tls.enabled) {
    if (!tls.cert) throw new ConfigError('config key mqtt.tls.cert: required when mqtt.tls.enabled is true (path of a PEM certificate file)');
    if (!tls.key) throw new ConfigError('config key mqtt.tls.key: required when mqtt.tls.enabled is true (path of a PEM private key file)');
  }
  // Two listeners on one port would fail at bind time with a message naming only the second one.
  const listeners: Array<{ key: string; port: number; host: string }> = [];
  if (config.http.enabled) listeners.push({ key: 'http.port', port: config.http.port, host: config.http.host });
  if (config.mqtt.enabled) listeners.push({ key: 'mqtt.port', port: config.mqtt.port, host: config.mqtt.host });
  if (config.mqtt.enabled && tls.enabled) listeners.push({ key: 'mqtt.tls.port', port: tls.port, host: config.mqtt.host });
  for (const [i, a] of listeners.entries()) {
    for (const b of listeners.slice(i + 1)) {
      const overlap = a.host === b.host || WILDCARD_HOSTS.has(a.host) || WILDCARD_HOSTS.has(b.host);
      if (a.port !== 0 && a.port === b.port && overlap) throw new ConfigError(`config key ${b.key}: port ${b.port} is already taken by ${a.key}`);
    }
  }
  validateSerialModems(config.radio?.serial ?? []);
  checkRx2DataRate(config.radio);
}

/** LoRa data rates a downlink can use per region (RP002-1.0.4): FSK and LR-FHSS rates are not for RX2. */
const LORA_DOWNLINK_DATA_RATES: Record<RadioConfig['region'], readonly number[]> = {
  EU868: [0, 1, 2, 3, 4, 5, 6],
  AS923: [0, 1, 2, 3, 4, 5, 6],
  US915: [8, 9, 10, 11, 12, 13],
  AU915: [8, 9, 10, 11, 12, 13],
};

/** RX2 (and Class C) must use a LoRa downlink data rate of the region. */
function checkRx2DataRate(radio: RadioConfig | undefined): void {
  if (radio?.rx2DataRate === undefined) return;
  const allowed = LORA_DOWNLINK_DATA_RATES[radio.region];
  if (!allowed.includes(radio.rx2DataRate)) {
    throw new ConfigError(`config key radio.rx2DataRate: DR${radio.rx2DataRate} is not a LoRa downlink data rate of ${radio.region} (one of ${allowed.join(', ')})`);
  }
}

/** One source per port; a raw codec needs the device its states belong to. */
function validateSerialModems(modems: SerialModemConfig[]): void {
  const seen = new Set<string>();
  modems.forEach((modem, i) => {
    if (seen.has(modem.path)) throw new ConfigError(`config key radio.serial.${i}.path: ${JSON.stringify(modem.path)} is configured twice (one source per port)`);
    seen.add(modem.path);
    if (modem.codec !== undefined && modem.device === undefined) {
      throw new ConfigError(`config key radio.serial.${i}.device: is required with radio.serial.${i}.codec (the device whose states the decoded frames become)`);
    }
  });
}
