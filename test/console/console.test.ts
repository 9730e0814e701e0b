// The web console end to end: the compiled daemon, a real headless Chromium (Debian's, driven by
// playwright-core), real MQTT clients as devices. Screenshots of the main pages go to
// test/artifacts/ (git-ignored) for review.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { StationSimulator } from '../lpwan/station.js';
import { ForwarderSimulator } from '../lpwan/forwarder.js';
import { ROOT, api, cli, cliJson, provision, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient } from '../mqtt/helpers.js';

const ARTIFACTS = join(ROOT, 'test', 'artifacts');
const CHROMIUM = process.env.OUTPOST_CHROMIUM ?? '/usr/bin/chromium';

describe('web console', () => {
  let d: RunningDaemon;
  let browser: Browser;
  let ids: ReturnType<typeof provision>;
  let readOnly: { id: string; token: string };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    d = await startDaemon();
    ids = provision(d.dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number', unit: '°C' } },
      { name: 'relay', is: 'actuator', profile: { type: 'boolean' } },
      { name: 'mode', is: 'actuator', profile: { type: 'string', enum: ['eco', 'comfort'] } },
    ]);
    readOnly = cliJson(['token', 'create', '--name', 'viewer', '--scopes', 'read'], d.dataDir);
    // Twenty states over the last hours: the history plot must show them.
    for (let i = 20; i >= 1; i--) {
      const at = new Date(Date.now() - i * 10 * 60_000).toISOString();
      const res = await api(d.url, 'PUT', `/device/${ids.device.id}/asset/temperature/state`, { token: ids.device.token, json: { value: 20 + i / 10, at } });
      assert.equal(res.status, 200);
    }
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
    });
  });

  after(async () => {
    await browser?.close();
    await d?.stop();
    if (d) removeDir(d.dataDir);
  });

  async function signIn(page: Page, token: string) {
    await page.goto(`${d.url}/console/`);
    await page.getByLabel('Token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  it('loads the sign-in page in under 300 KB, everything it fetches included', async () => {
    const page = await browser.newPage();
    const sizes: Array<{ url: string; bytes: number }> = [];
    const requests: Array<Promise<void>> = [];
    page.on('requestfinished', (request) => {
      requests.push(request.sizes().then((s) => void sizes.push({ url: request.url(), bytes: s.responseBodySize + s.responseHeadersSize })));
    });
    const started = Date.now();
    await page.goto(`${d.url}/console/`, { waitUntil: 'networkidle' });
    await page.getByLabel('Token').waitFor({ state: 'visible' });
    const visibleMs = Date.now() - started;
    await Promise.all(requests);
    const total = sizes.reduce((sum, s) => sum + s.bytes, 0);
    console.log(`sign-in page: ${sizes.length} requests, ${total} bytes transferred, form visible after ${visibleMs} ms`);
    assert.ok(sizes.length >= 3, `expected the page, its style and script; got ${JSON.stringify(sizes)}`);
    assert.ok(sizes.every((s) => s.url.startsWith(d.url)), 'no request leaves the gateway');
    assert.ok(total < 300 * 1024, `transferred ${total} bytes`);
    await page.screenshot({ path: join(ARTIFACTS, 'console-sign-in.png'), fullPage: true });
    // A wrong token gets a clear message, not a blank page.
    await page.getByLabel('Token').fill('app:not-a-real-token-at-all-0000000000000');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('This token is unknown or has been revoked.').waitFor();
    await page.close();
  });

  it('shows devices, plots history and updates a value published over MQTT live', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    await signIn(page, ids.app.token);
    await page.getByRole('row', { name: /test-device/ }).getByText('IP', { exact: true }).waitFor();
    await page.getByRole('link', { name: 'test-device' }).click();
    const plot = page.locator('section[aria-label="History of temperature"] .plot');
    await plot.waitFor();
    assert.equal(await plot.getAttribute('data-points'), '20');
    assert.equal(await page.locator('section[aria-label="History of temperature"] canvas').count() > 0, true);
    await page.getByText('Live: connected').waitFor();

    const device = await connectClient(d.mqttPort, ids.device.token);
    await device.client.publishAsync(`device/${ids.device.id}/asset/temperature/state`, JSON.stringify({ value: 31.25 }), { qos: 1 });
    await page.locator('tr[data-asset="temperature"] td.value').filter({ hasText: '31.25' }).waitFor({ timeout: 10_000 });
    assert.equal(await plot.getAttribute('data-points'), '21');
    await page.screenshot({ path: join(ARTIFACTS, 'console-device.png'), fullPage: true });
    await device.end();
    await page.close();
  });

  it('sends a command from the form generated from the profile, and it reaches an MQTT subscriber', async () => {
    const device = await connectClient(d.mqttPort, ids.device.token);
    await device.client.subscribeAsync(`device/${ids.device.id}/asset/+/command`, { qos: 1 });
    const page = await browser.newPage();
    await signIn(page, ids.app.token);
    await page.goto(`${d.url}/console/#/device/${ids.device.id}`);
    await page.getByRole('switch', { name: 'Value for relay' }).check();
    await page.getByRole('button', { name: 'Send command to relay' }).click();
    const relay = await device.waitFor((m) => m.topic.endsWith('/asset/relay/command'));
    assert.equal(JSON.parse(relay.text).value, true);
    await page.getByText('1 MQTT subscriber reached').first().waitFor();

    await page.getByLabel('Value for mode').selectOption({ label: 'comfort' });
    await page.getByRole('button', { name: 'Send command to mode' }).click();
    const mode = await device.waitFor((m) => m.topic.endsWith('/asset/mode/command'));
    assert.equal(JSON.parse(mode.text).value, 'comfort');
    await device.end();
    await page.close();
  });

  it('a page that loads late never replaces the page opened after it', async () => {
    const page = await browser.newPage();
    try {
      // The sign-in opens the devices page; its code is held back while the admin page is opened.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      await page.route('**/console/devices.js', async (route) => {
        await held;
        await route.continue();
      });
      const lateApiCalls: string[] = [];
      await signIn(page, ids.app.token);
      await page.getByRole('link', { name: 'Admin' }).click();
      await page.getByLabel('Device name').waitFor();
      page.on('request', (request) => {
        if (new URL(request.url()).pathname === '/devices') lateApiCalls.push(request.url());
      });
      const loaded = page.waitForEvent('requestfinished', (request) => request.url().endsWith('/console/devices.js'));
      release();
      await loaded;
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Admin');
      assert.deepEqual(lateApiCalls, [], 'the superseded page does not even load its data');
    } finally {
      await page.close();
    }
  });

  it('registers a device from the admin page that can then publish with its token', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1400 } });
    await signIn(page, ids.app.token);
    await page.getByRole('link', { name: 'Admin' }).click();
    await page.getByLabel('Device name').fill('from-console');
    await page.getByRole('button', { name: 'Register device' }).click();
    const token = (await page.locator('[data-field="device-token"]').textContent())!;
    const id = (await page.locator('[data-field="device-id"]').textContent())!;
    assert.match(token, /^device:/);

    const form = page.getByRole('form', { name: 'Create an asset' });
    await form.getByLabel('Device', { exact: true }).selectOption(id);
    await form.getByLabel('Asset name').fill('humidity');
    await form.getByLabel('Profile template').selectOption('number');
    await form.getByRole('button', { name: 'Create asset' }).click();
    await form.getByText('Asset humidity created').waitFor();

    const codec = page.getByRole('form', { name: 'Device codec' });
    await codec.getByLabel('Device', { exact: true }).selectOption(id);
    await codec.getByLabel('Payload (hex)').fill('0929');
    await codec.getByRole('button', { name: 'Decode hex payload' }).click();
    await codec.getByText('23.45').waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'console-admin.png'), fullPage: true });

    const newDevice = await connectClient(d.mqttPort, token);
    await newDevice.client.publishAsync(`device/${id}/asset/humidity/state`, JSON.stringify({ value: 55 }), { qos: 1 });
    await newDevice.end();
    const state = await api(d.url, 'GET', `/device/${id}/asset/humidity/state`, { token: ids.app.token });
    assert.equal((state.body as { state: { value: number } }).state.value, 55);
    await page.close();
  });

  it('shows live traffic and the gateway page', async () => {
    const page = await browser.newPage();
    await signIn(page, ids.app.token);
    await page.getByRole('link', { name: 'Live' }).click();
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor();
    const res = await api(d.url, 'PUT', `/device/${ids.device.id}/asset/temperature/state`, { token: ids.device.token, json: { value: 'not a number' } });
    assert.equal(res.status, 422);
    await api(d.url, 'PUT', `/device/${ids.device.id}/asset/temperature/state`, { token: ids.device.token, json: { value: 19.5 } });
    await page.locator('li[data-kind="error"]').first().waitFor();
    await page.locator('li[data-kind="state"]').filter({ hasText: '19.5' }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'console-live.png'), fullPage: true });
    // A Basics Station and a packet forwarder are listed side by side.
    const { token: stationToken } = cliJson<{ token: string }>(['station', 'create', '--eui', 'B827EBFFFE6151B0', '--name', 'roof'], d.dataDir);
    const station = await StationSimulator.open(`ws://127.0.0.1:${d.basicStationPort}/router-B827EBFFFE6151B0`, { headers: { authorization: `Bearer ${stationToken}` } });
    const forwarder = new ForwarderSimulator('aa555a0000000001');
    await forwarder.connect(d.gwmpPort);
    await forwarder.pull();
    await page.getByRole('link', { name: 'Gateway' }).click();
    await page.getByText('Database size').waitFor();
    const gateways = page.getByRole('table', { name: 'LoRa gateways' });
    await gateways.getByRole('row').filter({ hasText: 'Basics Station' }).filter({ hasText: 'B827EBFFFE6151B0' }).filter({ hasText: 'roof' }).waitFor();
    await gateways.getByRole('row').filter({ hasText: 'Packet forwarder' }).filter({ hasText: 'AA555A0000000001' }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'console-gateway.png'), fullPage: true });
    station.close();
    forwarder.close();
    await page.close();
  });

  it('hides the admin page and command forms from a read-only token, and signs out a revoked one', async () => {
    const page = await browser.newPage();
    await signIn(page, readOnly.token);
    await page.getByRole('link', { name: 'Devices' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Admin' }).count(), 0);
    await page.goto(`${d.url}/console/#/device/${ids.device.id}`);
    await page.getByRole('heading', { name: 'Assets' }).waitFor();
    assert.equal(await page.getByRole('heading', { name: 'Commands' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: /Send command/ }).count(), 0);
    await page.goto(`${d.url}/console/#/admin`);
    await page.getByText('This token may not open this page.').waitFor();

    await page.goto(`${d.url}/console/#/live`);
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor();
    assert.equal(cli(['token', 'revoke', readOnly.id, '--data', d.dataDir]).code, 0);
    await page.getByText('Your token was revoked or is no longer valid').waitFor({ timeout: 15_000 });
    assert.equal(await page.getByLabel('Token').isVisible(), true);
    await page.close();
  });

  it('streams events only for what the token may read', async () => {
    const other = cliJson<{ id: string; token: string }>(['device', 'create', '--name', 'other'], d.dataDir);
    assert.equal((await api(d.url, 'GET', `/events?device=${ids.device.id}`, { token: other.token })).status, 403);
    assert.equal((await api(d.url, 'GET', '/events', { token: other.token })).status, 403);
    assert.equal((await api(d.url, 'GET', '/events?kinds=bogus', { token: ids.app.token })).status, 400);
    const me = await api(d.url, 'GET', '/whoami', { token: ids.app.token });
    assert.deepEqual(me.body, { tokenId: ids.app.id, kind: 'app', deviceId: null, scopes: ['read', 'command', 'admin'] });

    // A device token streams its own device's states and nothing of another device.
    const controller = new AbortController();
    const res = await fetch(`${d.url}/events?device=${other.id}&kinds=state`, { headers: { authorization: `Bearer ${other.token}` }, signal: controller.signal });
    assert.equal(res.status, 200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    cliJson(['asset', 'create', other.id, '--name', 'x', '--is', 'sensor', '--profile', '{"type":"number"}'], d.dataDir);
    await api(d.url, 'PUT', `/device/${ids.device.id}/asset/temperature/state`, { token: ids.device.token, json: { value: 1 } });
    await api(d.url, 'PUT', `/device/${other.id}/asset/x/state`, { token: other.token, json: { value: 2 } });
    let text = '';
    while (!text.includes('"asset":"x"')) text += (await reader.read()).value ?? '';
    controller.abort();
    assert.ok(!text.includes(ids.device.id), 'another device\'s state leaked into the stream');
  });
});
