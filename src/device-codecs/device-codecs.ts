import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ServiceError } from '../core/errors.js';
import type { OutpostConfig } from '../core/config.js';
import type { Clock } from '../core/time.js';
import type { Logger } from '../ops/logger.js';
import type { Store } from '../store/store.js';
import type { DeviceRecord } from '../core/model.js';
import { AbclDocumentCache, compileCodec, onSharedModuleDamaged, type CodecSettings, type DeviceCodec } from '../codec/index.js';
import { readCodecFile } from '../device-codecs/codec-files.js';
import { isJsonObject, memberIgnoringCase } from '../core/json.js';

/** Where `file` references of codec settings are looked up: the data dir first, then the shipped `abcl/` (codec-files.ts). */
export const SHIPPED_ABCL_DIR = fileURLToPath(new URL('../../abcl/', import.meta.url));

export interface StoredCodecSettings {
  uplink: { format: string; document?: unknown; script?: string; file?: string };
  downlink?: { format: string; document?: unknown; script?: string; file?: string; port?: number };
}

/**
 * What a codec compiled from a file may say about itself: its problems quote the text they are
 * about, and the file's text is never echoed (it could be any file an admin token points at), so
 * they are replaced by one line that says how to see them on the gateway.
 */
function withoutFileContent(messages: string[], fileSides: Map<string, { file: string; format: string }>): string[] {
  const out: string[] = [];
  for (const message of messages) {
    const side = [...fileSides.entries()].find(([dir]) => message.startsWith(`${dir} document`) || message.startsWith(`${dir} script`) || (message.startsWith('script:') && fileSides.size > 0));
    if (!side) {
      out.push(message);
      continue;
    }
    const [dir, { file, format }] = side;
    const line = `${dir}.file ${JSON.stringify(file)} does not load as ${format === 'js' ? 'a JavaScript codec' : 'an ABCL document'}; run \`outpost codec check <file>\` on the gateway to see why (file content is never quoted here)`;
    if (!out.includes(line)) out.push(line);
  }
  return out;
}

/** Validates the shape of a codec settings body (keys in any case) and returns it normalised. */
export function parseCodecSettings(body: unknown): StoredCodecSettings {
  if (!isJsonObject(body)) throw new ServiceError('INVALID_BODY', 'codec settings must be a JSON object {"uplink", "downlink"?}');
  const side = (raw: unknown, name: string) => {
    if (!isJsonObject(raw)) throw new ServiceError('INVALID_BODY', `"${name}" must be an object with a "format"`);
    const format = memberIgnoringCase(raw, 'format');
    if (typeof format !== 'string') throw new ServiceError('INVALID_BODY', `"${name}.format" must be a string`);
    const out: Record<string, unknown> = { format };
    for (const key of ['document', 'script', 'file', 'port']) {
      const v = memberIgnoringCase(raw, key);
      if (v !== undefined && v !== null) out[key] = v;
    }
    if (out.script !== undefined && typeof out.script !== 'string') throw new ServiceError('INVALID_BODY', `"${name}.script" must be a string`);
    if (out.file !== undefined && typeof out.file !== 'string') throw new ServiceError('INVALID_BODY', `"${name}.file" must be a string`);
    return out;
  };
  const settings: StoredCodecSettings = { uplink: side(memberIgnoringCase(body, 'uplink') ?? { format: 'auto' }, 'uplink') as StoredCodecSettings['uplink'] };
  const downlink = memberIgnoringCase(body, 'downlink');
  if (downlink !== undefined && downlink !== null) settings.downlink = side(downlink, 'downlink') as StoredCodecSettings['downlink'];
  return settings;
}

/** The codec version of states decoded without a device codec (the built-in CBOR device state). */
export const BUILTIN_CBOR_VERSION = 'cbor';

/**
 * The version a state's provenance names: the uplink format and a hash of what decodes (the
 * document or script after `file` references are read), so the same text is the same version
 * whichever device or file holds it, and any change to it is a new one.
 */
export function codecVersion(uplink: StoredCodecSettings['uplink']): string {
  if (uplink.document === undefined && uplink.script === undefined) return uplink.format;
  const text = uplink.script ?? (typeof uplink.document === 'string' ? uplink.document : JSON.stringify(uplink.document));
  return `${uplink.format}:${createHash('sha256').update(text).digest('hex').slice(0, 12)}`;
}

/**
 * One compiled codec per device (docs/api.md, "Device states"), compiled when its settings are set or the daemon
 * starts, never on the hot path. A device without settings uses the built-in `auto` decoding.
 */
export class DeviceCodecs {
  readonly #compiled = new Map<string, { source: string; codec: DeviceCodec; version: string }>();
  readonly #abclCache = new AbclDocumentCache();
  readonly #failures = new Map<string, string>();
  readonly #config: OutpostConfig;
  readonly #logger: Logger;

  readonly #unsubscribe: () => void;

