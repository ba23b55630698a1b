// Browser tests of the web console (caddymodule/console), run by
// TestConsoleBrowser (caddymodule/caddy/console_e2e_test.go, TV_CONSOLE=1)
// against the built Caddy binary with a vault, an echo destination on
// 127.0.0.1 and a tenant whose management key it passes in:
//
//   TV_CONSOLE_URL        the console page (http://127.0.0.1:PORT/console/)
//   TV_MANAGEMENT_KEY     the tenant's management key
//   TV_DESTINATION_URL    the echo destination
//   TV_SCREENSHOT_DIR     where the screenshots go (docs/console)
//   TV_CHROMIUM           the browser (/usr/bin/chromium)
//   TV_REPORT             a JSON file this suite writes its figures to
//
// One browser, one page, the steps in order: each step needs the ones
// before it (the application's key, the tokens, the proxy). Throughout,
// every request must stay on the console's origin, the CSP must never be
// violated, and the page must log no error but the API's expected 4xx.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';

const CONSOLE_URL = need('TV_CONSOLE_URL');
const MGMT_KEY = need('TV_MANAGEMENT_KEY');
const DEST_URL = need('TV_DESTINATION_URL');
const SHOTS = need('TV_SCREENSHOT_DIR');
const CHROMIUM = process.env.TV_CHROMIUM || '/usr/bin/chromium';
const ORIGIN = new URL(CONSOLE_URL).origin;
const CARD_A = '4242424242424242';
const CARD_B = '5555555555554444';
const WAIT = 30_000; // generous: the machine may be busy

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run through TestConsoleBrowser)`);
  return v;
}

let browser;
let context;
let page;
const foreign = [];       // requests to another origin (aborted)
const cspViolations = []; // securitypolicyviolation events and CSP console lines
const pageErrors = [];    // uncaught exceptions and unexpected console errors
const axeResults = {};    // page -> {violations by impact}
const requests = [];      // every request URL the page made
const report = { pages: [], axe: axeResults, screenshots: [] };

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-domain-reliability', '--no-first-run',
      '--disable-client-side-phishing-detection', '--metrics-recording-only', '--disable-breakpad',
    ],
  });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, serviceWorkers: 'block', locale: 'en-GB', timezoneId: 'UTC' });
  // Nothing may leave for another origin: such a request is recorded and aborted.
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin !== ORIGIN) {
      foreign.push(url);
      return route.abort('blockedbyclient');
    }
    return route.continue();
  });
  // CSP violations (Trusted Types included) are reported to the page as events.
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(`uncaught: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = m.text();
    if (/Content Security Policy|Trusted ?Type|TrustedHTML|TrustedScript/i.test(text)) { cspViolations.push(text); return; }
    // The API's own 4xx answers (a wrong key, a reactor with a syntax
    // error) are logged by Chromium as failed loads: expected here.
    if (/Failed to load resource: the server responded with a status of 4\d\d/.test(text)) return;
    pageErrors.push(text);
  });
});

after(async () => {
  report.requests = requests.length;
  report.foreign = foreign;
  report.csp = cspViolations;
  report.errors = pageErrors;
  if (process.env.TV_REPORT) writeFileSync(process.env.TV_REPORT, JSON.stringify(report, null, 2));
  if (browser) await browser.close();
});

/** Collects CSP events from the page (the init script's list). */
async function drainCSP() {
  const got = await page.evaluate(() => { const v = window.__csp || []; window.__csp = []; return v; }).catch(() => []);
  cspViolations.push(...got);
}

/** Every form control has a label (or an aria-label), every button a name. */
async function checkLabels(where) {
  const unlabelled = await page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll('input, select, textarea')) {
      if (el.type === 'hidden') continue;
      const named = (el.labels && el.labels.length > 0) || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
      if (!named) bad.push(el.outerHTML.slice(0, 120));
    }
    for (const el of document.querySelectorAll('button, a[href]')) {
      const name = (el.getAttribute('aria-label') || el.textContent || '').trim();
      if (!name) bad.push(el.outerHTML.slice(0, 120));
    }
    return bad;
  });
  assert.deepEqual(unlabelled, [], `${where}: controls without a label or name`);
}

