import { accessSync, constants, existsSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createTcpServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { connect as tcpConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { dirname, join } from 'node:path';
import { ConfigError, loadConfig, upstreamUrls, type ConfigSources, type OutpostConfig } from '../core/config.js';
import { DATABASE_FILE } from './backup.js';
import { checkDatabaseFile, receiveTimesOutside } from '../store/database-files.js';
import { daemonHolding } from './daemon-presence.js';
import type { DaemonStatus } from './status.js';
import { checkReleaseFiles, RELEASE_ROOT } from './release-check.js';

/** One result of `outpost doctor`: `fix` says what to do when `ok` is false. */
export interface Finding {
  check: string;
  ok: boolean;
  message: string;
  fix: string | null;
}

export interface DoctorReport {
  ok: boolean;
  findings: Finding[];
}

export interface DoctorOptions {
  sources: ConfigSources;
  now?: () => number;
  /** Time limit of network checks (upstream). */
  timeoutMs?: number;
}

const MiB = 1024 * 1024;
/** Below this much free disk a gateway is in trouble whatever its bounds say. */
const MIN_FREE_BYTES = 64 * MiB;
/** A clock before this date is certainly wrong: a Pi without RTC boots in 1970. */
const EARLIEST_PLAUSIBLE = Date.UTC(2024, 0, 1);

const good = (check: string, message: string): Finding => ({ check, ok: true, message, fix: null });
const bad = (check: string, message: string, fix: string): Finding => ({ check, ok: false, message, fix });

/** Reads optional sections of later features (radio, upstream) without depending on their types. */
function section(config: OutpostConfig, name: string): Record<string, unknown> | undefined {
  const value = (config as unknown as Record<string, unknown>)[name];
  return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
}

/**
 * `outpost doctor` (docs/operations.md, "Doctor"): checks that work with or without a daemon
 * running on the data dir. Every finding names what is wrong and how to fix it.
 */
export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const now = options.now ?? Date.now;
  const findings: Finding[] = [];
  let config: OutpostConfig;
  try {
    config = loadConfig(options.sources);
    findings.push(good('config', `${options.sources.file ?? process.env.OUTPOST_CONFIG ?? 'embedded defaults'}: valid`));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    findings.push(bad('config', err.message, 'correct that key in the config file (docs/configuration.md lists every key), then `outpost doctor` again'));
    // The other checks still run, on the defaults and the data dir given on the command line.
    config = loadConfig({ dataDir: options.sources.dataDir ?? process.env.OUTPOST_DATA_DIR, env: {} });
  }
  const holder = await daemonHolding(config.dataDir);
  findings.push(
    good(
      'daemon',
      holder
        ? `a daemon runs on ${config.dataDir}${holder.status ? ` (pid ${holder.pid}, version ${holder.status.version}, up ${holder.status.uptimeSeconds} s)` : ''}`
        : `no daemon runs on ${config.dataDir}`,
    ),
  );
  findings.push(checkRelease());
  findings.push(...(await checkPorts(config, holder?.status)));
  findings.push(checkDataDir(config.dataDir));
  findings.push(checkDatabase(config.dataDir));
  findings.push(checkDisk(config));
  findings.push(...checkSerial(config));
  findings.push(await checkUpstream(config, options.timeoutMs ?? 5000));
  findings.push(checkClock(config.dataDir, now()));
  return { ok: findings.every((f) => f.ok), findings };
}

/** The release this program runs from has every file the daemon reads at run time (release-check.ts). */
function checkRelease(): Finding {
  const problems = checkReleaseFiles();
  if (problems.length === 0) return good('release', `${RELEASE_ROOT}: complete (console files, codec documents, package.json)`);
  return bad(
    'release',
    `${RELEASE_ROOT} is incomplete: ${problems.map((p) => `${p.path} ${p.problem} (needed by ${p.neededBy})`).join('; ')}`,
    'reinstall from a built checkout (`npm ci && npm run build`, then `sudo systemd/install.sh`); the installer copies every run-time file',
  );
}

interface Listener {
  key: string;
  statusKey: string;
  protocol: 'tcp' | 'udp';
  host: string;
  port: number;
}

function listeners(config: OutpostConfig): Listener[] {
  const out: Listener[] = [];
  if (config.http.enabled) out.push({ key: 'http.port', statusKey: 'http', protocol: 'tcp', host: config.http.host, port: config.http.port });
  if (config.mqtt.enabled) {
    out.push({ key: 'mqtt.port', statusKey: 'mqtt', protocol: 'tcp', host: config.mqtt.host, port: config.mqtt.port });
    if (config.mqtt.tls.enabled) out.push({ key: 'mqtt.tls.port', statusKey: 'mqttTls', protocol: 'tcp', host: config.mqtt.host, port: config.mqtt.tls.port });
  }
  const radio = section(config, 'radio');
  const gwmp = radio?.gwmp;
  // Only when the configuration has a packet forwarder door (radio.gwmp an object; false = off).
  if (gwmp && typeof gwmp === 'object') {
    const settings = gwmp as { port?: unknown; host?: unknown };
    const port = typeof settings.port === 'number' ? settings.port : 1700;
    const host = typeof settings.host === 'string' ? settings.host : '0.0.0.0';
    out.push({ key: 'radio.gwmp.port', statusKey: 'gwmp', protocol: 'udp', host, port });
  }
  const bs = radio?.basicStation;
  if (bs && typeof bs === 'object') {
    const settings = bs as { port?: unknown; host?: unknown };
    const port = typeof settings.port === 'number' ? settings.port : 3001;
    const host = typeof settings.host === 'string' ? settings.host : '0.0.0.0';
    out.push({ key: 'radio.basicStation.port', statusKey: 'basicStation', protocol: 'tcp', host, port });
  }
  return out;
}

function tryBind(l: Listener): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    if (l.protocol === 'udp') {
      const socket = createSocket(l.host.includes(':') ? 'udp6' : 'udp4');
      socket.once('error', (err) => {
        socket.close();
        resolve(err as NodeJS.ErrnoException);
      });
      socket.bind(l.port, l.host, () => socket.close(() => resolve(undefined)));
      return;
    }
    const server = createTcpServer();
    server.once('error', (err) => resolve(err as NodeJS.ErrnoException));
    server.listen(l.port, l.host, () => server.close(() => resolve(undefined)));
  });
}