  constructor(config: OutpostConfig, logger: Logger) {
    this.#config = config;
    this.#logger = logger;
    // A JS codec that exhausted Node's stack inside the sandbox damages the module every JS codec
    // shares; they are all compiled again in a fresh one (quickjs-module.ts).
    this.#unsubscribe = onSharedModuleDamaged(() => {
      logger.error({}, 'a JavaScript codec exhausted the native stack; reloading every JavaScript codec in a fresh sandbox module');
      this.recompileAll().catch((err: unknown) => logger.error({ err }, 'reloading JavaScript codecs failed'));
    });
  }

  /** How many devices have a compiled codec now. */
  get size(): number {
    return this.#compiled.size;
  }

  /** Why a device's stored codec settings did not load (at start or after a CLI change), if they did not. */
  failure(device: DeviceRecord): string | undefined {
    return this.#failures.get(device.id);
  }

  /** The compiled codec of a device, if it has settings and they compiled. */
  get(device: DeviceRecord): DeviceCodec | undefined {
    return this.#compiled.get(device.id)?.codec;
  }

  /** The version of the device's active codec (see codecVersion). */
  version(device: DeviceRecord): string | undefined {
    return this.#compiled.get(device.id)?.version;
  }

  /** Compiles settings (resolving `file` references); refuses with every problem listed. */
  async compile(settings: StoredCodecSettings): Promise<{ codec: DeviceCodec; warnings: string[]; version: string }> {
    const resolved = structuredClone(settings) as StoredCodecSettings;
    const fileSides = new Map<string, { file: string; format: string }>();
    for (const [name, side] of [['uplink', resolved.uplink], ['downlink', resolved.downlink]] as const) {
      if (side?.file === undefined) continue;
      const text = readCodecFile(side.file, { dataDir: this.#config.dataDir, shippedDir: SHIPPED_ABCL_DIR }, name);
      fileSides.set(name, { file: side.file, format: side.format });
      if (side.format === 'js') side.script = text;
      else side.document = text;
    }
    const result = await compileCodec(resolved as CodecSettings, { js: this.#config.codec.js, abclCache: this.#abclCache });
    const warnings = withoutFileContent(result.warnings, fileSides);
    if (!result.ok || !result.codec) {
      const errors = withoutFileContent(result.errors, fileSides);
      throw new ServiceError('CODEC_INVALID', `codec settings do not load (${errors.length} problem(s), listed in "errors")`, { details: { errors, warnings } });
    }
    return { codec: result.codec, warnings, version: codecVersion(resolved.uplink) };
  }

  /** Makes a compiled codec the device's active one, disposing the previous. */
  activate(deviceId: string, source: string, codec: DeviceCodec, version: string): void {
    const previous = this.#compiled.get(deviceId);
    this.#compiled.set(deviceId, { source, codec, version });
    this.#failures.delete(deviceId);
    if (previous && previous.codec !== codec) previous.codec.dispose();
  }

  /**
   * Brings the compiled set in line with the database: at start, and after the CLI changed codec
   * settings from another process. Devices whose stored settings did not change are left alone.
   */
  async syncFromStore(store: Pick<Store, 'devices'>): Promise<void> {
    const seen = new Set<string>();
    for (const device of store.devices.list()) {
      if (!device.codec) continue;
      seen.add(device.id);
      if (this.#compiled.get(device.id)?.source === device.codec) continue;
      try {
        const { codec, version } = await this.compile(JSON.parse(device.codec) as StoredCodecSettings);
        this.activate(device.id, device.codec, codec, version);
      } catch (err) {
        const reason = (err as Error).message;
        // Without an earlier codec still active, the device's codec is off: its binary uplinks are
        // refused (and kept raw) with this reason until its settings are set again.
        if (!this.#compiled.has(device.id)) this.#failures.set(device.id, reason);
        this.#logger.warn({ deviceId: device.id, err: reason }, 'stored codec settings do not load; the device decodes with built-in formats only (binary uplinks refused) until they are set again');
      }
    }
    for (const id of this.#failures.keys()) if (!seen.has(id)) this.#failures.delete(id);
    for (const [id, entry] of this.#compiled) {
      if (!seen.has(id)) {
        entry.codec.dispose();
        this.#compiled.delete(id);
      }
    }
  }

  /**
   * Compiles every active codec again, e.g. with new sandbox limits after a config reload. A codec
   * that no longer compiles keeps running as it was, with a warning.
   */
  async recompileAll(): Promise<void> {
    for (const [deviceId, { source }] of [...this.#compiled]) {
      try {
        const { codec, version } = await this.compile(JSON.parse(source) as StoredCodecSettings);
        this.activate(deviceId, source, codec, version);
      } catch (err) {
        this.#logger.warn({ deviceId, err: (err as Error).message }, 'codec does not compile with the new settings; the previous one stays active');
      }
    }
  }

  dispose(): void {
    this.#unsubscribe();
    for (const entry of this.#compiled.values()) entry.codec.dispose();
    this.#compiled.clear();
  }
}

/** Applies new codec settings to a device: compile first, so a bad one leaves the old active. */
export async function setDeviceCodec(store: Pick<Store, 'devices'>, codecs: DeviceCodecs, clock: Clock, device: DeviceRecord, body: unknown) {
  const settings = parseCodecSettings(body);
  const { codec, warnings, version } = await codecs.compile(settings);
  const source = JSON.stringify(settings);
  store.devices.update(device.id, { payloadFormat: settings.uplink.format, codec: source }, clock.now());
  codecs.activate(device.id, source, codec, version);
  return { ...codecSettingsView(store.devices.get(device.id)!), warnings };
}

export function codecSettingsView(device: DeviceRecord): { uplink: unknown; downlink: unknown } {
  if (!device.codec) return { uplink: { format: device.payloadFormat }, downlink: { format: 'cbor' } };
  const settings = JSON.parse(device.codec) as StoredCodecSettings;
  return { uplink: settings.uplink, downlink: settings.downlink ?? { format: 'cbor' } };
}