/** axe-core on the page as it stands: no serious or critical violation. */
async function checkAxe(where) {
  const res = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']).analyze();
  const byImpact = {};
  for (const v of res.violations) (byImpact[v.impact] ||= []).push(`${v.id} (${v.nodes.length})`);
  axeResults[where] = { passes: res.passes.length, violations: byImpact };
  const grave = res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(grave.map((v) => `${v.id}: ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), [], `${where}: serious or critical accessibility violations`);
}

async function shot(name) {
  const file = join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, animations: 'disabled' });
  report.screenshots.push(file);
}

/** Goes to a page through its navigation link, and checks it. */
async function visit(label, name) {
  await drainCSP();
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: label, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: label }).waitFor();
  await page.waitForLoadState('networkidle');
  report.pages.push(label);
  await checkLabels(label);
  await checkAxe(label);
  if (name) await shot(name);
}

function section(name) { return page.locator('form, section').filter({ has: page.getByRole('heading', { name }) }).first(); }

test('the console, end to end', async (t0) => {
  let failed = false;
  const t = { test: (name, fn) => t0.test(name, async (tt) => {
    if (failed) { tt.skip('an earlier step failed'); return; }
    try { await fn(tt); } catch (e) { failed = true; throw e; }
  }) };
  const res = await page.goto(CONSOLE_URL);
  assert.equal(res.status(), 200);
  const csp = res.headers()['content-security-policy'];
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /connect-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);

  await t.test('sign-in: a wrong key is refused, a right one typed with the keyboard only', async () => {
    await page.getByRole('heading', { name: 'Sign in with an API key' }).waitFor();
    await checkLabels('sign-in');
    await checkAxe('sign-in');
    await shot('sign-in');
    await page.getByLabel('API key', { exact: true }).fill('key_test_not_a_key_at_all');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: '401' }).waitFor();

    // keyboard only: focus the field, type, Tab over the checkbox to the button, Enter
    await page.getByLabel('API key', { exact: true }).fill('');
    await page.getByLabel('API key', { exact: true }).focus();
    await page.keyboard.type(MGMT_KEY);
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'signin-keep');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Sign in');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Tenant' }).waitFor();
    // the page's heading takes the focus, for screen readers
    assert.equal(await page.evaluate(() => document.activeElement.id), 'page-title');
    // the key is in memory only
    const stored = await page.evaluate(() => ({ local: JSON.stringify(localStorage), session: JSON.stringify(sessionStorage), cookie: document.cookie }));
    assert.ok(!stored.local.includes(MGMT_KEY) && !stored.session.includes(MGMT_KEY) && !stored.cookie.includes(MGMT_KEY), 'the key was stored');
    assert.equal(stored.session, '{}');
  });

  await t.test('keyboard: the skip link comes first and leads to the content', async () => {
    const first = await page.evaluate(() => document.querySelector('a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])').textContent);
    assert.equal(first, 'Skip to content', 'the skip link is not the first stop of the tab order');
    // the header in tab order: skip link, (the menu button on phones only), Sign out
    await page.getByRole('button', { name: 'Sign out' }).focus();
    await page.keyboard.press('Shift+Tab');
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Skip to content');
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'main');
    // Tab order then reaches the page's controls, not the hidden menu button
    await page.getByRole('link', { name: 'Applications' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Applications' }).waitFor();
  });

  await t.test('tenant: settings and quotas', async () => {
    await visit('Tenant', 'tenant');
    await page.getByRole('cell', { name: 'default' }).waitFor(); // rate_limit profile
    await page.getByLabel('Fingerprint every token', { exact: true }).check();
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByRole('status').filter({ hasText: 'Tenant saved.' }).waitFor();
  });

  let rotatedKey;
  await t.test('applications: create one with a rule, its key shown once, rotated, used', async () => {
    await visit('Applications');
    const form = section('Create an application');
    await form.getByLabel('Name', { exact: true }).fill('Payments backend');
    await form.getByLabel('Type', { exact: true }).selectOption('private');
    for (const p of ['token:create', 'token:read', 'token:delete', 'token:search', 'token:use', 'reactor:invoke']) {
      await form.getByLabel(p, { exact: true }).check();
    }
    await form.getByRole('button', { name: 'Add a rule' }).click();
    await form.getByLabel('Rule 1 container', { exact: true }).fill('/');
    await form.getByLabel('Rule 1 transform', { exact: true }).selectOption('reveal');
    await form.getByLabel('Rule 1 permissions (comma separated)', { exact: true }).fill('token:create, token:read, token:delete, token:search, token:use');
    await form.getByRole('button', { name: 'Create application' }).click();
    const once = page.getByTestId('once-key');
    await once.waitFor();
    const firstKey = (await once.textContent()).trim();
    assert.match(firstKey, /^key_test_/);
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    assert.equal(await once.count(), 0, 'the key stays on screen after Done');
    const row = page.getByRole('row').filter({ hasText: 'Payments backend' });
    await row.getByText('/').first().waitFor();

    // rotate: a new key, shown once; the old one stops working
    await row.getByRole('button', { name: 'Keys of Payments backend' }).click();
    await page.getByRole('button', { name: 'Rotate' }).click();
    await once.waitFor();
    rotatedKey = (await once.textContent()).trim();
    assert.notEqual(rotatedKey, firstKey);
    const old = await fetch(new URL('/applications/key', ORIGIN), { headers: { 'SVC-API-KEY': firstKey } });
    assert.equal(old.status, 401, 'the rotated-out key still works');
    await page.getByRole('button', { name: 'Use this key in the console' }).click();
    await page.getByRole('status').filter({ hasText: 'Added to this session (Payments backend).' }).waitFor();
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await shot('applications');
    await checkAxe('Applications (with keys)');
  });

  let tokenA;
  await t.test('tokens: create, list masked, search, reveal one on request, delete', async () => {
    await visit('Tokens');
    const form = section('Create a token');
    for (const [num, who] of [[CARD_A, 'alice'], [CARD_B, 'bob']]) {
      await form.getByLabel('Type', { exact: true }).selectOption('card');
      await form.getByLabel('Data (JSON)', { exact: true }).fill(JSON.stringify({ number: num, expiration_month: 12, expiration_year: 2030 }));
      await form.getByLabel('Metadata (NAME=value lines, optional)', { exact: true }).fill(`customer=${who}`);
      const before = await page.getByRole('status').first().textContent();
      await form.getByRole('button', { name: 'Create token' }).click();
      await page.waitForFunction((b) => { const s = document.querySelector('[role=status]'); return s && s.textContent !== b && /created\./.test(s.textContent); }, before);
      assert.equal(await form.getByLabel('Data (JSON)', { exact: true }).inputValue(), '', 'the data stays in the form');
    }
    await page.getByRole('button', { name: 'List all tokens' }).click();
    await page.getByRole('caption').filter({ hasText: 'Tokens (2)' }).waitFor();
    let body = await page.locator('body').innerText();
    assert.ok(body.includes('•••• 4242 exp 12/2030') && body.includes('•••• 4444 exp 12/2030'), 'the masked view is missing');
    assert.ok(!body.includes(CARD_A) && !body.includes(CARD_B), 'a card number is shown without being asked for');
    assert.ok(!(await page.content()).includes(CARD_A), 'a card number is in the DOM');

    await page.getByLabel('Query', { exact: true }).fill('metadata.customer:alice');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('caption').filter({ hasText: 'Search results (1)' }).waitFor();
    const row = page.locator('tr[data-token-id]');
    assert.equal(await row.count(), 1);
    tokenA = await row.getAttribute('data-token-id');
    assert.match(await row.innerText(), /•••• 4242/);

    await page.evaluate(() => window.scrollTo(0, 0));
    await shot('tokens');
    await row.getByRole('button', { name: 'Reveal token ' + tokenA }).click();
    await row.getByText(CARD_A).waitFor();
    await shot('tokens-revealed');
    await row.getByRole('button', { name: 'Hide token ' + tokenA }).click();
    await row.getByText('•••• 4242 exp 12/2030').waitFor();
    assert.ok(!(await page.content()).includes(CARD_A), 'the number stays in the DOM after Hide');

    // a bad query: the vault's message, on the field
    await page.getByLabel('Query', { exact: true }).fill('nosuchfield:1');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.locator('#token-query-error').waitFor();

    await page.getByRole('button', { name: 'List all tokens' }).click();
    await page.getByRole('caption').filter({ hasText: 'Tokens (2)' }).waitFor();
    const bob = page.locator('tr[data-token-id]').filter({ hasText: '•••• 4444' });
    await bob.getByRole('button', { name: 'Delete' }).click();
    await bob.getByRole('button', { name: 'Confirm delete' }).click();
    await page.getByRole('caption').filter({ hasText: 'Tokens (1)' }).waitFor();
    await checkAxe('Tokens (after actions)');
  });

  await t.test('a key whose rule masks: its read of the token stays masked (session page: forget and add keys)', async () => {
    // an application whose only rule masks, made through the API with the management key
    const res = await fetch(new URL('/applications', ORIGIN), {
      method: 'POST',
      headers: { 'SVC-API-KEY': MGMT_KEY, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Support desk', type: 'private', permissions: ['token:read'],
        rules: [{ container: '/', transform: 'mask', priority: 1, permissions: ['token:read'] }] }),
    });
    assert.equal(res.status, 201);
    const supportKey = (await res.json()).key;

    await visit('Session');
    await page.getByRole('button', { name: 'Forget key of Payments backend' }).click();
    await page.getByLabel('API key', { exact: true }).fill(supportKey);
    await page.getByRole('button', { name: 'Add key' }).click();
    await page.getByRole('status').filter({ hasText: 'Key of Support desk added.' }).waitFor();

    await visit('Tokens');
    await page.getByRole('button', { name: 'List all tokens' }).click();
    const row = page.locator(`tr[data-token-id="${tokenA}"]`);
    await row.getByRole('button', { name: 'Reveal token ' + tokenA }).click();
    const shown = row.locator('pre.revealed');
    await shown.waitFor();
    const text = await shown.innerText();
    assert.match(text, /4242/);
    assert.ok(!text.includes(CARD_A), `a key with a mask rule was shown the number: ${text}`);
    // the search button is off: no key of the session may search
    assert.ok(await page.getByRole('button', { name: 'Search', exact: true }).isDisabled());

    await visit('Session');
    await page.getByRole('button', { name: 'Forget key of Support desk' }).click();
    await page.getByLabel('API key', { exact: true }).fill(rotatedKey);
    await page.getByRole('button', { name: 'Add key' }).click();
    await page.getByRole('status').filter({ hasText: 'Key of Payments backend added.' }).waitFor();
  });

  await t.test('proxies: create, edit, a test request reaching the destination, shown masked', async () => {
    await visit('Proxies');
    await page.getByRole('button', { name: 'New proxy' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Echo');
    await page.getByLabel('Destination URL', { exact: true }).fill(DEST_URL);
    await page.getByRole('button', { name: 'Create proxy' }).click();
    await page.getByRole('status').filter({ hasText: 'Proxy Echo created.' }).waitFor();

    await page.getByRole('button', { name: 'Edit Echo' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Echo destination');
    await page.getByRole('button', { name: 'Save proxy' }).click();
    await page.getByRole('status').filter({ hasText: 'Proxy Echo destination saved.' }).waitFor();

    await page.getByRole('button', { name: 'Test Echo destination' }).click();
    await page.getByLabel('Path after the destination URL (optional)', { exact: true }).fill('charges');
    await page.getByLabel('Body', { exact: true }).fill(JSON.stringify({ number: `{{ ${tokenA} | json: '$.number' }}`, customer: 'alice' }));
    await page.getByRole('button', { name: 'Send test request' }).click();
    const result = page.getByTestId('proxy-result');
    await result.waitFor();
    const text = await result.innerText();
    assert.match(text, /Answer: 200/);
    assert.match(text, /\/charges/);
    assert.match(text, /••••••••••••4242/, 'the destination did not get the detokenized number, or it is not masked');
    assert.ok(!text.includes(CARD_A), 'the proxy answer shows the card number');
    await result.scrollIntoViewIfNeeded();
    await shot('proxies');
  });

  await t.test('reactors: a syntax error marked on its line, fixed, saved, invoked', async () => {
    await visit('Reactors');
    await page.getByRole('button', { name: 'New reactor' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Greeter');
    const broken = "module.exports = async function (req) {\n  const name = req.args.name;\n  return { raw: { greeting: 'hello ' + name } ;\n};\n";
    await page.getByLabel('Code (JavaScript)', { exact: true }).fill(broken);
    await page.getByRole('button', { name: 'Create reactor' }).click();
    const err = page.locator('#reactor-code-error');
    await err.waitFor();
    assert.equal(await err.getAttribute('data-line'), '3', `the error is not on line 3: ${await err.innerText()}`);
    assert.equal(await page.locator('.line-no.error-line').innerText(), '3');
    assert.equal(await page.getByLabel('Code (JavaScript)', { exact: true }).getAttribute('aria-invalid'), 'true');
    // the highlighter coloured the keywords and strings
    assert.ok(await page.locator('.highlight .tok-keyword').count() > 2);
    assert.ok(await page.locator('.highlight .tok-string').count() > 0);
    await shot('reactors');
    await checkAxe('Reactors (error shown)');

    await page.getByLabel('Code (JavaScript)', { exact: true }).fill(broken.replace("name } ;", "name } };"));
    await page.getByRole('button', { name: 'Create reactor' }).click();
    await page.getByRole('status').filter({ hasText: 'Reactor Greeter created.' }).waitFor();
    await page.getByRole('button', { name: 'Test Greeter' }).click();
    await page.getByLabel(/Arguments/).fill('{"name": "world"}');
    await page.getByRole('button', { name: 'Invoke reactor' }).click();
    await page.getByTestId('reactor-result').filter({ hasText: 'hello world' }).waitFor();
  });

  await t.test('audit log: all of it, filtered by entity type and date', async () => {
    await visit('Audit log');
    await page.getByRole('caption').filter({ hasText: /Audit records \([1-9]/ }).waitFor();
    // the dates: a range that starts tomorrow holds nothing; one from
    // yesterday to today holds everything (a run may straddle midnight)
    const day = (offset) => new Date(Date.now() + offset * 86400e3).toISOString().slice(0, 10);
    await page.getByLabel('From (date)', { exact: true }).fill(day(1));
    await page.getByLabel('To (date)', { exact: true }).fill(day(2));
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.getByRole('caption').filter({ hasText: 'Audit records (0)' }).waitFor();
    await page.getByLabel('From (date)', { exact: true }).fill(day(-1));
    await page.getByLabel('To (date)', { exact: true }).fill(day(0));
    const seen = {};
    for (const type of ['application', 'key', 'token', 'proxy', 'reactor', 'tenant']) {
      await page.getByLabel('Entity type', { exact: true }).selectOption(type);
      await page.getByRole('button', { name: 'Apply filter' }).click();
      // the table holds this type's records only (and at least one, but for tenant)
      await page.waitForFunction((ty) => {
        const rows = [...document.querySelectorAll('table.list tbody tr')];
        return rows.length > 0 && rows.every((r) => r.dataset.entityType === ty);
      }, type).catch(() => {});
      const rows = page.locator('table.list tbody tr');
      const types = await rows.evaluateAll((rs) => rs.map((r) => r.dataset.entityType));
      seen[type] = types.length;
      assert.ok(types.every((x) => x === type), `the ${type} filter shows ${types.join(', ')}`);
      const all = (await rows.allInnerTexts()).join('\n');
      assert.ok(!all.includes(CARD_A) && !all.includes(MGMT_KEY) && !all.includes(rotatedKey), 'the audit log shows a secret');
    }
    report.audit = seen;
    for (const type of ['application', 'key', 'token', 'proxy', 'reactor']) assert.ok(seen[type] > 0, `no ${type} records: ${JSON.stringify(seen)}`);
    await page.getByLabel('Entity type', { exact: true }).selectOption('');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.waitForLoadState('networkidle');
    await shot('audit-log');
  });

  await t.test('usage: the report and activity charts, the session rates', async () => {
    await visit('Usage');
    await page.locator('svg.chart-svg').first().waitFor();
    assert.ok(await page.locator('svg.chart-svg rect').count() > 0, 'the charts have no bars');
    await page.getByTestId('session-stats').waitFor();
    await shot('usage');
  });

  await t.test('session page', async () => {
    await visit('Session', 'session');
    const text = await page.locator('main').innerText();
    assert.ok(!text.includes(MGMT_KEY) && !text.includes(rotatedKey), 'the session page shows a key');
  });

  await t.test('phone width: readable, navigation behind the menu button', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('button', { name: 'Menu' }).click();
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Tokens' }).click();
    await page.getByRole('heading', { level: 1, name: 'Tokens' }).waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `the page is ${overflow}px wider than the phone screen`);
    await checkAxe('Tokens (phone)');
    await shot('phone-tokens');
    await page.getByRole('button', { name: 'Menu' }).click();
    await shot('phone-menu');
    // every page fits the phone's width
    for (const label of ['Tenant', 'Applications', 'Proxies', 'Reactors', 'Audit log', 'Usage', 'Session']) {
      if (!(await page.getByRole('navigation', { name: 'Console' }).isVisible())) await page.getByRole('button', { name: 'Menu' }).click();
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: label, exact: true }).click();
      await page.getByRole('heading', { level: 1, name: label }).waitFor();
      await page.waitForLoadState('networkidle');
      const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(wide <= 1, `${label} is ${wide}px wider than the phone screen`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await t.test('sign out forgets the keys; a kept key lives in sessionStorage until then', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in with an API key' }).waitFor();
    await drainCSP();
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in with an API key' }).waitFor();

    await page.getByLabel('API key', { exact: true }).fill(MGMT_KEY);
    await page.getByLabel(/Keep the key for this tab/).check();
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Tenant' }).waitFor();
    assert.ok((await page.evaluate(() => JSON.stringify(sessionStorage))).includes(MGMT_KEY));
    assert.equal(await page.evaluate(() => JSON.stringify(localStorage)), '{}');
    await drainCSP();
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Tenant' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in with an API key' }).waitFor();
    assert.equal(await page.evaluate(() => JSON.stringify(sessionStorage)), '{}');
  });

  await t.test('no other origin, no CSP violation, no page error', async () => {
    await drainCSP();

    assert.deepEqual(foreign, [], 'requests to another origin');
    assert.deepEqual(cspViolations, [], 'CSP violations');
    assert.deepEqual(pageErrors, [], 'page errors');
    for (const u of requests) assert.equal(new URL(u).origin, ORIGIN, u);

    // controls: the watchers see what they are there to see
    await page.evaluate(() => { try { document.createElement('div').innerHTML = '<b>x</b>'; } catch { /* refused */ } });
    await page.waitForFunction(() => window.__csp.length > 0);
    await drainCSP();
    assert.ok(cspViolations.length > 0, 'an innerHTML assignment was not reported as a CSP (Trusted Types) violation');
    const other = await context.newPage();
    await other.goto('http://192.0.2.1/').catch(() => {});
    await other.close();
    assert.ok(foreign.length > 0, 'a request to another origin was not intercepted');
    report.controls = { csp: cspViolations.length, foreign: foreign.length };
    cspViolations.length = 0;
    foreign.length = 0;
  });
});
