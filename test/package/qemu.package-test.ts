// The ARM packages, proven on this x86-64 machine under QEMU user emulation: the program unpacked
// from the .deb, on its bundled Node.js runtime and its cross-compiled SQLite module, starts, reports
// ready, stores an HTTP state and a QoS 1 MQTT state, decodes a packet forwarder uplink of an ABP
// device with a shipped ABCL codec and another with a JavaScript codec (QuickJS, WebAssembly), answers
// `outpost status`, and stops cleanly; the serial bindings' prebuild for the CPU loads, and through
// it the daemon arms a serial modem (an RN2483 simulated on a socat pty) and receives an uplink from
// it. Start-to-ready and memory are measured (emulated: a real Raspberry Pi is a different machine)
// and written to test/artifacts/package-qemu-<arch>.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { api } from '../helpers/daemon.js';
import { connectClient } from '../mqtt/helpers.js';
import { ForwarderSimulator } from '../lpwan/forwarder.js';
import { uplinkFrame, type DeviceKeys } from '../lpwan/frames.js';
import { ModemSimulator } from '../lpwan/serial/modem-simulator.js';
import { packagedCli, packagedNode, ROOT, startPackagedDaemon, targetOf, tool, unpack, type Arch } from './helpers.js';

const hex = (s: string) => Buffer.from(s, 'hex');
const ABP: DeviceKeys = { devAddr: '26011234', nwkSKey: hex('44024241ed4ce9a68c6a8bc055233fd3'), appSKey: hex('ec925802ae430ca77fd3dd73cb2cc588') };
// Emulation is 10-30 times slower than the host; these bound a hang, they are not performance targets.
const READY_TIMEOUT_MS = 180_000;
const STEP_TIMEOUT_MS = 60_000;

// A JavaScript codec in The Things Stack's shape: counts in the first byte, a flag in bit 0 of the second.
const JS_CODEC = `
function decodeUplink(input) {
  return { data: { count: input.bytes[0], open: (input.bytes[1] & 1) === 1 } };
}`;

const SERIAL_PROBE = `
const dir = process.argv[1];
const load = require('node:module').createRequire(dir + '/package.json');
const path = load('node-gyp-build').path(dir);
console.log(JSON.stringify({ path, exports: Object.keys(load(path)) }));`;

