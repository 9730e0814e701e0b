// The console's LoRaWAN section shows a device's class and ADR state (docs/lpwan.md, "ADR":
// watching it): the compiled daemon, a forwarder over UDP, Debian's headless Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startRig } from './daemon-rig.js';
import type { DeviceKeys } from './frames.js';

const KEYS: DeviceKeys = { devAddr: '2601123A', nwkSKey: Buffer.from('44024241ed4ce9a68c6a8bc055233fd3', 'hex'), appSKey: Buffer.from('ec925802ae430ca77fd3dd73cb2cc588', 'hex') };

test('the console shows the class and the ADR state of a LoRaWAN device', async () => {
  const r = await startRig();
  const browser = await chromium.launch({ executablePath: process.env.OUTPOST_CHROMIUM ?? '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  try {
    await r.lorawan({ activation: 'abp', devAddr: KEYS.devAddr, nwkSKey: KEYS.nwkSKey.toString('hex'), appSKey: KEYS.appSKey.toString('hex'), class: 'C' });
    for (let fCnt = 0; fCnt < 3; fCnt++) await r.uplink(KEYS, { fCnt, adr: true }, { datr: 'SF9BW125', lsnr: 2 });
    const page = await browser.newPage();
    await page.goto(`${r.daemon.url}/console/`);
    await page.getByLabel('Token').fill(r.app);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.goto(`${r.daemon.url}/console/#/device/${r.deviceId}`);
    await page.getByRole('heading', { name: 'LoRaWAN' }).waitFor();
    const text = (await page.getByLabel('LoRaWAN settings').textContent()) ?? '';
    assert.match(text, /Class\s*C/);
    assert.match(text, /ADR\s*SF9BW125, TX power index 0, 3\/20 uplinks of history/);
    await page.close();
  } finally {
    await browser.close();
    await r.close();
  }
});
