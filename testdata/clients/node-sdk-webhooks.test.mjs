// End-to-end: webhooks through @basis-theory/node-sdk, unchanged, against
// Tokenvault (run by caddymodule/caddy/sdk_e2e_test.go, see helpers.mjs).
//
// A receiver on 127.0.0.1 (the vault's egress block allows loopback in
// the runner's Caddyfile) gets the vault's deliveries and verifies them
// the vendor's way: RSA-PSS over SHA-256 of the stable-stringified body,
// with the public key the vault serves at GET /webhooks/signing-key.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import crypto from 'node:crypto';
import { BasisTheoryClient, BasisTheory } from '@basis-theory/node-sdk';
import { env, unique, raw, rejects, assertProblem, assertRecent } from './helpers.mjs';

function client(apiKey) {
  return new BasisTheoryClient({ apiKey, baseUrl: env.baseUrl, maxRetries: 0, timeoutInSeconds: 20 });
}
const mgmt = client(env.managementKey);

// stableStringify is json-stable-stringify: object keys sorted, no spaces.
function stableStringify(v) {
  if (Array.isArray(v)) return `[${v.map(stableStringify).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stableStringify(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// The receiver: answers 500 to the first delivery of each event, 200 after.
const received = [];
const waiters = [];
const seenOnce = new Set();
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    let json = null;
    try { json = JSON.parse(body); } catch { /* recorded as is */ }
    const id = json?.event?.id;
    const status = id && !seenOnce.has(id) ? 500 : 200;
    if (id) seenOnce.add(id);
    received.push({ headers: req.headers, body, json, status });
    res.writeHead(status).end();
    for (const w of waiters.splice(0)) w();
  });
});

async function waitFor(pred, what, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const hit = received.find(pred);
    if (hit) return hit;
    if (Date.now() > deadline) assert.fail(`${what}: nothing in ${ms} ms (${received.length} requests)`);
    await new Promise((resolve) => { waiters.push(resolve); setTimeout(resolve, 250); });
  }
}

describe('webhooks through @basis-theory/node-sdk', { concurrency: false }, () => {
  let url;
  let hook;
  before(async () => {
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${server.address().port}/hooks`;
  });
  after(() => new Promise((resolve) => server.close(resolve)));

  test('webhooks.events.list names the event types', async () => {
    const types = await mgmt.webhooks.events.list();
    assert.ok(Array.isArray(types));
    for (const t of ['token.created', 'token.updated', 'token.deleted', 'application.created', 'proxy.created', 'reactor.deleted']) {
      assert.ok(types.includes(t), `event types lack ${t}: ${types}`);
    }
  });

  test('webhooks.create, get, list and update', async () => {
    hook = await mgmt.webhooks.create({ name: unique('sdk-hook'), url, notifyEmail: 'ops@example.com', events: ['token.created'] });
    assert.match(hook.id, /^[0-9a-f-]{36}$/);
    assert.equal(hook.status, 'enabled');
    assert.equal(hook.url, url);
    assert.equal(hook.notifyEmail, 'ops@example.com');
    assert.deepEqual(hook.events, ['token.created']);
    assertRecent(hook.createdAt, 'createdAt');
    const got = await mgmt.webhooks.get(hook.id);
    assert.equal(got.name, hook.name);
    const list = await mgmt.webhooks.list();
    assert.ok(list.data.some((w) => w.id === hook.id), 'the list holds the webhook');
    const up = await mgmt.webhooks.update(hook.id, { name: hook.name, url, events: ['token.created', 'token.deleted'] });
    assert.deepEqual(up.events, ['token.created', 'token.deleted']);
    assertRecent(up.modifiedAt, 'modifiedAt');
  });

  test('a URL the egress policy refuses is a 400 naming url', async () => {
    await rejects(mgmt.webhooks.create({ name: unique('ssrf'), url: 'https://169.254.169.254/latest/meta-data', events: ['token.created'] }), (err) => {
      assert.ok(err instanceof BasisTheory.BadRequestError, `${err}`);
      assertProblem(err.body, 400, 'ssrf');
      assert.ok(err.body.errors?.url, `the problem names url: ${JSON.stringify(err.body)}`);
    });
  });

  test('a new token is delivered as token.created, retried after a 500, signed', async () => {
    const app = await mgmt.applications.create({ name: unique('hook-app'), type: 'private', permissions: ['token:create'] });
    const tok = await client(app.key).tokens.create({ type: 'token', data: 'webhook-secret-value' });
    const ok = await waitFor((r) => r.status === 200 && r.json?.event?.data?.token?.id === tok.id, 'token.created delivered');
    const tries = received.filter((r) => r.json?.event?.id === ok.json.event.id);
    assert.equal(tries.length, 2, 'one 500, then the 200');
    assert.equal(ok.json.event.type, 'token.created');
    assert.equal(ok.json.event.tenant_id, hook.tenantId);
    assert.equal(ok.headers['bt-webhook-id'], hook.id);
    assert.ok(!ok.body.includes('webhook-secret-value'), 'the payload holds no token data');
    assertRecent(ok.json.delivered_at, 'delivered_at');

    const key = await raw('GET', '/webhooks/signing-key', { key: env.managementKey });
    assert.equal(key.status, 200);
    assert.equal(ok.headers['bt-signature-key-id'], key.json.id);
    for (const r of tries) {
      const verifier = crypto.createVerify('SHA256');
      verifier.update(stableStringify(JSON.parse(r.body)));
      const valid = verifier.verify({ key: key.json.public_key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING },
        Buffer.from(r.headers['bt-signature'], 'base64'));
      assert.ok(valid, `the signature verifies: ${r.body}`);
      const tampered = crypto.createVerify('SHA256');
      tampered.update(stableStringify({ ...JSON.parse(r.body), delivered_at: new Date(0).toISOString() }));
      assert.ok(!tampered.verify({ key: key.json.public_key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING },
        Buffer.from(r.headers['bt-signature'], 'base64')), 'a replayed body with another time does not verify');
    }
  });

  test('webhooks.delete; the webhook is gone', async () => {
    await mgmt.webhooks.delete(hook.id);
    await rejects(mgmt.webhooks.get(hook.id), (err) => {
      assert.ok(err instanceof BasisTheory.NotFoundError, `${err}`);
    });
  });
});