async function checkPorts(config: OutpostConfig, status: DaemonStatus | undefined): Promise<Finding[]> {
  const findings: Finding[] = [];
  for (const l of listeners(config)) {
    const name = `${l.key} ${l.protocol.toUpperCase()} ${l.host}:${l.port}`;
    if (l.port === 0) {
      findings.push(good('ports', `${name}: 0 means any free port`));
      continue;
    }
    const err = await tryBind(l);
    if (!err) findings.push(good('ports', `${name}: free`));
    else if (err.code === 'EADDRINUSE' && status?.ports?.[l.statusKey] === l.port) findings.push(good('ports', `${name}: held by this data dir's daemon (pid ${status.pid})`));
    else if (err.code === 'EADDRINUSE')
      findings.push(
        bad('ports', `${name}: in use by another program`, `find it with \`ss -${l.protocol === 'tcp' ? 'lt' : 'lu'}np 'sport = :${l.port}'\`, stop it, or set another ${l.key}`),
      );
    else if (err.code === 'EACCES') findings.push(bad('ports', `${name}: not allowed (ports below 1024 need privileges)`, `use a port of 1024 or more for ${l.key}`));
    else if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN')
      findings.push(bad('ports', `${name}: ${l.host} is not an address of this machine (${err.code})`, `set the host to 0.0.0.0 or one of this machine's addresses (\`ip -br addr\`)`));
    else findings.push(bad('ports', `${name}: cannot be bound (${err.code ?? err.message})`, `check ${l.key} and its host`));
  }
  return findings;
}

