// The central's console for a fleet (docs/console.md): a real central and a real gateway daemon, a
// device managed from the central with ABP settings, a packet forwarder at the gateway hearing it
// and sending its command; Chromium at the central shows the gateway the device is behind, its
// managed revision, the radio metadata and command outcome its gateway forwarded, and every
// gateway's config state. Also the device page's history, which fetches no more than it shows.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { queryStore } from '../helpers/sqlite.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ROOT, api, cliJson, provision, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { startFleet, type Fleet, type FleetGateway } from '../helpers/fleet-rig.js';
import { ForwarderSimulator } from '../lpwan/forwarder.js';
import { uplinkFrame } from '../lpwan/frames.js';
import { sleep, until } from '../helpers/wait.js';

const CHROMIUM = process.env.OUTPOST_CHROMIUM ?? '/usr/bin/chromium';
const launch = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
  });

const ARTIFACTS = join(ROOT, 'test', 'artifacts');


async function signIn(page: Page, url: string, token: string) {
  await page.goto(`${url}/console/`);
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('link', { name: 'Devices' }).waitFor();
}

const text = async (page: Page, selector: string) => ((await page.locator(selector).textContent()) ?? '').replace(/\s+/g, ' ').trim();

describe("the central's console for a managed fleet", () => {
  let fleet: Fleet | undefined;
  let central: RunningDaemon;
  let gateway: RunningDaemon;
  let gatewayDir: string;
  let browser: Browser;
  let app: string;
  let greenhouse: FleetGateway;
  let node: { id: string };
  const keys = { devAddr: '26011CAF', nwkSKey: Buffer.from('33'.repeat(16), 'hex'), appSKey: Buffer.from('44'.repeat(16), 'hex') };
  const fwd = new ForwarderSimulator('b827ebfffe00c0de');
  let fCnt = 0;
  /** One uplink of the device heard by the packet forwarder, with this radio metadata; returns its frame counter. */
  const hear = async (radio: { rssi: number; lsnr: number; datr: string; freq: number }) => {
    fCnt++;
    await fwd.push([{ payload: uplinkFrame(keys, { fCnt, fPort: 1, payload: Buffer.from([fCnt]) }), ...radio }]);
    return fCnt;
  };
  const atCentral = (method: string, path: string, json?: unknown) => api(central.url, method, path, { token: app, json });

  before(async () => {
    fleet = await startFleet();
    ({ central, app } = fleet);
    greenhouse = fleet.addGateway('greenhouse-7', { upstream: { reconnectMinMs: 100, reconnectMaxMs: 500, statusIntervalSeconds: 1 } });
    fleet.addGateway('barn');
    gatewayDir = greenhouse.dir;
    gateway = await fleet.startGateway(greenhouse);
    await fleet.untilConnected(greenhouse);
    // A device managed from the central: created there for the gateway, with ABP settings that go down.
    const created = await atCentral('POST', '/devices', { name: 'soil-probe', gateway: greenhouse.id });
    assert.equal(created.status, 201, created.text);
    node = created.body;
    for (const [asset, is, type] of [['moisture', 'sensor', 'number'], ['valve', 'actuator', 'boolean'], ['level', 'actuator', 'integer']] as const) {
      const r = await atCentral('PUT', `/device/${node.id}/asset/${asset}`, { is, profile: { type } });
      assert.ok(r.status === 201 || r.status === 200, r.text);
    }
    const lw = await atCentral('PUT', `/device/${node.id}/lorawan`, { activation: 'abp', devAddr: keys.devAddr, nwkSKey: keys.nwkSKey.toString('hex'), appSKey: keys.appSKey.toString('hex') });
    assert.equal(lw.status, 200, lw.text);
    await until('the LoRaWAN settings at the gateway', () => queryStore(gatewayDir, 'SELECT 1 FROM lorawan_devices WHERE device_id = ?', node.id).length === 1);
    await until('every revision applied', async () => (await atCentral('GET', `/gateway/${greenhouse.id}`)).body.config.pending === 0);

    // The device is heard by a packet forwarder at the gateway, and a command for it goes down in its RX window.
    await fwd.connect(gateway.gwmpPort);
    await fwd.pull();
    const command = await atCentral('PUT', `/device/${node.id}/command`, { valve: true, level: 3 });
    assert.equal(command.status, 202, command.text);
    await until('the command queued at the gateway', () => queryStore(gatewayDir, "SELECT 1 FROM downlinks WHERE device_id = ? AND status = 'queued'", node.id).length >= 1);
    // On a loaded machine the gateway may miss the receive window: the command then waits for the next uplink.
    const sent = async () => (await atCentral('GET', `/device/${node.id}/radio`)).body?.downlinks?.some((d: { status: string }) => d.status === 'sent') === true;
    for (let attempt = 0; attempt < 4 && !(await sent()); attempt++) {
      await hear({ rssi: -97, lsnr: 4.25, datr: 'SF9BW125', freq: 867.5 });
      await until('the uplink forwarded to the central', async () => (await atCentral('GET', `/device/${node.id}/radio`)).body?.uplink?.fCnt === fCnt).catch(() => {});
      await until('the command sent', sent, 5_000).catch(() => {});
    }
    assert.ok(await sent(), 'the command went down in a receive window');
    browser = await launch();
  });

  after(async () => {
    fwd.close();
    await browser?.close();
    await fleet?.close();
  });

  it('GET /device/<id>/radio at the central has what the gateway forwarded, with the gateway named; GET /device/<id> says it is managed', async () => {
    const radio = (await atCentral('GET', `/device/${node.id}/radio`)).body;
    assert.deepEqual(
      { rssi: radio.uplink.rssi, snr: radio.uplink.snr, dataRate: radio.uplink.dataRate, frequency: radio.uplink.frequency, source: radio.uplink.source, gateway: radio.uplink.gateway, fCnt: radio.uplink.fCnt },
      { rssi: -97, snr: 4.25, dataRate: 'SF9BW125', frequency: 867_500_000, source: 'gwmp:B827EBFFFE00C0DE', gateway: greenhouse.id, fCnt },
    );
    const statuses = radio.downlinks.map((d: { status: string }) => d.status);
    assert.equal(statuses[0], 'sent', `newest first: ${statuses}`);
    assert.ok(radio.downlinks.some((d: { status: string; gateway?: string }) => d.status === 'queued' && d.gateway === greenhouse.id), `queued at the gateway: ${statuses}`);
    assert.equal(radio.downlinks[0].window, 'rx1');
    assert.equal(radio.downlinks[0].gateway, greenhouse.id);
    const device = (await atCentral('GET', `/device/${node.id}`)).body;
    assert.ok(device.managed.revision > 0);
    assert.equal(device.managed.appliedRevision, device.managed.revision);
    assert.ok(device.managed.appliedAt);
    // At the central a managed LoRaWAN device is behind its gateway (the central has no radio), in the list too.
    assert.deepEqual(device.link, { type: 'gateway', gatewayId: greenhouse.id, gatewayName: 'greenhouse-7' });
    assert.deepEqual((await atCentral('GET', '/devices')).body.find((d: { id: string }) => d.id === node.id).link, device.link);
    // At the gateway the same device is managed by its central, and heard by its radio.
    const local = cliJson<{ token: string }>(['token', 'create', '--name', 'local', '--scopes', 'read'], gatewayDir).token;
    const atGateway = (await api(gateway.url, 'GET', `/device/${node.id}`, { token: local })).body;
    assert.deepEqual(atGateway.managed, { revision: device.managed.revision });
    assert.equal(atGateway.link.type, 'lorawan');
    assert.equal(atGateway.link.rssi, -97);
    assert.equal((await atCentral('GET', '/device/nosuchdevicenosuchdevic/radio')).status, 404);
  });

  it("the device page shows the gateway by name (linked), managed, the last uplink's radio metadata and the command outcomes; live updates follow", async () => {
    const page = await browser.newPage();
    await signIn(page, central.url, app);
    await page.goto(`${central.url}/console/#/device/${node.id}`);
    await page.getByText('Live: connected').waitFor();
    assert.match(await text(page, '[data-field="link"]'), /^behind gateway greenhouse-7$/);
    assert.equal(await page.locator('[data-field="link"] a').getAttribute('href'), `#/gateway/${greenhouse.id}`);
    const managed = await text(page, '[data-field="managed"]');
    assert.match(managed, /^yes, revision \d+, applied by its gateway /);
    const uplink = await text(page, '[data-field="last-uplink"]');
    for (const part of ['-97 dBm', 'SNR 4.25 dB', 'SF9BW125', '867.5 MHz', 'heard by packet forwarder B827EBFFFE00C0DE', 'via gateway greenhouse-7']) assert.ok(uplink.includes(part), `"${part}" in "${uplink}"`);
    const outcomes = page.getByRole('table', { name: 'Command outcomes' });
    const outcome = (row: number) => outcomes.locator('tbody tr').nth(row).locator('td').nth(1).textContent();
    assert.equal(await outcome(0), 'sent in RX1 via gateway greenhouse-7');
    await outcomes.locator('tbody tr td', { hasText: /^queued via gateway greenhouse-7$/ }).waitFor({ timeout: 1000 });

    // A second uplink, heard while the page is open: the last uplink changes without a reload.
    await hear({ rssi: -71, lsnr: 9.5, datr: 'SF7BW125', freq: 868.3 });
    await page.locator('[data-field="last-uplink"]', { hasText: '-71 dBm' }).waitFor({ timeout: 10_000 });
    assert.match(await text(page, '[data-field="last-uplink"]'), /-71 dBm, SNR 9.5 dB, SF7BW125, 868.3 MHz, heard by packet forwarder B827EBFFFE00C0DE via gateway greenhouse-7/);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'console-central-device.png'), fullPage: true });

    // The gateway link opens the gateway page with its row marked and its config state.
    await page.locator('[data-field="link"] a').click();
    const row = page.locator(`tr[data-gateway="${greenhouse.id}"]`);
    await row.waitFor();
    assert.equal(await row.getAttribute('aria-current'), 'true');
    assert.equal(await text(page, `tr[data-gateway="${greenhouse.id}"] [data-field="managed"]`), '1');
    assert.equal(await text(page, `tr[data-gateway="${greenhouse.id}"] [data-field="pending"]`), 'none');
    assert.notEqual(await text(page, `tr[data-gateway="${greenhouse.id}"] [data-field="last-applied"]`), 'never');
    await page.screenshot({ path: join(ARTIFACTS, 'console-central-gateways.png'), fullPage: true });
    await page.close();
  });

  it('the live view shows forwarded radio events in words with the gateway by name', async () => {
    const page = await browser.newPage();
    await signIn(page, central.url, app);
    await page.getByRole('link', { name: 'Live' }).click();
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor();
    // The first forwarded event asks for the gateway names; the second one is written with it at once.
    for (const rssi of [-83, -84]) {
      await hear({ rssi, lsnr: 6, datr: 'SF8BW125', freq: 868.1 });
      await page.locator('li[data-kind="radio"]', { hasText: `${rssi} dBm` }).waitFor({ timeout: 10_000 });
    }
    const row = await page.locator('li[data-kind="radio"]', { hasText: '-84 dBm' }).textContent();
    assert.match(row ?? '', new RegExp(`radio ${node.id} uplink: -84 dBm, SNR 6 dB, SF8BW125, 868.1 MHz, heard by packet forwarder B827EBFFFE00C0DE via gateway greenhouse-7`));
    await page.close();
  });

  it("the gateway page shows every gateway's config state: a change waiting for an offline gateway is pending", async () => {
    await fleet!.stopGateway(greenhouse);
    await until('the gateway offline', async () => (await atCentral('GET', `/gateway/${greenhouse.id}`)).body.connected === false);
    assert.equal((await atCentral('POST', '/devices', { name: 'second-probe', gateway: greenhouse.id })).status, 201);
    const page = await browser.newPage();
    await signIn(page, central.url, app);
    await page.getByRole('link', { name: 'Gateway' }).click();
    const table = page.getByRole('table', { name: 'Gateways' });
    await table.waitFor();
    const row = (id: string) => `tr[data-gateway="${id}"]`;
    assert.equal(await text(page, `${row(greenhouse.id)} [data-field="managed"]`), '2');
    assert.equal(await text(page, `${row(greenhouse.id)} [data-field="pending"]`), '1 to apply');
    const barn = (await atCentral('GET', '/gateways')).body.find((g: { name: string }) => g.name === 'barn');
    assert.equal(await text(page, `${row(barn.id)} [data-field="managed"]`), '0');
    assert.equal(await text(page, `${row(barn.id)} [data-field="last-applied"]`), 'never');
    // The device page says the gateway has not applied the new device yet.
    const second = (await atCentral('GET', '/devices')).body.find((d: { name: string }) => d.name === 'second-probe');
    await page.goto(`${central.url}/console/#/device/${second.id}`);
    await page.locator('[data-field="managed"]').waitFor();
    assert.match(await text(page, '[data-field="managed"]'), /^yes, revision \d+, not yet applied by its gateway \(none applied yet\)$/);
    await page.close();
  });
});

