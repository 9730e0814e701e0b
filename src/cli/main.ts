#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type ConfigSources, type OutpostConfig } from '../core/config.js';
import { isServiceError } from '../core/errors.js';
import { systemClock } from '../core/time.js';
import { Store, StoreCorruptError } from '../store/store.js';
import { DataDirLockedError } from '../store/data-dir.js';
import { isCorruption } from '../core/errors.js';
import { Catalog } from '../store/catalog.js';
import { Registry } from '../registry/registry.js';
import { DeviceCodecs, setDeviceCodec } from '../device-codecs/device-codecs.js';
import { assetView, deviceWithAssetsView, tokenView } from '../registry/views.js';
import { createLogger } from '../ops/logger.js';
import { Daemon } from '../daemon.js';
import { ServiceHooks } from '../ops/service.js';
import { programVersion } from '../version.js';
import { formatTable } from './table.js';
import { SYNC_USAGE, runSyncCommand } from './sync-commands.js';
import { LorawanProvisioning } from '../lpwan/provisioning.js';

const USAGE = `usage: outpost <command> [options]

  run [--config FILE] [--data DIR]                  start the daemon
  device create --name N [--title T] [--id ID] [--gateway GatewayID] [--json]
                                                    register a device; prints its ID and token (once)
  device list [--json]
  device show <DeviceID> [--json]
  device delete <DeviceID>
  device token <DeviceID> [--json]                  issue a new device token, revoking the old one
  device codec <DeviceID> --uplink FORMAT [--file F] [--downlink FORMAT [--downlink-file F] [--port N]]
                                                    set the device's codecs (auto|json|cbor|abcl|js)
  device codec <DeviceID> --uplink FORMAT [--file F] --try [--limit N] [--from T] [--to T] [--json]
                                                    try a codec on the device's kept raw uplinks; changes nothing
  device redecode <DeviceID> [--from T] [--to T] [--json]
                                                    re-decode kept raw uplinks with the current codec, with a progress bar
  device lorawan <DeviceID> abp --devaddr H --nwkskey H --appskey H [--fcnt-up N] [--fcnt-down N] [--deveui H] [--port N]
  device lorawan <DeviceID> otaa --deveui H --joineui H --appkey H [--port N]
  device lorawan <DeviceID> show|delete            LoRaWAN settings (see docs/lpwan.md)
  asset create <DeviceID> --name N --is sensor|actuator|virtual|config --profile '<json>' [--json]
  asset list <DeviceID> [--json]
  token create --name N --scopes read,command,admin [--json]
  token list [--json]
  token revoke <TokenID>
  state get <DeviceID> <AssetName> [--json]
  codec check|decode|encode ...                      see docs/codecs.md
${SYNC_USAGE}
  status [--json]                                   ask the running daemon (version, uptime, counts, radio, upstream)
  doctor [--json]                                   check config, ports, data dir, database, disk, radio, upstream, clock
  backup FILE                                       online backup of the database (while the daemon runs)
  restore FILE [--yes]                              replace the database with a backup (daemon stopped)

Every command takes --data DIR and --config FILE (or OUTPOST_CONFIG / OUTPOST_DATA_DIR).`;

class UsageError extends Error {}

/** Exit codes (docs/configuration.md): systemd's RestartPreventExitStatus can list those a restart cannot fix. */
const EXIT_CODES = { config: 2, dataDirLocked: 3, storeCorrupt: 4 } as const;

const write = (text: string) => process.stdout.write(text + '\n');

function configFrom(values: { config?: string; data?: string }): OutpostConfig {
  return loadConfig({ file: values.config, dataDir: values.data });
}

async function runDaemon(config: OutpostConfig, sources: ConfigSources): Promise<number> {
  const logger = createLogger(config.log.level);
  const daemon = new Daemon(config, logger);
  // systemd readiness/watchdog and SIGHUP reloads (docs/operations.md).
  const service = new ServiceHooks(daemon, sources, logger);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    service.stopping();
    daemon
      .stop()
      .then(() => {
        logger.info('stopped');
        logger.flush();
        process.exitCode = 0;
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        logger.flush();
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // On failure start() has closed what it opened; the rejection reaches main's exit-code mapping.
  const ports = await daemon.start();
  logger.info({ ports, version: programVersion(), dataDir: config.dataDir, role: config.role }, 'ready');
  service.ready(ports);
  return 0;
}

/** Management commands open the same database as the daemon; the daemon notices their commits. */
function withRegistry<T>(config: OutpostConfig, work: (registry: Registry, store: Store) => T): T {
  const store = Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes });
  try {
    return work(new Registry(new Catalog(store), systemClock, config.limits), store);
  } finally {
    store.close();
  }
}