async function eventually<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${STEP_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function stateOf(url: string, token: string, deviceId: string, asset: string): Promise<unknown> {
  const r = await api(url, 'GET', `/device/${deviceId}/asset/${asset}/state`, { token });
  return r.status === 200 ? r.body.state.value : undefined;
}

async function proveOn(arch: Arch) {
  const target = targetOf(arch);
  const pkg = unpack(arch);
  const dataDir = mkdtempSync(join(tmpdir(), `outpost-pkg-data-${arch}-`));
  let modem: ModemSimulator | undefined;
  try {
    // Every binary in the package is for the target CPU.
    for (const binary of ['node/bin/node', 'node_modules/better-sqlite3/build/Release/better_sqlite3.node']) {
      assert.match(tool('file', ['-b', join(pkg.app, binary)]), new RegExp(target.fileMachine.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), binary);
    }
    // The serialport bindings (loaded only when a serial modem is configured): node-gyp-build picks
    // the prebuild for this CPU, and it loads on the packaged runtime.
    const bindings = join(pkg.app, 'node_modules', '@serialport', 'bindings-cpp');
    const [command, argv] = packagedNode(arch, pkg.app, ['-e', SERIAL_PROBE, bindings]);
    const serial = JSON.parse(tool(command, argv)) as { path: string; exports: string[] };
    assert.match(serial.path, arch === 'arm64' ? /linux-arm64\/.*armv8\.glibc\.node$/ : /linux-arm\/.*armv7\.glibc\.node$/);
    assert.ok(serial.exports.includes('open'), `the serial binding exports open (${serial.exports.join(', ')})`);

    const app = JSON.parse(packagedCli(arch, pkg.app, ['token', 'create', '--name', 'proof', '--scopes', 'read,command,admin', '--json', '--data', dataDir])) as { token: string };

    // A serial modem beside the packet forwarder door (lines as docs/lpwan.md, "Serial modems").
    modem = new ModemSimulator('rn2483');
    await modem.start();
    const configFile = join(dataDir, 'outpost.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        version: 1,
        radio: { serial: [{ path: modem.hostPath, modem: 'rn2483', baudRate: 57600, frequency: 868100000, spreadingFactor: 7, bandwidth: 125, initTimeoutMs: STEP_TIMEOUT_MS }] },
      }),
    );
    const daemon = await startPackagedDaemon(arch, pkg.app, dataDir, READY_TIMEOUT_MS, ['--config', configFile]);
    let stopped = false;
    try {
      const version = await api(daemon.url, 'GET', '/healthz');
      assert.equal(version.status, 200, version.text);
      assert.equal(version.body.status, 'ok');

      const created = await api(daemon.url, 'POST', '/devices', { token: app.token, json: { name: `proof-${arch}` } });
      assert.equal(created.status, 201, created.text);
      const device = created.body as { id: string; token: string };
      for (const [name, type] of [['level', 'number'], ['temperature', 'number'], ['humidity', 'number'], ['battery', 'number'], ['count', 'integer'], ['open', 'boolean']]) {
        const asset = await api(daemon.url, 'POST', `/device/${device.id}/assets`, { token: app.token, json: { is: 'sensor', name, profile: { type } } });
        assert.equal(asset.status, 201, asset.text);
      }

      // An HTTP state, stored in the cross-compiled SQLite and read back.
      const put = await api(daemon.url, 'PUT', `/device/${device.id}/asset/level/state`, { token: device.token, json: { value: 41.5 } });
      assert.equal(put.status, 200, put.text);
      assert.equal(await stateOf(daemon.url, app.token, device.id, 'level'), 41.5);

      // A QoS 1 MQTT state: the PUBACK comes after it is stored.
      const mqtt = await connectClient(daemon.ports.mqtt, device.token, { connectTimeout: STEP_TIMEOUT_MS });
      try {
        await mqtt.client.publishAsync(`device/${device.id}/asset/level/state`, JSON.stringify({ value: 42.25 }), { qos: 1 });
      } finally {
        await mqtt.end();
      }
      assert.equal(await stateOf(daemon.url, app.token, device.id, 'level'), 42.25, 'the QoS 1 state is stored when PUBACKed');

      // A packet forwarder uplink of an ABP device, decoded by the ABCL codec shipped in the package.
      const lorawan = await api(daemon.url, 'PUT', `/device/${device.id}/lorawan`, {
        token: app.token,
        json: { activation: 'abp', devAddr: ABP.devAddr, nwkSKey: ABP.nwkSKey.toString('hex'), appSKey: ABP.appSKey.toString('hex') },
      });
      assert.equal(lorawan.status, 200, lorawan.text);
      const abcl = await api(daemon.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'abcl', file: 'environment-sensor.abcl.json' } } });
      assert.equal(abcl.status, 200, abcl.text);
      const fwd = new ForwarderSimulator('b827ebfffe000001');
      try {
        await fwd.connect(daemon.ports.gwmp);
        // 21.5 °C, 45.5 %, 3.6 V (abcl/environment-sensor.vectors.json).
        await fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 1, fPort: 2, payload: hex('66085B100E') }) }]);
        await eventually('the ABCL-decoded uplink', async () => ((await stateOf(daemon.url, app.token, device.id, 'battery')) === 3.6 ? true : undefined));
        assert.equal(await stateOf(daemon.url, app.token, device.id, 'temperature'), 21.5);
        assert.equal(await stateOf(daemon.url, app.token, device.id, 'humidity'), 45.5);

        // The same device with a JavaScript codec: QuickJS runs as WebAssembly on the emulated CPU.
        const js = await api(daemon.url, 'PUT', `/device/${device.id}/codec`, { token: app.token, json: { uplink: { format: 'js', script: JS_CODEC } } });
        assert.equal(js.status, 200, js.text);
        await fwd.push([{ payload: uplinkFrame(ABP, { fCnt: 2, fPort: 2, payload: hex('0701') }) }]);
        await eventually('the JS-decoded uplink', async () => ((await stateOf(daemon.url, app.token, device.id, 'count')) === 7 ? true : undefined));
        assert.equal(await stateOf(daemon.url, app.token, device.id, 'open'), true);
      } finally {
        fwd.close();
      }

      // Serial I/O through the ARM bindings: the daemon configured the modem and armed it for
      // reception (its commands came over the pty), and an uplink the modem hears is decoded.
      const sim = modem;
      await sim.waitFor(() => sim.receiving, 'the RN2483 armed by the packaged daemon', STEP_TIMEOUT_MS);
      assert.ok(sim.commandTexts().includes('radio set freq 868100000'), sim.commandTexts().join(' | '));
      sim.receivePacket(uplinkFrame(ABP, { fCnt: 3, fPort: 2, payload: hex('0900') }));
      await eventually('the uplink heard by the serial modem', async () => ((await stateOf(daemon.url, app.token, device.id, 'count')) === 9 ? true : undefined));
      assert.equal(await stateOf(daemon.url, app.token, device.id, 'open'), false);

      // The command line reaches the running daemon over its control socket.
      const status = JSON.parse(packagedCli(arch, pkg.app, ['status', '--json', '--data', dataDir])) as { version: string; devices: number; pid: number };
      assert.equal(status.devices, 1);
      const memory = daemon.memory();
      const metrics = (await api(daemon.url, 'GET', '/metrics')).text;
      const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(metrics)?.[1]);
      const heapUsed = gauge('process_heap_used_bytes');
      assert.ok(heapUsed > 0, 'the V8 heap gauge is reported');

      const code = await daemon.stop();
      stopped = true;
      assert.equal(code, 0, `clean exit on SIGTERM\n${daemon.logs.slice(-5).join('\n')}`);
      assert.ok(daemon.logs.some((l) => l.includes('"msg":"stopped"')), 'the daemon logs that it stopped');

      const measured = {
        arch,
        emulated: true,
        emulator: target.qemu!.binary,
        runtime: `${target.runtime.name}@${target.runtime.version}`,
        startToReadyMs: daemon.startToReadyMs,
        rssKiBAfterProof: memory.rssKiB,
        peakRssKiB: memory.peakKiB,
        heapUsedMiB: Math.round(heapUsed / 1048576),
        note: "RSS of the QEMU process, which holds the emulated program and QEMU's translated code; the V8 heap is the program's own",
      };
      mkdirSync(join(ROOT, 'test', 'artifacts'), { recursive: true });
      writeFileSync(join(ROOT, 'test', 'artifacts', `package-qemu-${arch}.json`), `${JSON.stringify(measured, null, 2)}\n`);
      console.log(`# ${arch} under ${target.qemu!.binary}: start-to-ready ${daemon.startToReadyMs} ms, RSS ${Math.round(memory.rssKiB / 1024)} MiB (peak ${Math.round(memory.peakKiB / 1024)} MiB), V8 heap ${Math.round(heapUsed / 1048576)} MiB`);
    } finally {
      if (!stopped) await daemon.stop();
    }
  } finally {
    await modem?.close();
    rmSync(dataDir, { recursive: true, force: true });
    pkg.remove();
  }
}

test('arm64 package under qemu-aarch64: ready, HTTP and QoS 1 MQTT states, ABCL and JS uplinks, a serial modem, status, clean stop', { timeout: 600_000 }, () => proveOn('arm64'));

test('armhf package under qemu-arm: ready, HTTP and QoS 1 MQTT states, ABCL and JS uplinks, a serial modem, status, clean stop', { timeout: 600_000 }, () => proveOn('armhf'));