describe("a device page's history", () => {
  let d: RunningDaemon;
  let browser: Browser;
  let ids: ReturnType<typeof provision>;
  const VALUE_BYTES = 40_000;
  const STATES = 240;

  before(async () => {
    d = await startDaemon();
    ids = provision(d.dataDir, [{ name: 'log', is: 'sensor', profile: { type: 'string' } }]);
    const start = Date.now() - 3_600_000;
    for (let i = 0; i < STATES; i++) {
      const r = await api(d.url, 'PUT', `/device/${ids.device.id}/asset/log/state`, { token: ids.device.token, json: { value: `${i}:`.padEnd(VALUE_BYTES, 'x'), at: new Date(start + i * 1000).toISOString() } });
      assert.equal(r.status, 200, r.text);
    }
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await d?.stop();
    if (d) removeDir(d.dataDir);
  });

  it('a table of 50 large strings fetches those 50, not every state in range', async () => {
    const page = await browser.newPage();
    const fetched: Array<{ points: number; bytes: number }> = [];
    page.on('response', async (r) => {
      if (!r.url().includes('/asset/log/states')) return;
      const body = await r.body();
      fetched.push({ points: JSON.parse(body.toString()).data.length, bytes: body.length });
    });
    await signIn(page, d.url, ids.app.token);
    await page.goto(`${d.url}/console/#/device/${ids.device.id}`);
    const table = page.getByRole('table', { name: 'States of log' });
    await table.waitFor();
    await page.getByText('Live: connected').waitFor();
    const points = fetched.reduce((n, f) => n + f.points, 0);
    const bytes = fetched.reduce((n, f) => n + f.bytes, 0);
    assert.equal(points, 50, `fetched ${points} states (${fetched.length} requests, ${bytes} bytes) to show 50`);
    assert.ok(bytes < 50 * (VALUE_BYTES + 200), `fetched ${bytes} bytes`);
    assert.equal(await table.locator('tbody tr').count(), 50);
    // Newest first: the last state written is the first row.
    const first = (await table.locator('tbody tr td.value').first().textContent()) ?? '';
    assert.equal(first.slice(0, 6), `${STATES - 1}:xx`);
    await page.close();
  });
});
