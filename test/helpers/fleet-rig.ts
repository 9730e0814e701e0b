// A central and its gateways, each a real daemon on its own data dir, the gateways syncing to the
// central over MQTT (docs/sync.md): what the sync and fleet tests start the same way every time.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, cliJson, removeDir, startDaemon, tempDataDir, type RunningDaemon } from './daemon.js';
import { until } from './wait.js';

/** A gateway created at the central: its ID and token there, its own data dir, its daemon while it runs. */
export interface FleetGateway {
  id: string;
  token: string;
  dir: string;
  /** The gateway's config file (in its data dir), when it was given a config. */
  configFile?: string;
  /** Environment the gateway's daemon starts with besides its upstream settings. */
  env: Record<string, string | undefined>;
  daemon?: RunningDaemon;
}

export interface FleetOptions {
  /** The central's config file's content beside `role: "central"`; without one the role comes from OUTPOST_ROLE. */
  centralConfig?: Record<string, unknown>;
  /**
   * Environment for the central's daemon and for the CLI run on its data dir (a central node on
   * PostgreSQL: its OUTPOST_POSTGRES_URL, since its catalog writes go there, docs/scale-out.md).
   */
  centralEnv?: Record<string, string | undefined>;
}

export interface Fleet {
  /** The running central; a new daemon after restartCentral(). */
  central: RunningDaemon;
  centralDir: string;
  /** The central's MQTT port, kept across restarts so the gateways find it again. */
  centralMqttPort: number;
  /** An application token at the central with the read, command and admin scopes. */
  app: string;
  gateways: FleetGateway[];
  /** Creates a gateway at the central (CLI) with a fresh data dir; `config` is its config file's content. */
  addGateway(name: string, config?: Record<string, unknown>, env?: Record<string, string | undefined>): FleetGateway;
  /** Starts the gateway's daemon with its upstream set to the central. */
  startGateway(g: FleetGateway): Promise<RunningDaemon>;
  /** Whether the central counts the gateway as connected (GET /gateway/<id>). */
  connected(g: FleetGateway): Promise<boolean>;
  /** Waits until the central counts every one of these gateways as connected. */
  untilConnected(...gs: FleetGateway[]): Promise<void>;
  /** Clean stop of the gateway's daemon (SIGTERM), or kill -9 with `signal`, and the wait for its exit. */
  stopGateway(g: FleetGateway, signal?: NodeJS.Signals): Promise<void>;
  /** Stops the central and starts it again on the same data dir and MQTT port; `between` runs while it is down. */
  restartCentral(between?: () => void | Promise<void>): Promise<RunningDaemon>;
  /** Stops every daemon (gateways first) and removes every data dir. */
  close(): Promise<void>;
}

export async function startFleet(options: FleetOptions = {}): Promise<Fleet> {
  const centralDir = tempDataDir();
  const centralEnv = options.centralEnv ?? {};
  const centralStart = (mqttPort: number) => {
    const env = { ...centralEnv, OUTPOST_MQTT_PORT: String(mqttPort) };
    if (!options.centralConfig) return startDaemon({ dataDir: centralDir, env: { ...env, OUTPOST_ROLE: 'central' } });
    const file = join(centralDir, 'config.json');
    writeFileSync(file, JSON.stringify({ version: 1, role: 'central', ...options.centralConfig }));
    return startDaemon({ dataDir: centralDir, args: ['--config', file], env });
  };
  let central: RunningDaemon;
  try {
    central = await centralStart(0);
  } catch (err) {
    removeDir(centralDir);
    throw err;
  }
  const centralMqttPort = central.mqttPort;
  const gateways: FleetGateway[] = [];
  const fleet: Fleet = {
    central,
    centralDir,
    centralMqttPort,
    app: '',
    gateways,
    addGateway(name, config, env = {}) {
      const created = cliJson<{ id: string; token: string }>(['gateway', 'create', '--name', name], centralDir, centralEnv);
      const g: FleetGateway = { id: created.id, token: created.token, dir: tempDataDir(), env };
      if (config) {
        g.configFile = join(g.dir, 'config.json');
        writeFileSync(g.configFile, JSON.stringify({ version: 1, ...config }));
      }
      gateways.push(g);
      return g;
    },
    async startGateway(g) {
      g.daemon = await startDaemon({
        dataDir: g.dir,
        args: g.configFile ? ['--config', g.configFile] : [],
        env: { ...g.env, OUTPOST_UPSTREAM_URL: `mqtt://127.0.0.1:${centralMqttPort}`, OUTPOST_UPSTREAM_GATEWAY_ID: g.id, OUTPOST_UPSTREAM_TOKEN: g.token },
      });
      return g.daemon;
    },
    async connected(g) {
      const r = await api(fleet.central.url, 'GET', `/gateway/${g.id}`, { token: fleet.app });
      if (r.status !== 200) throw new Error(`GET /gateway/${g.id} at the central: ${r.status} ${r.text}`);
      return r.body.connected === true;
    },
    async untilConnected(...gs) {
      const names = gs.map((g) => g.id).join(', ');
      await until(`gateway ${names} connected at the central`, async () => (await Promise.all(gs.map((g) => fleet.connected(g)))).every(Boolean));
    },
    async stopGateway(g, signal = 'SIGTERM') {
      await g.daemon?.stop(signal);
      g.daemon = undefined;
    },
    async restartCentral(between) {
      await fleet.central.stop();
      await between?.();
      fleet.central = await centralStart(centralMqttPort);
      return fleet.central;
    },
    async close() {
      for (const g of gateways) await g.daemon?.stop();
      await fleet.central.stop();
      for (const g of gateways) removeDir(g.dir);
      removeDir(centralDir);
    },
  };
  try {
    fleet.app = cliJson<{ token: string }>(['token', 'create', '--name', 'ops', '--scopes', 'read,command,admin'], centralDir, centralEnv).token;
  } catch (err) {
    await fleet.close();
    throw err;
  }
  return fleet;
}
