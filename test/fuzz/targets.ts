// Fuzz targets: every parser a device or the network reaches (except raw MQTT packets, fuzzed with
// the MQTT door), driven in-process through the same functions the doors call, against a real
// Daemon (real SQLite file in a temp dir, real codecs, real pipeline), without sockets for volume.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { Encoder } from 'cbor-x';
import { Core } from '../../src/roles/core.js';
import { systemClock } from '../../src/core/time.js';
import { loadConfig } from '../../src/core/config.js';
import { createLogger } from '../../src/ops/logger.js';
import { isServiceError } from '../../src/core/errors.js';
import type { Principal } from '../../src/core/access.js';
import type { DeviceRecord } from '../../src/core/model.js';
import { ROOT } from '../helpers/daemon.js';
import { Rng, mutateBytes, mutateText, randomCbor, randomCborDeviceState, randomString, randomValue, toJsonText } from './generators.js';
import { gwmpDatagram } from './gwmp-inputs.js';
import { stationMessageText } from './bs-inputs.js';
import { readStationMessage } from '../../src/doors/basic-station/messages.js';
import { parseDatagram, type Datagram } from '../../src/lpwan/gwmp/protocol.js';

/** One input's outcome: accepted, refused with a 4xx ServiceError, or a finding (anything else). */
export type Outcome = 'accepted' | 'refused';

export interface FuzzTarget {
  name: string;
  /** Builds one input from the generator and runs it; throws on a finding. */
  run(rng: Rng): Promise<Outcome>;
}

/** Profiles of the fuzzed assets: one per rule the validator has. */
export const FUZZ_ASSETS: Array<{ name: string; profile: Record<string, unknown> }> = [
  { name: 'n', profile: { type: 'number', minimum: -40, maximum: 85 } },
  { name: 'i', profile: { type: 'integer' } },
  { name: 's', profile: { type: 'string', enum: ['on', 'off'] } },
  { name: 'pat', profile: { type: 'string', pattern: '^(a|aa)+$' } },
  { name: 'b', profile: { type: 'boolean' } },
  { name: 'obj', profile: { type: 'object', properties: { lat: { type: 'number', maximum: 90 }, lng: { type: 'number' }, tag: { type: 'string', pattern: '^[A-F0-9]+$' } }, required: ['lat'] } },
  { name: 'arr', profile: { type: 'array', items: { type: 'number' } } },
  { name: 'any', profile: { type: 'object' } },
];

const cborEncoder = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true });

/** The refusal must be a ServiceError below 500: anything else is a finding. */
function classify(err: unknown): Outcome {
  if (isServiceError(err) && err.status < 500) return 'refused';
  throw err;
}

async function settle(run: () => Promise<unknown> | unknown): Promise<Outcome> {
  try {
    await run();
    return 'accepted';
  } catch (err) {
    return classify(err);
  }
}

/** A message envelope around a random or mutated value, as JSON text. */
function jsonStateText(rng: Rng): string {
  const value = randomValue(rng);
  const message = rng.chance(0.8) ? { value, ...(rng.chance(0.3) ? { at: rng.pick([randomValue(rng), '0050-06-01T12:00:00Z', '2026-11-21T10:00:00+01:00']) } : {}) } : value;
  const text = toJsonText(message);
  return rng.chance(0.6) ? mutateText(rng, text) : text;
}

function jsonDeviceStateText(rng: Rng): string {
  const message: Record<string, unknown> = {};
  for (let i = rng.int(5); i > 0; i--) {
    const name = rng.chance(0.8) ? rng.pick(FUZZ_ASSETS).name : randomString(rng, rng.int(6));
    Object.defineProperty(message, name, { value: rng.chance(0.7) ? { value: randomValue(rng) } : randomValue(rng), enumerable: true, writable: true, configurable: true });
  }
  const text = toJsonText(message);
  return rng.chance(0.5) ? mutateText(rng, text) : text;
}

function cborStateBytes(rng: Rng): Uint8Array {
  let bytes: Uint8Array;
  if (rng.chance(0.5)) bytes = new Uint8Array(cborEncoder.encode({ value: randomValue(rng) }));
  else {
    const key = Buffer.from('value');
    bytes = Uint8Array.from([0xa1, 0x65, ...key, ...randomCbor(rng)]);
  }
  return rng.chance(0.5) ? mutateBytes(rng, bytes) : bytes;
}

