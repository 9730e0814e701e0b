// The compiled daemon with a radio config, one provisioned device, a packet forwarder simulator over
// UDP and an MQTT client on the device's events: what the network server tests drive.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, provision, removeDir, startDaemon, tempDataDir, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient, type TestClient } from '../mqtt/helpers.js';
import { ForwarderSimulator, type RxpkInput } from './forwarder.js';
import { readDownlink, uplinkFrame, type DeviceKeys, type ReadDownlink } from './frames.js';

export const ASSETS = [
  { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
  { name: 'led', is: 'actuator', profile: { type: 'boolean' } },
];

export interface Rig {
  daemon: RunningDaemon;
  dataDir: string;
  configFile: string;
  /** The radio config the daemon was started with (a restart keeps it). */
  radio: Record<string, unknown>;
  app: string;
  deviceId: string;
  fwd: ForwarderSimulator;
  mqtt: TestClient;
  events: () => Array<Record<string, any>>;
  /** Waits for the next device event (after those already seen) that matches. */
  event: (pred: (e: Record<string, any>) => boolean, timeoutMs?: number) => Promise<Record<string, any>>;
  /** PUT /device/<id>/lorawan. */
  lorawan: (json: Record<string, unknown>) => Promise<Record<string, any>>;
  /** Pushes one uplink through the forwarder and waits for its `uplink` event. */
  uplink: (keys: DeviceKeys, frame: Parameters<typeof uplinkFrame>[1], rx?: Omit<RxpkInput, 'payload'>) => Promise<Record<string, any>>;
  /** The PULL_RESPs the forwarder got so far, decoded as the device reads them. */
  downlinks: (keys: DeviceKeys, fCntOf: (i: number) => number) => Array<{ txpk: Record<string, any>; frame: ReadDownlink }>;
  close: (keepDir?: boolean) => Promise<void>;
}

export async function startRig(radio: Record<string, unknown> = {}, existing?: { dataDir: string; deviceId: string; app: string }): Promise<Rig> {
  const dataDir = existing?.dataDir ?? tempDataDir();
  const configFile = join(dataDir, 'outpost.json');
  writeFileSync(configFile, JSON.stringify({ version: 1, radio }));
  let deviceId: string;
  let app: string;
  if (existing) ({ deviceId, app } = existing);
  else {
    const p = provision(dataDir, ASSETS);
    deviceId = p.device.id;
    app = p.app.token;
  }
  const daemon = await startDaemon({ dataDir, args: ['--config', configFile] });
  const fwd = new ForwarderSimulator('b827ebfffe000001');
  await fwd.connect(daemon.gwmpPort);
  await fwd.pull();
  const mqtt = await connectClient(daemon.mqttPort, app);
  await mqtt.client.subscribeAsync([`device/${deviceId}/events`], { qos: 1 });
  const events = () => mqtt.received.filter((m) => m.topic.endsWith('/events')).map((m) => JSON.parse(m.text) as Record<string, any>);
  let seen = 0;
  const event = async (pred: (e: Record<string, any>) => boolean, timeoutMs = 8000) => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const all = events();
      const i = all.findIndex((e, n) => n >= seen && pred(e));
      if (i >= 0) {
        seen = i + 1;
        return all[i]!;
      }
      if (Date.now() > end) throw new Error(`no matching event in time; last events: ${JSON.stringify(all.slice(-5))}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const rig: Rig = {
    daemon,
    dataDir,
    configFile,
    radio,
    app,
    deviceId,
    fwd,
    mqtt,
    events,
    event,
    lorawan: async (json) => {
      const res = await api(daemon.url, 'PUT', `/device/${deviceId}/lorawan`, { token: app, json });
      if (res.status !== 200) throw new Error(`PUT lorawan ${res.status}: ${res.text}`);
      return res.body;
    },
    uplink: async (keys, frame, rx = {}) => {
      await fwd.push([{ payload: uplinkFrame(keys, frame), ...rx }]);
      return event((e) => e.type === 'uplink' && e.fCnt === frame.fCnt);
    },
    downlinks: (keys, fCntOf) => fwd.pullResps().map((r, i) => ({ txpk: r.txpk, frame: readDownlink(keys, Buffer.from(r.txpk.data, 'base64'), fCntOf(i)) })),
    close: async (keepDir = false) => {
      await mqtt.end().catch(() => {});
      fwd.close();
      await daemon.stop();
      if (!keepDir) removeDir(dataDir);
    },
  };
  return rig;
}

/**
 * kill -9 of the rig's daemon and a start again on the same data dir, device and app token: what the
 * "survives a restart" tests (docs/lpwan.md) do. The forwarder and MQTT client are dropped first, as a
 * power cut drops them, and the returned rig has new ones connected to the new daemon.
 */
export async function killAndRestart(r: Rig): Promise<Rig> {
  await r.mqtt.end().catch(() => {});
  r.fwd.close();
  await r.daemon.stop('SIGKILL');
  return startRig(r.radio, { dataDir: r.dataDir, deviceId: r.deviceId, app: r.app });
}

/** The tear-down after a failed test: kill -9 whatever is still running and remove the data dir. */
export async function discardRig(r: Rig): Promise<void> {
  await r.mqtt.end().catch(() => {});
  r.fwd.close();
  await r.daemon.stop('SIGKILL').catch(() => {});
  removeDir(r.dataDir);
}

/** Waits until `check` holds (polling), or fails with `what`. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
