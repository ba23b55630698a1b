// The console against a vault with `header_prefix BT` (run by
// TestConsoleBrowser after console.test.mjs): it learns the header names
// from /openapi.json, so its calls carry BT-API-KEY, a proxy test request
// BT-PROXY-KEY, and the destination's status comes back in
// BT-PROXY-DESTINATION-STATUS. Environment as for console.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const CONSOLE_URL = process.env.TV_CONSOLE_URL;
const MGMT_KEY = process.env.TV_MANAGEMENT_KEY;
const DEST_URL = process.env.TV_DESTINATION_URL;
const ORIGIN = new URL(CONSOLE_URL).origin;

let browser;
let page;
const sent = []; // [url, header names] of the API calls
const problems = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.TV_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, serviceWorkers: 'block' });
  await context.route('**/*', (route) => {
    if (new URL(route.request().url()).origin !== ORIGIN) { problems.push('other origin: ' + route.request().url()); return route.abort(); }
    return route.continue();
  });
  page = await context.newPage();
  page.setDefaultTimeout(30_000);
  page.on('request', (r) => sent.push([new URL(r.url()).pathname, Object.keys(r.headers())]));
  page.on('pageerror', (e) => problems.push('uncaught: ' + e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) problems.push(m.text());
  });
});

after(async () => { if (browser) await browser.close(); });

test('the console follows header_prefix BT', async () => {
  await page.goto(CONSOLE_URL);
  await page.getByLabel('API key', { exact: true }).fill(MGMT_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Tenant' }).waitFor();

  await page.getByRole('link', { name: 'Proxies', exact: true }).click();
  await page.getByRole('button', { name: 'New proxy' }).click();
  await page.getByLabel('Name', { exact: true }).fill('Open echo');
  await page.getByLabel('Destination URL', { exact: true }).fill(DEST_URL);
  await page.getByLabel('Require an API key to invoke (require_auth)', { exact: true }).uncheck();
  await page.getByRole('button', { name: 'Create proxy' }).click();
  await page.getByRole('status').filter({ hasText: 'Proxy Open echo created.' }).waitFor();
  await page.getByRole('button', { name: 'Test Open echo' }).click();
  await page.getByLabel('Path after the destination URL (optional)', { exact: true }).fill('prefix-check');
  await page.getByLabel('Body', { exact: true }).fill('{"hello": "bt"}');
  await page.getByRole('button', { name: 'Send test request' }).click();
  const result = page.getByTestId('proxy-result');
  await result.waitFor();
  assert.match(await result.innerText(), /Answer: 200 \(destination answered 200\)/);

  const api = sent.filter(([p]) => !p.startsWith('/console/') && p !== '/openapi.json' && p !== '/favicon.ico');
  assert.ok(api.length >= 4, `only ${api.length} API calls seen`);
  for (const [p, names] of api) {
    if (p.startsWith('/proxy')) {
      assert.ok(names.includes('bt-proxy-key'), `${p} went without BT-PROXY-KEY`);
      assert.ok(!names.includes('bt-api-key'), `${p} carried an API key to a proxy that does not require one`);
    } else {
      assert.ok(names.includes('bt-api-key'), `${p} went without BT-API-KEY: ${names}`);
    }
    assert.ok(!names.some((n) => n.startsWith('svc-')), `${p} carried an SVC- header`);
  }
  assert.deepEqual(problems, []);
});
