// The two gateway doors side by side on the same daemon and the same 1 000 ABP devices: the
// packet forwarder (UDP) and LoRa Basics Station (WebSocket). Uplinks/s through the whole path
// (door → MIC → decrypt → ABCL → SQLite → MQTT feed), the daemon's CPU time per uplink, and the
// time from an uplink to the downlink leaving the door (PULL_RESP / dnmsg) for a queued command.
import { readFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import mqtt from 'mqtt';
import { api, cliJson, removeDir, startDaemon, tempDataDir } from '../test/helpers/daemon.js';
import { StationSimulator } from '../test/lpwan/station.js';
import { provisionDevices, pushData, uplink, type BenchDevice } from './lpwan.js';
import { sleep, type BenchRow } from './lib.js';

/** The daemon's user + system CPU time in ms (from /proc; clock ticks are 10 ms on Linux). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A door as the load generator sees it: send one uplink, and hear when a downlink left. */
interface DoorClient {
  name: string;
  send(payload: Buffer, i: number): void;
  downlinks(): number;
  downlinkAt(index: number): number;
  close(): void;
}

const STATIONS = 10;

export async function benchRadioDoors(total = Number(process.env.BENCH_DOOR_UPLINKS ?? 10_000)): Promise<BenchRow[]> {
  const dataDir = tempDataDir();
  const devices = provisionDevices(dataDir, 1000);
  const daemon = await startDaemon({ dataDir, env: { OUTPOST_RATE_LIMIT: '0' } });
  const clients: DoorClient[] = [];
  try {
    const app = cliJson<{ token: string }>(['token', 'create', '--name', 'bench', '--scopes', 'read,command,admin'], dataDir).token;

    // The packet forwarder: one gateway, PULL_DATA kept up.
    const udp = createSocket('udp4');
    const pullResps: number[] = [];
    udp.on('message', (m) => m[3] === 0x03 && pullResps.push(performance.now()));
    await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
    // The gateway EUI pushData() writes: its PULL_DATA opens the downlink path.
    const eui = Buffer.from('b827ebfffe00be9c', 'hex');
    const pull = () => udp.send(Buffer.concat([Buffer.from([2, 0, 1, 2]), eui]), daemon.gwmpPort, '127.0.0.1');
    pull();
    const keepAlive = setInterval(pull, 5000);
    clients.push({
      name: 'packet forwarder',
      send: (payload, i) => udp.send(pushData(payload, i), daemon.gwmpPort, '127.0.0.1'),
      downlinks: () => pullResps.length,
      downlinkAt: (i) => pullResps[i]!,
      close: () => {
        clearInterval(keepAlive);
        udp.close();
      },
    });

    // Basics Stations: ten, so the per-station message rate (200/s) is not what is measured.
    const stations: StationSimulator[] = [];
    for (let i = 0; i < STATIONS; i++) {
      const stationEui = `B827EBFFFE01${i.toString(16).padStart(4, '0').toUpperCase()}`;
      const { token } = cliJson<{ token: string }>(['station', 'create', '--eui', stationEui], dataDir);
      const s = await StationSimulator.open(`ws://127.0.0.1:${daemon.basicStationPort}/router-${stationEui}`, { headers: { authorization: `Bearer ${token}` } });
      await s.hello();
      stations.push(s);
    }
    const dnmsgs: number[] = [];
    for (const s of stations) s.ws.on('message', (data) => data.toString().includes('"dnmsg"') && dnmsgs.push(performance.now()));
    clients.push({
      name: 'Basics Station',
      send: (payload, i) => stations[i % STATIONS]!.uplink(payload, { xtime: String(1_000_000 + i * 1000) }),
      downlinks: () => dnmsgs.length,
      downlinkAt: (i) => dnmsgs[i]!,
      close: () => stations.forEach((s) => s.close()),
    });
    await sleep(300);

    const feed = await mqtt.connectAsync(`mqtt://127.0.0.1:${daemon.mqttPort}`, { username: app, password: 'x', reconnectPeriod: 0 });
    await feed.subscribeAsync('device/+/asset/count/feed', { qos: 0 });
    const arrivals = new Set<number>();
    feed.on('message', (_t, payload) => {
      const m = /"value":(\d+)/.exec(payload.toString());
      if (m) arrivals.add(Number(m[1]));
    });

    const rows: BenchRow[] = [];
    let offset = 0;
    for (const client of clients) {
      // Throughput: a window of uplinks in flight, until all arrived or none for 2 s.
      arrivals.clear();
      const base = offset;
      offset += total + 1000;
      const cpu0 = cpuMs(daemon.proc.pid!);
      const t0 = performance.now();
      let next = 0;
      let lastArrival = t0;
      let lastCount = 0;
      while (arrivals.size < total && performance.now() - lastArrival < 2000) {
        while (next < total && next - arrivals.size < 200) {
          client.send(uplink(devices[next % devices.length]!, base + next), next);
          next++;
        }
        await new Promise((r) => setImmediate(r));
        if (arrivals.size !== lastCount) {
          lastCount = arrivals.size;
          lastArrival = performance.now();
        }
      }
      const seconds = (lastArrival - t0) / 1000;
      const cpu = cpuMs(daemon.proc.pid!) - cpu0;
      rows.push({ name: `${client.name}: uplinks/s, 1 000 ABP devices, whole path (window 200)`, value: Math.round(arrivals.size / seconds), unit: 'uplinks/s' });
      rows.push({ name: `${client.name}: daemon CPU per uplink`, value: Number((cpu / Math.max(1, arrivals.size)).toFixed(3)), unit: 'ms' });
      rows.push({ name: `${client.name}: uplinks lost of ${total}`, value: total - arrivals.size, unit: 'uplinks' });

      // Downlink: a queued command leaves with the device's next uplink.
      const times: number[] = [];
      for (let i = 0; i < 50; i++) {
        const d: BenchDevice = devices[(i * 7 + (client === clients[0] ? 0 : 500)) % devices.length]!;
        await api(daemon.url, 'PUT', `/device/${d.id}/asset/reset`, { token: app, json: { is: 'actuator', profile: { type: 'boolean' } } });
        await api(daemon.url, 'PUT', `/device/${d.id}/codec`, { token: app, json: { uplink: { format: 'abcl', file: 'counter.abcl.json' }, downlink: { format: 'cbor' } } });
        const cmd = await api(daemon.url, 'PUT', `/device/${d.id}/asset/reset/command`, { token: app, json: { value: true } });
        if (cmd.body?.delivered?.lpwan !== 'queued') throw new Error(`command not queued: ${cmd.text}`);
        const before = client.downlinks();
        const start = performance.now();
        client.send(uplink(d, base + total + i), 100_000 + i);
        while (client.downlinks() === before && performance.now() - start < 2000) await new Promise((r) => setImmediate(r));
        if (client.downlinks() > before) times.push(client.downlinkAt(before) - start);
        await sleep(20);
      }
      times.sort((a, b) => a - b);
      rows.push({ name: `${client.name}: uplink → ${client === clients[0] ? 'PULL_RESP' : 'dnmsg'} for a queued downlink p50 (includes the 200 ms dedup wait: 11 receivers online)`, value: Number(percentile(times, 50).toFixed(2)), unit: 'ms' });
      rows.push({ name: `${client.name}: uplink → ${client === clients[0] ? 'PULL_RESP' : 'dnmsg'} for a queued downlink p99 (same)`, value: Number(percentile(times, 99).toFixed(2)), unit: 'ms' });
    }
    await feed.endAsync(true);
    return rows;
  } finally {
    for (const c of clients) c.close();
    await daemon.stop();
    removeDir(dataDir);
  }
}