const ABCL_DOCS = ['environment-sensor.abcl.json', 'counter.abcl.json', 'door-sensor.abcl.json', 'tracker.abcl.json', 'dimmer.abcl.json'].map((f) => readFileSync(join(ROOT, 'abcl', f), 'utf8'));
const JS_SCRIPTS = [
  'function decodeUplink(input) { return { data: { n: input.bytes[0] - 40, i: input.bytes.length, arr: input.bytes.slice(0, 4) } }; }',
  'function Decoder(bytes, port) { return { obj: { lat: bytes[0], lng: bytes[1] || 0 }, b: !!bytes[2] }; }',
  'function decodeUplink(input) { var s = ""; for (var i = 0; i < input.bytes.length; i++) s += String.fromCharCode(input.bytes[i]); return { data: JSON.parse(s) }; }',
];

/** Codec settings bodies: formats, documents, scripts and file references, each mutated. */
function codecSettingsBody(rng: Rng): unknown {
  const format = rng.pick(['auto', 'json', 'cbor', 'abcl', 'js', 'xml', '', 'ABCL']);
  const uplink: Record<string, unknown> = { format };
  switch (rng.int(5)) {
    case 0:
      uplink.document = rng.chance(0.5) ? mutateText(rng, rng.pick(ABCL_DOCS)) : rng.pick(ABCL_DOCS);
      break;
    case 1:
      // Few JS scripts: each costs a sandbox (milliseconds), the rest of the target is cheap.
      if (rng.chance(0.15)) uplink.script = rng.chance(0.7) ? mutateText(rng, rng.pick(JS_SCRIPTS)) : rng.pick(JS_SCRIPTS);
      else uplink.script = randomValue(rng);
      break;
    case 2:
      uplink.file = rng.pick(['environment-sensor.abcl.json', '/etc/passwd', '../../../../etc/shadow', 'outpost.db', '/dev/zero', '/proc/self/environ', 'abcl/../../package.json', 'counter.abcl.json\0.js', randomString(rng, 8) + '.json', '']);
      break;
    case 3:
      uplink.document = randomValue(rng);
      break;
    default:
      return rng.chance(0.5) ? randomValue(rng) : { uplink: randomValue(rng), downlink: randomValue(rng) };
  }
  const body: Record<string, unknown> = { uplink };
  if (rng.chance(0.3)) body.downlink = { format: rng.pick(['cbor', 'abcl', 'js', 'x']), port: rng.pick([1, 0, 224, -1, 1.5, '2']), document: rng.pick(ABCL_DOCS) };
  return body;
}