function requireArg(positionals: string[], index: number, what: string): string {
  const v = positionals[index];
  if (!v) throw new UsageError(`missing ${what}`);
  return v;
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--version' || argv[0] === '-v') {
    write(programVersion());
    return 0;
  }
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    write(USAGE);
    return command ? 0 : 2;
  }
  if (command === 'status' || command === 'doctor' || command === 'backup' || command === 'restore') {
    const { runOpsCommand } = await import('./ops-commands.js');
    return runOpsCommand(command, rest, write);
  }
  if (command === 'codec') {
    const { runCodecCommand } = await import('./codec-commands.js');
    return runCodecCommand(rest, write);
  }
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      data: { type: 'string' },
      json: { type: 'boolean', default: false },
      name: { type: 'string' },
      title: { type: 'string' },
      is: { type: 'string' },
      profile: { type: 'string' },
      scopes: { type: 'string' },
      uplink: { type: 'string' },
      file: { type: 'string' },
      downlink: { type: 'string' },
      'downlink-file': { type: 'string' },
      port: { type: 'string' },
      id: { type: 'string' },
      gateway: { type: 'string' },
      before: { type: 'string' },
      yes: { type: 'boolean', default: false },
      try: { type: 'boolean', default: false },
      limit: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      devaddr: { type: 'string' },
      nwkskey: { type: 'string' },
      appskey: { type: 'string' },
      'fcnt-up': { type: 'string' },
      'fcnt-down': { type: 'string' },
      deveui: { type: 'string' },
      joineui: { type: 'string' },
      appkey: { type: 'string' },
    },
  });
  const config = configFrom(values);
  const [sub] = positionals;
  const json = values.json === true;
  const show = (data: unknown, human: () => string) => write(json ? JSON.stringify(data, null, 2) : human());

  if (command === 'gateway' || command === 'outbox') {
    return runSyncCommand({ command, sub, positionals, values, config, show, usage: (message) => new UsageError(message) });
  }
  switch (`${command} ${command === 'run' ? '' : (sub ?? '')}`.trim()) {
    case 'run':
      return runDaemon(config, { file: values.config, dataDir: values.data });
    case 'device create':
      return withRegistry(config, (registry) => {
        const { device, token } = registry.createDevice({ name: values.name ?? 'device', title: values.title, id: values.id, gateway: values.gateway });
        show({ id: device.id, token }, () => `device ${device.id} created\ntoken: ${token}\n(the token is shown only now; keep it)`);
        return 0;
      });
    case 'device list':
      return withRegistry(config, (_r, store) => {
        const devices = store.devices.list();
        show(
          devices.map((d) => deviceWithAssetsView(d, store)),
          () => formatTable(['ID', 'NAME', 'ASSETS', 'CREATED'], devices.map((d) => [d.id, d.name, store.assets.count(d.id), new Date(d.createdOn).toISOString()])),
        );
        return 0;
      });
    case 'device show':
      return withRegistry(config, (registry, store) => {
        const device = registry.requireDevice(requireArg(positionals, 1, '<DeviceID>'));
        const view = deviceWithAssetsView(device, store);
        show(view, () =>
          [
            `device ${view.id}  name: ${view.name}  created: ${view.createdOn}`,
            '',
            formatTable(['ASSET', 'IS', 'TYPE', 'VALUE', 'AT'], view.assets.map((a) => [a.name, a.is, String(a.profile.type), a.state ? JSON.stringify(a.state.value) : null, a.state?.at])),
          ].join('\n'),
        );
        return 0;
      });
    case 'device delete':
      return withRegistry(config, (registry) => {
        const id = requireArg(positionals, 1, '<DeviceID>');
        registry.deleteDevice(id);
        show({ deleted: id }, () => `device ${id} deleted`);
        return 0;
      });
    case 'device token':
      return withRegistry(config, (registry) => {
        const result = registry.rotateDeviceToken(requireArg(positionals, 1, '<DeviceID>'));
        show({ id: result.tokenId, token: result.token }, () => `new device token: ${result.token}\n(previous device tokens are revoked)`);
        return 0;
      });
    case 'device codec': {
      const deviceId = requireArg(positionals, 1, '<DeviceID>');
      if (!values.uplink) throw new UsageError('missing --uplink FORMAT');
      const side = (format: string, file: string | undefined) => {
        if (!file) return { format };
        let text: string;
        try {
          text = readFileSync(file, 'utf8');
        } catch {
          throw new UsageError(`cannot read ${file}`);
        }
        return format === 'js' ? { format, script: text } : { format, document: text };
      };
      const body: Record<string, unknown> = { uplink: side(values.uplink, values.file) };
      if (values.downlink) {
        const downlink: Record<string, unknown> = side(values.downlink, values['downlink-file']);
        if (values.port !== undefined) downlink.port = Number(values.port);
        body.downlink = downlink;
      }
      if (values.try) {
        const { runCodecTry } = await import('./redecode-commands.js');
        const { parseTryBody } = await import('../device-codecs/codec-try.js');
        const limit = values.limit === undefined ? undefined : Number(values.limit);
        const request = parseTryBody({ ...body, limit, from: values.from, to: values.to });
        return runCodecTry(config, deviceId, request, json, write);
      }
      const store = Store.open(config.dataDir, { synchronous: config.store.synchronous, maxBytes: config.store.maxBytes });
      const codecs = new DeviceCodecs(config, createLogger('silent'));
      try {
        const device = new Registry(new Catalog(store), systemClock, config.limits).requireDevice(deviceId);
        const result = await setDeviceCodec(store, codecs, systemClock, device, body);
        show(result, () => [`device ${deviceId}: uplink ${JSON.stringify((result.uplink as { format: string }).format)}, downlink ${JSON.stringify((result.downlink as { format: string }).format)}`, ...result.warnings.map((w) => `warning: ${w}`)].join('\n'));
        return 0;
      } finally {
        codecs.dispose();
        store.close();
      }
    }
    case 'device redecode': {
      const deviceId = requireArg(positionals, 1, '<DeviceID>');
      const { runRedecode, timeOption } = await import('./redecode-commands.js');
      const from = timeOption(values.from, '--from');
      const to = timeOption(values.to, '--to');
      if (from !== null && to !== null && from > to) throw new UsageError('--from must not be later than --to');
      return runRedecode(config, deviceId, { from, to, json }, write, (text) => process.stderr.write(text));
    }
    case 'device lorawan':
      return withRegistry(config, (registry, store) => {
        const device = registry.requireDevice(requireArg(positionals, 1, '<DeviceID>'));
        const action = requireArg(positionals, 2, 'abp, otaa, show or delete');
        const provisioning = new LorawanProvisioning(store.lorawanDevices, store.downlinks, systemClock);
        const integer = (name: 'fcnt-up' | 'fcnt-down' | 'port') => {
          const raw = values[name];
          if (raw === undefined) return undefined;
          if (!/^\d+$/.test(raw)) throw new UsageError(`--${name} must be a non-negative integer`);
          return Number(raw);
        };
        const describe = (v: ReturnType<LorawanProvisioning['get']>) =>
          [
            `device ${device.id}: LoRaWAN ${v.activation.toUpperCase()}, class ${v.class}, ${v.joined ? `DevAddr ${v.devAddr}` : 'not joined yet'}`,
            `  DevEUI ${v.devEui ?? '-'}  JoinEUI ${v.joinEui ?? '-'}  FPort ${v.fPort}  FCntUp ${v.fCntUp}  FCntDown ${v.fCntDown}  queued ${v.queued}`,
            v.lastUplink ? `  last uplink ${v.lastUplink.at} fCnt ${v.lastUplink.fCnt} via ${v.lastUplink.source}` : '  no uplink yet',
          ].join('\n');
        switch (action) {
          case 'abp':
          case 'otaa': {
            const body: Record<string, unknown> =
              action === 'abp'
                ? { activation: 'abp', devAddr: values.devaddr, nwkSKey: values.nwkskey, appSKey: values.appskey, fCntUp: integer('fcnt-up'), fCntDown: integer('fcnt-down'), devEui: values.deveui }
                : { activation: 'otaa', devEui: values.deveui, joinEui: values.joineui, appKey: values.appkey };
            const port = integer('port');
            if (port !== undefined) body.fPort = port;
            for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
            const view = provisioning.put(device.id, body);
            show(view, () => describe(view));
            return 0;
          }
          case 'show': {
            const view = provisioning.get(device.id);
            show(view, () => describe(view));
            return 0;
          }
          case 'delete':
            provisioning.delete(device.id);
            show({ deleted: device.id }, () => `LoRaWAN settings, session and downlink queue of device ${device.id} deleted`);
            return 0;
          default:
            throw new UsageError(`unknown lorawan action "${action}": use abp, otaa, show or delete`);
        }
      });
    case 'asset create':
      return withRegistry(config, (registry, store) => {
        const deviceId = requireArg(positionals, 1, '<DeviceID>');
        if (!values.profile) throw new UsageError('missing --profile');
        let profile: unknown;
        try {
          profile = JSON.parse(values.profile);
        } catch {
          throw new UsageError('--profile must be JSON, e.g. \'{"type":"integer"}\'');
        }
        const asset = registry.createAsset(deviceId, { name: values.name, is: values.is ?? 'sensor', profile, title: values.title });
        show(assetView(asset, store), () => `asset ${asset.name} (${asset.id}) created on device ${deviceId}`);
        return 0;
      });
    case 'asset list':
      return withRegistry(config, (registry, store) => {
        const device = registry.requireDevice(requireArg(positionals, 1, '<DeviceID>'));
        const assets = store.assets.list(device.id).map((a) => assetView(a, store));
        show(assets, () => formatTable(['ID', 'NAME', 'IS', 'PROFILE'], assets.map((a) => [a.id, a.name, a.is, JSON.stringify(a.profile)])));
        return 0;
      });
    case 'token create':
      return withRegistry(config, (registry) => {
        const { token, secret } = registry.createAppToken({ name: values.name, scopes: values.scopes });
        show({ id: token.id, token: secret }, () => `token ${token.id} created with scopes ${token.scopes.join(',')}\ntoken: ${secret}\n(the token is shown only now; keep it)`);
        return 0;
      });
    case 'token list':
      return withRegistry(config, (_r, store) => {
        const tokens = store.tokens.list().map(tokenView);
        show(tokens, () => formatTable(['ID', 'KIND', 'NAME', 'DEVICE', 'SCOPES', 'REVOKED'], tokens.map((t) => [t.id, t.kind, t.name, t.deviceId, t.scopes.join(','), t.revokedOn])));
        return 0;
      });
    case 'token revoke':
      return withRegistry(config, (registry) => {
        const id = requireArg(positionals, 1, '<TokenID>');
        registry.revokeToken(id);
        show({ revoked: id }, () => `token ${id} revoked`);
        return 0;
      });
    case 'state get':
      return withRegistry(config, (registry, store) => {
        const deviceId = requireArg(positionals, 1, '<DeviceID>');
        const name = requireArg(positionals, 2, '<AssetName>');
        registry.requireDevice(deviceId);
        const asset = store.assets.byName(deviceId, name);
        if (!asset) throw new UsageError(`asset "${name}" not found on device ${deviceId}`);
        const latest = store.states.latest(asset.id);
        const state = latest ? { value: JSON.parse(latest.valueJson) as unknown, at: new Date(latest.at).toISOString() } : null;
        show({ id: asset.id, state }, () => (state ? `${name} = ${JSON.stringify(state.value)}  at ${state.at}` : `${name} has no state yet`));
        return 0;
      });
    default:
      throw new UsageError(`unknown command: ${argv.slice(0, 2).join(' ')}`);
  }
}