function checkDataDir(dataDir: string): Finding {
  const fix = `make it the service user's: \`chown -R outpost:outpost ${dataDir} && chmod 700 ${dataDir}\` (or give another --data directory)`;
  let target = dataDir;
  if (!existsSync(dataDir)) {
    target = dirname(dataDir);
    while (!existsSync(target) && dirname(target) !== target) target = dirname(target);
  } else if (!statSync(dataDir).isDirectory()) {
    return bad('dataDir', `${dataDir} is not a directory`, 'remove that file or give another --data directory');
  }
  // access(W_OK) says yes on a read-only mount; writing a file is the real test.
  const probe = join(target, `.outpost-doctor-${process.pid}`);
  try {
    writeFileSync(probe, '');
    rmSync(probe, { force: true });
  } catch (err) {
    return bad('dataDir', `${target} is not writable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, fix);
  }
  return good('dataDir', target === dataDir ? `${dataDir}: writable` : `${dataDir} does not exist yet; ${target} is writable, so the daemon can create it`);
}

function checkDatabase(dataDir: string): Finding {
  const path = join(dataDir, DATABASE_FILE);
  if (!existsSync(path)) return good('database', `no database yet at ${path} (created at the first start)`);
  if (statSync(path).size === 0) return good('database', `${path} is empty (a new database)`);
  const problem = checkDatabaseFile(path);
  if (!problem) return good('database', `${path}: quick_check ok`);
  if (problem.includes('newer')) return bad('database', `${path} ${problem}`, 'install the Outpost release that wrote it (or a newer one)');
  return bad(
    'database',
    `${path} ${problem}`,
    'stop the daemon (systemctl stop outpost), then restore the latest backup: `outpost restore FILE` (docs/operations.md, "Backup and restore")',
  );
}

function checkDisk(config: OutpostConfig): Finding {
  let dir = config.dataDir;
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  let free: number;
  try {
    const fs = statfsSync(dir);
    free = fs.bavail * fs.bsize;
  } catch (err) {
    return bad('disk', `cannot read the free space of ${dir} (${(err as Error).message})`, 'check the file system of the data dir');
  }
  const needs: string[] = [];
  let need = MIN_FREE_BYTES;
  const upstream = section(config, 'upstream');
  if (upstream?.url) {
    const bound = typeof upstream.maxBytes === 'number' ? upstream.maxBytes : 256 * MiB;
    need += bound;
    needs.push(`the outbox may grow to ${(bound / MiB).toFixed(0)} MiB (upstream.maxBytes)`);
  }
  if (config.store.maxBytes > 0) {
    let used = 0;
    for (const suffix of ['', '-wal']) {
      try {
        used += statSync(join(config.dataDir, DATABASE_FILE) + suffix).size;
      } catch {
        // not there yet
      }
    }
    const room = Math.max(0, config.store.maxBytes - used);
    need += room;
    needs.push(`the database may grow ${(room / MiB).toFixed(0)} MiB more (store.maxBytes)`);
  }
  const text = `${(free / MiB).toFixed(0)} MiB free for ${dir}${needs.length ? `; ${needs.join(', ')}` : ''}`;
  if (free >= need) return good('disk', text);
  return bad(
    'disk',
    `${text}: less than the ${(need / MiB).toFixed(0)} MiB needed`,
    'free space on that file system, or lower upstream.maxBytes / store.maxBytes so the bounds fit the disk',
  );
}

/** Exported for tests that give it a radio section directly. */
export function checkSerial(config: OutpostConfig): Finding[] {
  const radio = section(config, 'radio');
  const sources = Array.isArray(radio?.serial) ? (radio.serial as Array<Record<string, unknown>>) : [];
  if (sources.length === 0) return [good('serial', 'no serial radio sources configured')];
  let connected: string[] = [];
  try {
    connected = readdirSync('/dev/serial/by-id').map((n) => `/dev/serial/by-id/${n}`);
  } catch {
    // no USB serial device plugged in at all
  }
  const available = connected.length ? `connected now: ${connected.join(', ')}` : 'no USB serial device is connected (/dev/serial/by-id is empty)';
  return sources.map((source, i) => {
    const path = typeof source.path === 'string' ? source.path : '';
    const key = `radio.serial[${i}].path`;
    if (!path || !existsSync(path)) {
      return bad('serial', `${key} ${JSON.stringify(path)}: no such device`, `plug the modem in or correct ${key}; ${available}`);
    }
    if (!statSync(path).isCharacterDevice()) return bad('serial', `${key} ${path}: not a serial device (not a character device)`, `point ${key} at the modem's /dev/serial/by-id/… link`);
    try {
      accessSync(path, constants.R_OK | constants.W_OK);
    } catch {
      return bad('serial', `${key} ${path}: no permission to open it`, 'the service user needs the dialout group (the unit has SupplementaryGroups=dialout); for the CLI: `usermod -aG dialout USER`');
    }
    const stable = path.startsWith('/dev/serial/by-id/') ? '' : ' (tip: the /dev/serial/by-id/… name stays the same across reboots and re-plugging)';
    return good('serial', `${key} ${path}: present${stable}`);
  });
}

