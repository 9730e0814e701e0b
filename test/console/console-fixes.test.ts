// The console where a new user tripped (issue: central's gateway page, gateway names in the device
// list, IP device pages asking for LoRaWAN settings, a command that reached nobody shown as sent):
// the compiled daemon, Debian's headless Chromium through playwright-core.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chromium, type Browser, type Page } from 'playwright-core';
import { api, cliJson, provision, removeDir, startDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { connectClient } from '../mqtt/helpers.js';

const CHROMIUM = process.env.OUTPOST_CHROMIUM ?? '/usr/bin/chromium';
const launch = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
  });

async function signIn(page: Page, url: string, token: string) {
  await page.goto(`${url}/console/`);
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Every answer the page got, to check what it asked for and what failed. */
function recordResponses(page: Page): Array<{ url: string; status: number }> {
  const seen: Array<{ url: string; status: number }> = [];
  page.on('response', (r) => seen.push({ url: r.url(), status: r.status() }));
  return seen;
}

describe('console on a gateway', () => {
  let d: RunningDaemon;
  let browser: Browser;
  let ids: ReturnType<typeof provision>;

  before(async () => {
    d = await startDaemon();
    ids = provision(d.dataDir, [
      { name: 'temperature', is: 'sensor', profile: { type: 'number' } },
      { name: 'relay', is: 'actuator', profile: { type: 'boolean' } },
    ]);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await d?.stop();
    if (d) removeDir(d.dataDir);
  });

  it("an IP device's page does not ask for LoRaWAN settings", async () => {
    const page = await browser.newPage();
    const responses = recordResponses(page);
    await signIn(page, d.url, ids.app.token);
    // The page asks for raw uplinks after the place where it asked for LoRaWAN settings.
    const uplinksAsked = page.waitForResponse((r) => r.url().includes(`/device/${ids.device.id}/uplinks`));
    await page.goto(`${d.url}/console/#/device/${ids.device.id}`);
    await uplinksAsked;
    await page.getByText('Live: connected').waitFor();
    assert.deepEqual(responses.filter((r) => r.url.includes('/lorawan')), [], 'no request for /device/<id>/lorawan');
    assert.deepEqual(responses.filter((r) => r.status === 404), [], 'no 404 at all');
    await page.close();
  });

  it('a command that reached no subscriber is not shown as a green "Sent"; one that did is', async () => {
    const page = await browser.newPage();
    await signIn(page, d.url, ids.app.token);
    await page.goto(`${d.url}/console/#/device/${ids.device.id}`);
    const form = page.getByRole('form', { name: 'Command relay' });
    await page.getByRole('switch', { name: 'Value for relay' }).check();
    await page.getByRole('button', { name: 'Send command to relay' }).click();
    const status = form.getByRole('status');
    await status.filter({ hasText: 'Not delivered' }).waitFor();
    assert.match((await status.textContent())!, /0 MQTT subscribers reached/);
    assert.doesNotMatch((await status.textContent())!, /^Sent/);
    assert.equal(await status.getAttribute('class'), 'message warn', 'not the green ok style');

    const device = await connectClient(d.mqttPort, ids.device.token);
    try {
      await device.client.subscribeAsync(`device/${ids.device.id}/asset/+/command`, { qos: 1 });
      await page.getByRole('button', { name: 'Send command to relay' }).click();
      await status.filter({ hasText: /^Sent at/ }).waitFor();
      assert.equal(await status.getAttribute('class'), 'message ok');
    } finally {
      await device.end();
    }
    await page.close();
  });

  it("a LoRaWAN device's page shows its settings, and a radio command's codec warnings", async () => {
    const dimmer = cliJson<{ id: string }>(['device', 'create', '--name', 'dimmer'], d.dataDir);
    for (const [name, profile] of [['level', { type: 'number', minimum: 0, maximum: 100 }], ['fade', { type: 'number' }], ['on', { type: 'boolean' }], ['scene', { type: 'integer' }]] as const) {
      cliJson(['asset', 'create', dimmer.id, '--name', name, '--is', 'actuator', '--profile', JSON.stringify(profile)], d.dataDir);
    }
    const lorawan = await api(d.url, 'PUT', `/device/${dimmer.id}/lorawan`, {
      token: ids.app.token,
      json: { activation: 'abp', devAddr: '26011299', nwkSKey: '44024241ed4ce9a68c6a8bc055233fd3', appSKey: 'ec925802ae430ca77fd3dd73cb2cc588' },
    });
    assert.equal(lorawan.status, 200, lorawan.text);
    const codec = await api(d.url, 'PUT', `/device/${dimmer.id}/codec`, { token: ids.app.token, json: { uplink: { format: 'auto' }, downlink: { format: 'abcl', file: 'dimmer.abcl.json' } } });
    assert.equal(codec.status, 200, codec.text);
    const page = await browser.newPage();
    const responses = recordResponses(page);
    await signIn(page, d.url, ids.app.token);
    await page.goto(`${d.url}/console/#/device/${dimmer.id}`);
    await page.getByRole('heading', { name: 'LoRaWAN' }).waitFor();
    assert.ok(responses.some((r) => r.url.endsWith(`/device/${dimmer.id}/lorawan`) && r.status === 200));
    await page.getByLabel('Value for level').fill('40');
    await page.getByRole('button', { name: 'Send command to level' }).click();
    const status = page.getByRole('form', { name: 'Command level' }).getByRole('status');
    await status.filter({ hasText: 'radio: queued' }).waitFor();
    // Nothing commanded before: the other fields of the frame have no value, and the console says so.
    assert.match((await status.textContent())!, /Warnings: .*asset "fade".*no value/);
    assert.equal(await status.getAttribute('class'), 'message warn');
    await page.close();
  });
});

describe('console on a central', () => {
  let d: RunningDaemon;
  let browser: Browser;
  let app: { token: string };
  let gateway: { id: string };

  before(async () => {
    d = await startDaemon({ env: { OUTPOST_ROLE: 'central' } });
    app = cliJson<{ token: string }>(['token', 'create', '--name', 'console', '--scopes', 'read,command,admin'], d.dataDir);
    gateway = cliJson<{ id: string }>(['gateway', 'create', '--name', 'north'], d.dataDir);
    cliJson(['device', 'create', '--name', 'behind-north', '--gateway', gateway.id], d.dataDir);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await d?.stop();
    if (d) removeDir(d.dataDir);
  });

  it('the device list names the gateway a device is behind by its name', async () => {
    const page = await browser.newPage();
    await signIn(page, d.url, app.token);
    const badge = page.getByRole('row', { name: /behind-north/ }).getByText('behind gateway north');
    await badge.waitFor();
    assert.equal(await badge.getAttribute('title'), `gateway ID ${gateway.id}`);
    const listed = (await api(d.url, 'GET', '/devices', { token: app.token })).body.find((x: { name: string }) => x.name === 'behind-north');
    assert.deepEqual(listed.link, { type: 'gateway', gatewayId: gateway.id, gatewayName: 'north' });
    await page.close();
  });

  it("the central's gateway page shows no raw JSON and no gateway-only wording", async () => {
    const page = await browser.newPage();
    await signIn(page, d.url, app.token);
    await page.getByRole('link', { name: 'Gateway' }).click();
    await page.getByRole('table', { name: 'Gateways' }).getByText('north').waitFor();
    const main = (await page.locator('main').textContent()) ?? '';
    assert.doesNotMatch(main, /\{"|":/, `raw JSON on the page: ${main}`);
    assert.doesNotMatch(main, /keeps its data locally/);
    assert.match(main, /no upstream of its own/);
    await page.close();
  });
});