main(process.argv.slice(2))
  .then((code) => {
    if (code !== 0) process.exitCode = code;
  })
  .catch((err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`outpost: invalid configuration: ${err.message}\n`);
      process.exitCode = EXIT_CODES.config;
    } else if (err instanceof DataDirLockedError) {
      process.stderr.write(`outpost: ${err.message}\n`);
      process.exitCode = EXIT_CODES.dataDirLocked;
    } else if (err instanceof StoreCorruptError || isCorruption(err)) {
      const message = err instanceof StoreCorruptError ? err.message : `the database file is damaged (${(err as Error).message}); restore a backup`;
      process.stderr.write(`outpost: ${message}\n`);
      process.exitCode = EXIT_CODES.storeCorrupt;
    } else if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`outpost: ${(err as Error).message}\n\n${USAGE}\n`);
      process.exitCode = 2;
    } else if (isServiceError(err)) {
      process.stderr.write(`outpost: ${err.message} (${err.code})\n`);
      const problems = err.details?.errors;
      if (Array.isArray(problems)) for (const p of problems) process.stderr.write(`  - ${String(p)}\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`outpost: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    }
    // A daemon that failed to start has closed its doors; should anything still hold the event
    // loop, the process must not linger half-started.
    setTimeout(() => process.exit(), 5000).unref();
  });