/** Random profiles: the validated keywords with values of every type, nested, patterns included. */
function randomProfile(rng: Rng, depth = 0): unknown {
  if (rng.chance(0.1)) return randomValue(rng);
  const profile: Record<string, unknown> = { type: rng.pick(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null', 'String', 7]) };
  if (rng.chance(0.3)) profile.pattern = rng.pick(['^(a+)+$', '^(a|a?)+$', '(.*a){20}', '(?=x)', '(a)\\1', '\\u0041+', '[', 'a{1001}', '((a{100}){100}){100}', '\\p{L}+', '^\\d{4}$', randomString(rng, 6)]);
  if (rng.chance(0.2)) profile.enum = rng.chance(0.8) ? [randomValue(rng), randomValue(rng)] : randomValue(rng);
  if (rng.chance(0.2)) profile.minimum = rng.pick([0, -1e308, 1.5, '3', null, Infinity]);
  if (rng.chance(0.2)) profile.maximum = rng.pick([100, 1e308, -0, 'x']);
  if (rng.chance(0.3) && depth < 4) {
    const properties: Record<string, unknown> = {};
    for (let i = rng.int(3); i >= 0; i--) {
      Object.defineProperty(properties, rng.pick(['lat', '__proto__', 'constructor', 'toString', 'a', '', randomString(rng, 4)]), { value: randomProfile(rng, depth + 1), enumerable: true, writable: true, configurable: true });
    }
    profile.properties = properties;
  }
  if (rng.chance(0.2)) profile.required = rng.chance(0.8) ? ['lat', 'constructor', '__proto__'].slice(0, rng.int(3) + 1) : randomValue(rng);
  if (rng.chance(0.2) && depth < 4) profile.items = randomProfile(rng, depth + 1);
  if (rng.chance(0.1)) profile.unit = randomString(rng, 3);
  return profile;
}

export interface FuzzHarness {
  targets: FuzzTarget[];
  core: Core;
  close(): Promise<void>;
}

/** A real daemon core (no doors) on a temp data dir, with a device per codec kind. */
export async function createHarness(): Promise<FuzzHarness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'outpost-fuzz-'));
  const config = loadConfig({ dataDir, env: { OUTPOST_RATE_LIMIT: '0' } });
  config.http.enabled = false;
  config.mqtt.enabled = false;
  // The parsers are under test, not the disk: no fsync per commit.
  config.store.synchronous = 'normal';
  const core = Core.open(config, createLogger('silent'), systemClock);
  const { registry, pipeline, catalog, store, codecs } = core;

  const makeDevice = (name: string): { device: DeviceRecord; principal: Principal } => {
    const { device, token } = registry.createDevice({ name });
    for (const asset of FUZZ_ASSETS) registry.createAsset(device.id, { name: asset.name, is: 'sensor', profile: asset.profile });
    return { device, principal: catalog.principalForSecret(token)! };
  };
  const plain = makeDevice('plain');
  const abcl = makeDevice('abcl');
  const js = makeDevice('js');
  const scratch = makeDevice('scratch');
  // Codec devices get the assets their codec names too.
  for (const name of ['temperature', 'humidity', 'battery', 'count', 'open']) registry.createAsset(abcl.device.id, { name, is: 'sensor', profile: { type: 'number' } });
  await registry.setDeviceCodec(codecs, abcl.device, { uplink: { format: 'abcl', file: 'environment-sensor.abcl.json' } });
  await registry.setDeviceCodec(codecs, js.device, { uplink: { format: 'js', script: JS_SCRIPTS[2] } });
  const assetNames = FUZZ_ASSETS.map((a) => a.name);
  const device = (d: { device: DeviceRecord }) => catalog.device(d.device.id)!;

  const deviceState = (who: { device: DeviceRecord; principal: Principal }, bytes: Uint8Array, kind: 'json' | 'cbor' | 'binary') =>
    pipeline.ingest({ deviceId: who.device.id, via: 'fuzz', payload: { bytes, format: kind === 'binary' ? 'codec' : kind }, label: 'body', topic: 'fuzz' });
  const assetState = (assetName: string, bytes: Uint8Array, form: 'json' | 'cbor' | 'text') =>
    pipeline.ingest({ deviceId: plain.device.id, via: 'fuzz', payload: { asset: assetName, bytes, form }, label: form === 'text' ? `asset "${assetName}"` : 'body', topic: 'fuzz', reply: form === 'text' ? bytes : undefined });

  let scratchNames = 0;
  const targets: FuzzTarget[] = [
    {
      name: 'http-json-asset-state',
      run: (rng) => {
        const bytes = Buffer.from(jsonStateText(rng), 'utf8');
        return settle(() => assetState(rng.pick(assetNames), bytes, 'json'));
      },
    },
    {
      name: 'http-cbor-asset-state',
      run: (rng) => {
        const bytes = Buffer.from(cborStateBytes(rng));
        return settle(() => assetState(rng.pick(assetNames), bytes, 'cbor'));
      },
    },
    {
      name: 'mqtt-asset-payload',
      run: (rng) => {
        const text = rng.chance(0.3) ? `${rng.int(2e9)}|${mutateText(rng, toJsonText(randomValue(rng)) ?? '')}` : jsonStateText(rng);
        const payload = Buffer.from(text, 'utf8');
        return settle(() => assetState(rng.pick(assetNames), payload, 'text'));
      },
    },
    {
      name: 'json-device-state',
      run: (rng) => settle(() => deviceState(plain, Buffer.from(jsonDeviceStateText(rng), 'utf8'), 'json')),
    },
    {
      name: 'cbor-device-state',
      run: (rng) => {
        const bytes = randomCborDeviceState(rng, assetNames);
        return settle(() => deviceState(plain, rng.chance(0.5) ? mutateBytes(rng, bytes) : bytes, 'cbor'));
      },
    },
    {
      name: 'octet-stream-abcl-codec',
      run: (rng) => {
        const bytes = rng.chance(0.3) ? Uint8Array.from(Buffer.from('66085B100E', 'hex')) : Uint8Array.from({ length: rng.int(24) }, () => rng.int(256));
        return settle(() => deviceState({ ...abcl, device: device(abcl) }, rng.chance(0.5) ? mutateBytes(rng, bytes) : bytes, 'binary'));
      },
    },
    {
      name: 'octet-stream-js-codec',
      run: (rng) => {
        const text = rng.chance(0.7) ? jsonDeviceStateText(rng) : randomString(rng, rng.int(30));
        return settle(() => deviceState({ ...js, device: device(js) }, Buffer.from(text, 'utf8'), 'binary'));
      },
    },
    {
      name: 'codec-settings',
      run: (rng) => {
        const body = codecSettingsBody(rng);
        return settle(() => registry.setDeviceCodec(codecs, device(scratch), body));
      },
    },
    {
      name: 'asset-names',
      run: (rng) => {
        const name = rng.chance(0.5) ? randomString(rng, rng.int(70)) : rng.pick(['\ud800', 'x\udfff', 'a/b', 'a b', '$x', '#', '😀'.repeat(33), 'ok', '__proto__', 'constructor', '']);
        return settle(() => {
          const created = rng.chance(0.5)
            ? registry.createAsset(scratch.device.id, { name, is: 'sensor', profile: { type: 'number' } })
            : registry.upsertAsset(scratch.device.id, name, { profile: { type: 'number' } }).asset;
          // What was created must read back as exactly that name, and then go away again.
          const stored = store.assets.byName(scratch.device.id, name);
          if (!stored || stored.name !== name) throw new Error(`asset name ${JSON.stringify(name)} stored as ${JSON.stringify(stored?.name)}`);
          registry.deleteAsset(scratch.device.id, created.name);
        });
      },
    },
    {
      name: 'profiles',
      run: async (rng) => {
        const name = `p${scratchNames++ % 8}`;
        const outcome = await settle(() => registry.upsertAsset(scratch.device.id, name, { profile: randomProfile(rng) }));
        // Whatever was accepted must validate values without failing.
        if (outcome === 'accepted') {
          for (let i = 0; i < 3; i++) {
            const value = randomValue(rng);
            await settle(() =>
              pipeline.ingest({ deviceId: scratch.device.id, via: 'fuzz', payload: { states: { [name]: { value: value as never } } }, label: 'body', topic: 'fuzz' }),
            );
          }
        }
        return outcome;
      },
    },
    {
      // What the packet forwarder door keeps from a datagram: known fields only, typed, bounded.
      name: 'gwmp-push-data',
      run: async (rng) => {
        const parsed = parseDatagram(gwmpDatagram(rng));
        if (!parsed.ok) return 'refused';
        checkGwmpDatagram(parsed.datagram);
        return 'accepted';
      },
    },
    {
      // What the Basics Station door keeps from a station's message: typed, bounded, exact counters.
      name: 'bs-station-message',
      run: async (rng) => {
        const read = readStationMessage(stationMessageText(rng));
        if (!read.ok) return 'refused';
        const m = read.message;
        if (JSON.stringify(m).length > 10_000) throw new Error(`a station message kept as ${JSON.stringify(m).length} characters`);
        if ('payload' in m && (m.payload.length === 0 || m.payload.length > 270)) throw new Error(`a ${m.payload.length}-byte uplink kept`);
        if ('upinfo' in m && m.upinfo.xtime !== undefined && !/^\d{1,20}$/.test(m.upinfo.xtime)) throw new Error(`xtime kept as ${m.upinfo.xtime}`);
        if (m.msgtype === 'version' && m.station.length > 64) throw new Error('station version kept unbounded');
        return 'accepted';
      },
    },
  ];
  return {
    targets,
    core,
    async close() {
      await core.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const STAT_KEYS = new Set(['time', 'lati', 'long', 'alti', 'rxnb', 'rxok', 'rxfw', 'ackr', 'dwnb', 'txnb', 'temp', 'pfrm', 'mail', 'desc']);

/** Throws (a finding) when a parsed datagram holds anything unknown, untyped or unbounded. */
function checkGwmpDatagram(d: Datagram): void {
  const text = JSON.stringify(d);
  if (text.length > 200_000) throw new Error(`a parsed datagram is ${text.length} characters of JSON`);
  if (d.type === 'tx-ack' && d.error !== undefined && !/^[A-Z_]{4,20}$/.test(d.error)) throw new Error(`TX_ACK error kept as ${JSON.stringify(d.error).slice(0, 80)}`);
  if (d.type !== 'push-data') return;
  const { stat, packets } = d.body;
  if (packets.length > 255) throw new Error(`${packets.length} packets kept from one datagram`);
  if (stat) {
    for (const [key, value] of Object.entries(stat)) {
      if (!STAT_KEYS.has(key)) throw new Error(`stat kept the unknown field ${JSON.stringify(key)}`);
      if (typeof value === 'string' ? value.length > 64 : typeof value !== 'number' || !Number.isFinite(value)) throw new Error(`stat.${key} kept as ${JSON.stringify(value).slice(0, 80)}`);
    }
  }
  for (const p of packets) {
    if (!p.ok) continue;
    if (p.payload.length === 0 || p.payload.length > 258) throw new Error(`a ${p.payload.length}-byte payload kept`);
    if (!Number.isSafeInteger(p.frequency) || p.frequency <= 0) throw new Error(`frequency ${p.frequency} kept`);
    if (p.time !== undefined && p.time.length > 64) throw new Error('rxpk.time kept unbounded');
    if (p.rssi !== undefined && !Number.isFinite(p.rssi)) throw new Error('rssi not finite');
  }
}