/** Exported for tests that give it an upstream section directly. */
export async function checkUpstream(config: OutpostConfig, timeoutMs: number): Promise<Finding> {
  const upstream = section(config, 'upstream');
  // Several central URLs (tried in turn by the link): the first is checked.
  const url = typeof upstream?.url === 'string' || Array.isArray(upstream?.url) ? upstreamUrls(upstream.url as string | string[])[0] : undefined;
  if (!upstream || !url) return good('upstream', 'no upstream configured (no sync)');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return bad('upstream', `upstream.url ${JSON.stringify(url)} is not a URL`, 'use mqtt://host:1883 or mqtts://host:8883');
  }
  const secure = parsed.protocol === 'mqtts:';
  const port = Number(parsed.port) || (secure ? 8883 : 1883);
  const read = (key: string) => (typeof upstream[key] === 'string' ? readFileSync(upstream[key] as string) : undefined);
  let tls: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  try {
    tls = { ca: read('ca'), cert: read('cert'), key: read('key') };
  } catch (err) {
    return bad('upstream', `a TLS file of upstream cannot be read (${(err as Error).message})`, 'check upstream.ca, upstream.cert and upstream.key');
  }
  // The credentials the link uses: the gateway token, else the first per-device token.
  const devices = upstream.devices && typeof upstream.devices === 'object' ? Object.values(upstream.devices as Record<string, { token?: string }>) : [];
  const username = typeof upstream.token === 'string' ? upstream.token : devices.find((d) => typeof d?.token === 'string')?.token;
  let mqtt: typeof import('mqtt') | undefined;
  try {
    mqtt = await import('mqtt');
  } catch {
    mqtt = undefined;
  }
  if (!mqtt) {
    const err = await tcpReach(parsed.hostname, port, secure, tls, timeoutMs);
    return err
      ? bad('upstream', `${url}: unreachable (${err})`, 'check the network, DNS and firewall towards the central, and upstream.url')
      : good('upstream', `${url}: reachable (credentials not checked: the MQTT client library is not installed)`);
  }
  const client = mqtt.connect(url, {
    username,
    password: '',
    clientId: `outpost-doctor-${process.pid}`,
    clean: true,
    reconnectPeriod: 0,
    connectTimeout: timeoutMs,
    ...tls,
  });
  const outcome = await new Promise<{ ok: true } | { ok: false; error: Error & { code?: number | string } }>((resolve) => {
    const timer = setTimeout(() => resolve({ ok: false, error: new Error(`no answer within ${timeoutMs} ms`) }), timeoutMs + 500);
    client.once('connect', () => {
      clearTimeout(timer);
      resolve({ ok: true });
    });
    client.once('error', (error) => {
      clearTimeout(timer);
      resolve({ ok: false, error });
    });
    client.once('close', () => {
      clearTimeout(timer);
      resolve({ ok: false, error: new Error('connection closed before CONNACK') });
    });
  });
  client.end(true);
  if (outcome.ok) return good('upstream', `${url}: connected and authenticated`);
  const code = outcome.error.code;
  if (code === 4 || code === 5 || code === 134 || code === 135) {
    return bad('upstream', `${url}: reachable, but it refused the credentials (${outcome.error.message})`, 'check upstream.token and upstream.gatewayId (printed by `outpost gateway create` at the central), or the device tokens');
  }
  return bad('upstream', `${url}: unreachable (${outcome.error.message})`, 'check the network, DNS and firewall towards the central, upstream.url, and upstream.ca for a private CA');
}

function tcpReach(host: string, port: number, secure: boolean, tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = secure ? tlsConnect({ host, port, servername: host, ...tls }) : tcpConnect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(`no answer within ${timeoutMs} ms`);
    }, timeoutMs);
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code ?? err.message);
    });
  });
}

function checkClock(dataDir: string, now: number): Finding {
  const iso = (ms: number) => new Date(ms).toISOString();
  if (now < EARLIEST_PLAUSIBLE) {
    return bad(
      'clock',
      `the system clock says ${iso(now)}: it has not been set (a gateway without a real-time clock starts in 1970)`,
      'enable time sync (`timedatectl set-ntp true`, and network access to NTP) or fit an RTC module; states received meanwhile carry wrong times',
    );
  }
  const path = join(dataDir, DATABASE_FILE);
  if (!existsSync(path) || statSync(path).size === 0) return good('clock', `system clock ${iso(now)}`);
  try {
    // The newest 100 000 states: bounded work on any database size.
    const { checked, early, late } = receiveTimesOutside(path, EARLIEST_PLAUSIBLE, now + 5 * 60_000, 100_000);
    if (early === 0 && late === 0) return good('clock', `system clock ${iso(now)}; receive times of the last ${checked} states are plausible`);
    const parts = [];
    if (early) parts.push(`${early} received before ${iso(EARLIEST_PLAUSIBLE).slice(0, 10)} (the clock was not set then)`);
    if (late) parts.push(`${late} received "after" now (the clock has gone back since)`);
    return bad(
      'clock',
      `of the last ${checked} states, ${parts.join(' and ')}`,
      'keep time sync on (`timedatectl set-ntp true`) or fit an RTC; those states keep their wrong times: correct or delete them, or accept them as history',
    );
  } catch (err) {
    return good('clock', `system clock ${iso(now)} (stored states not checked: ${(err as Error).message})`);
  }
}
