// End-to-end: @basis-theory/basis-theory-js (the older, deprecated JS SDK),
// unchanged, against Tokenvault.
//
// Run by caddymodule/caddy/sdk_e2e_test.go (TV_SDK=1 go test
// ./caddymodule/caddy/ -run TestNodeSDKs), which starts the vault with
// `header_prefix BT`, creates the tenants and the echo destination, and sets:
//   TV_BASE_URL                   the vault's API; must be http://localhost:PORT:
//                                 init() rewrites every other host to https
//   TV_MANAGEMENT_KEY             the tenant's management application key
//   TV_DESTINATION_URL            the echo destination (see helpers.mjs)
//   TV_DISPOSABLE_MANAGEMENT_KEY  optional: a second tenant's management key;
//                                 tenants.delete runs only with it
//
// Clients are `await new BasisTheory().init(key, { apiBaseUrl, disableTelemetry: true })`
// (without disableTelemetry the SDK tries to post its errors to Datadog).
//
// Methods of this SDK the vault does not serve (not called here, unless
// noted):
//   applicationKeys.getById          GET /applications/{id}/keys/{keyId} is not routed
//   applicationTemplates.*, sessions.*  served, but exercised through the
//                                    node SDK (node-sdk-sessions-async.test.mjs)
//   createElement, elements          Elements: browser-hosted iframes
//   tenants.createInvitation, resendInvitation, listInvitations,
//   retrieveInvitation, deleteInvitation, listMembers, deleteMember
//                                    portal users and invitations
//   threeds.*                        3-D Secure
//   applications.regenerateKey       retired: the vault answers 400 naming the
//                                    replacement (checked below)
//   reactorFormulas.*                retired: 400 naming the replacement (checked below)
// This SDK has no detokenize method (node-sdk.test.mjs covers POST /detokenize)
// and no v2 list/search (node-sdk covers /v2/tokens and /v2/tokens/search).

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import btjs from '@basis-theory/basis-theory-js';
import btcommon from '@basis-theory/basis-theory-js/common/index.js';
import {
  env, unique, cards, routingNumber, privateTokenPermissions,
  assertEcho, assertNoVaultHeaders, rejects, assertProblem, assertRecent,
} from './helpers.mjs';

const { BasisTheory } = btjs;
const { BasisTheoryApiError } = btcommon;

const SDK = 'basis-theory-js';
const cardNumber = cards[SDK];
const run = unique('run');
const textValue = `secret-${randomUUID().slice(0, 8)}-9876`;

async function client(key) {
  return new BasisTheory().init(key, { apiBaseUrl: env.baseUrl, disableTelemetry: true });
}

const s = {
  mgmt: null, tenant: null,
  reveal: null, revealApp: null,
  mask: null, maskApp: null,
  pub: null, pubApp: null,
  card: null, bank: null, text: null,
};

const sortedIds = (items) => items.map((x) => x.id).sort();
const isoWithOffset = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

// checkError asserts a BasisTheoryApiError of the status with a
// problem-details body.
function checkError(status, what) {
  return (err) => {
    assert.ok(err instanceof BasisTheoryApiError, `${what}: not a BasisTheoryApiError: ${err?.stack || err}`);
    assert.equal(err.status, status, `${what}: status; data ${JSON.stringify(err.data)}`);
    assertProblem(err.data, status, what);
  };
}

describe('@basis-theory/basis-theory-js against Tokenvault', { concurrency: false }, () => {
  before(async () => {
    s.mgmt = await client(env.managementKey);
    s.tenant = await s.mgmt.tenants.retrieve();
    s.revealApp = await s.mgmt.applications.create({
      name: unique('js-reveal'), type: 'private',
      rules: [{
        description: 'reveal everything', priority: 1, container: '/', transform: 'reveal',
        permissions: [...privateTokenPermissions, 'reactor:invoke'],
      }],
    });
    s.maskApp = await s.mgmt.applications.create({
      name: unique('js-mask'), type: 'private', permissions: ['token:create', 'token:read', 'token:search'],
    });
    s.pubApp = await s.mgmt.applications.create({ name: unique('js-public'), type: 'public', permissions: ['token:create'] });
    s.reveal = await client(s.revealApp.key);
    s.mask = await client(s.maskApp.key);
    s.pub = await client(s.pubApp.key);
  });

  describe('tenants', () => {
    test('tenants.retrieve', async () => {
      const t = s.tenant;
      assert.match(t.id, /^[0-9a-f-]{36}$/);
      assert.equal(t.type, 'test');
      assert.match(t.createdAt, isoWithOffset);
      // The SDK camel-cases every response key, settings included.
      assert.deepEqual(t.settings, { deduplicateTokens: 'false', disableEphemeralProxy: 'false', fingerprintTokens: 'false' });
    });

    test('tenants.update', async () => {
      const name = unique('js-tenant');
      const t = await s.mgmt.tenants.update({ name, settings: { deduplicate_tokens: 'false' } });
      assert.equal(t.name, name);
      assert.equal(t.id, s.tenant.id);
      assert.equal(t.settings.disableEphemeralProxy, 'false', 'a setting not named keeps its value');
      assert.match(t.modifiedAt, isoWithOffset);
      assert.equal((await s.mgmt.tenants.retrieve()).name, name);
    });

    test('tenants.retrieve with a correlationId (BT-TRACE-ID)', async () => {
      // The SDK returns no response headers; node-sdk.test.mjs checks the echo.
      const t = await s.mgmt.tenants.retrieve({ correlationId: randomUUID() });
      assert.equal(t.id, s.tenant.id);
    });
  });

  describe('applications and keys', () => {
    let app;
    test('applications.create', async () => {
      app = await s.mgmt.applications.create({ name: unique('js-mgmt'), type: 'management', permissions: ['tenant:read', 'application:read'] });
      assert.match(app.id, /^[0-9a-f-]{36}$/);
      assert.equal(app.tenantId, s.tenant.id);
      assert.equal(app.type, 'management');
      assert.match(app.key, /^key_test_/);
      assert.equal(app.keys[0].key, app.key);
      assert.match(app.keys[0].id, /^[0-9a-f-]{36}$/);
      assert.match(app.createdAt, isoWithOffset);
      assertRecent(app.createdAt, 'application createdAt');
    });

    test('applications.retrieveByKey', async () => {
      const self = await (await client(app.key)).applications.retrieveByKey();
      assert.equal(self.id, app.id);
      assert.equal(self.key, undefined);
    });

    test('applications.retrieve', async () => {
      const got = await s.mgmt.applications.retrieve(app.id);
      assert.equal(got.id, app.id);
      assert.equal(got.name, app.name);
      assert.deepEqual([...got.permissions].sort(), ['application:read', 'tenant:read']);
      assert.equal(got.key, undefined);
    });

    test('applications.list: pagination and filters', async () => {
      const byId = await s.mgmt.applications.list({ id: [app.id, s.revealApp.id] });
      assert.deepEqual(sortedIds(byId.data), [app.id, s.revealApp.id].sort());
      assert.equal(byId.pagination.totalItems, 2);
      const p2 = await s.mgmt.applications.list({ page: 2, size: 1 });
      assert.equal(p2.data.length, 1);
      assert.deepEqual(
        { pageNumber: p2.pagination.pageNumber, pageSize: p2.pagination.pageSize },
        { pageNumber: 2, pageSize: 1 },
      );
      assert.ok(p2.pagination.totalItems >= 4);
      assert.equal(p2.pagination.totalPages, p2.pagination.totalItems);
      const past = await s.mgmt.applications.list({ page: 1000, size: 100 });
      assert.deepEqual(past.data, []);
    });

    test('applications.update', async () => {
      const name = unique('js-renamed');
      const up = await s.mgmt.applications.update(app.id, { name, permissions: ['tenant:read'] });
      assert.equal(up.name, name);
      assert.deepEqual(up.permissions, ['tenant:read']);
      assert.match(up.modifiedAt, isoWithOffset);
    });

    test('applicationKeys.create, get (list), delete', async () => {
      const k = await s.mgmt.applicationKeys.create(app.id);
      assert.match(k.id, /^[0-9a-f-]{36}$/);
      assert.match(k.key, /^key_test_/);
      const keys = await s.mgmt.applicationKeys.get(app.id);
      assert.deepEqual(keys.map((x) => x.id).sort(), [app.keys[0].id, k.id].sort());
      for (const x of keys) assert.equal(x.key, undefined);
      assert.equal((await (await client(k.key)).applications.retrieveByKey()).id, app.id);
      await s.mgmt.applicationKeys.delete(app.id, k.id);
      await rejects((await client(k.key)).applications.retrieveByKey(), checkError(401, 'deleted key'));
    });

    test('applications.regenerateKey is retired: 400 naming the replacement', async () => {
      const err = await rejects(s.mgmt.applications.regenerateKey(app.id), checkError(400, 'regenerate'));
      assert.match(JSON.stringify(err.data), /keys/i);
    });

    test('applications.delete', async () => {
      await s.mgmt.applications.delete(app.id);
      await rejects(s.mgmt.applications.retrieve(app.id), checkError(404, 'deleted application'));
    });

    test('permissions.list', async () => {
      const pub = await s.mgmt.permissions.list({ applicationType: 'public' });
      assert.deepEqual(pub.map((p) => p.type).sort(), ['token-intent:create', 'token:create', 'token:update']);
      for (const p of pub) {
        assert.deepEqual(p.applicationTypes.includes('public'), true);
        assert.equal(typeof p.description, 'string', `permission ${p.type} has no description`);
      }
      const all = await s.mgmt.permissions.list();
      assert.ok(all.length > pub.length);
    });
  });

  describe('tokens', () => {
    test('tokens.create: card, bank, token with a mask', async () => {
      s.card = await s.reveal.tokens.create({
        type: 'card', data: { number: cardNumber, expiration_month: 3, expiration_year: 2029, cvc: '4321' },
        metadata: { run, sdk: SDK, kind: 'card' },
      });
      assert.equal(s.card.type, 'card');
      assert.deepEqual(s.card.data, { number: 'XXXXXXXXXXXX' + cardNumber.slice(-4), expiration_month: 3, expiration_year: 2029 });
      assert.deepEqual(s.card.metadata, { run, sdk: SDK, kind: 'card' }, 'metadata keys are not camel-cased');
      assert.deepEqual(s.card.containers, ['/pci/high/']);
      assert.equal(s.card.createdBy, s.revealApp.id);
      assert.match(s.card.createdAt, isoWithOffset);
      assert.equal(s.card.tenantId, s.tenant.id);

      s.bank = await s.reveal.tokens.create({
        type: 'bank', data: { routing_number: routingNumber, account_number: '99887766' },
        metadata: { run, sdk: SDK, kind: 'bank' },
      });
      assert.deepEqual(s.bank.data, { routing_number: routingNumber, account_number: 'XXXX7766' });

      s.text = await s.reveal.tokens.create({
        type: 'token', data: textValue, mask: '{{ data | reveal_last: 4 }}', searchIndexes: ['{{ data }}'],
        metadata: { run, sdk: SDK, kind: 'text' }, expiresAt: '2099-01-02T03:04:05-07:00',
      });
      assert.equal(s.text.data, textValue.replace(/[A-Za-z0-9](?=.{4})/g, 'X'));
      assert.deepEqual(s.text.searchIndexes, ['{{ data }}']);
      assert.equal(s.text.expiresAt, '2099-01-02T03:04:05-07:00', 'expires_at keeps the offset sent');
    });

    test('tokens.retrieve: revealed and masked', async () => {
      const r = await s.reveal.tokens.retrieve(s.card.id);
      assert.deepEqual(r.data, { number: cardNumber, expiration_month: 3, expiration_year: 2029, cvc: '4321' });
      const m = await s.mask.tokens.retrieve(s.card.id);
      assert.deepEqual(m.data, { number: 'XXXXXXXXXXXX' + cardNumber.slice(-4), expiration_month: 3, expiration_year: 2029 });
      assert.equal((await s.reveal.tokens.retrieve(s.text.id)).data, textValue);
      assert.equal((await s.mask.tokens.retrieve(s.text.id)).data, s.text.data);
    });

    test('tokens.update: merge patch', async () => {
      const up = await s.reveal.tokens.update(s.card.id, { data: { expiration_month: 4 }, metadata: { note: 'patched' } });
      assert.deepEqual(up.metadata, { run, sdk: SDK, kind: 'card', note: 'patched' });
      assert.match(up.modifiedAt, isoWithOffset);
      const r = await s.reveal.tokens.retrieve(s.card.id);
      assert.deepEqual(r.data, { number: cardNumber, expiration_month: 4, expiration_year: 2029, cvc: '4321' });
    });

    test('tokens.list (v1): metadata filter and page pagination', async () => {
      const want = [s.card.id, s.bank.id, s.text.id].sort();
      const p1 = await s.reveal.tokens.list({ metadata: { run }, size: 2, page: 1 });
      assert.deepEqual(p1.pagination, { totalItems: 3, pageNumber: 1, pageSize: 2, totalPages: 2 });
      const p2 = await s.reveal.tokens.list({ metadata: { run }, size: 2, page: 2 });
      assert.equal(p2.pagination.pageNumber, 2);
      assert.deepEqual([...p1.data, ...p2.data].map((t) => t.id).sort(), want);
      const byId = await s.reveal.tokens.list({ id: [s.card.id, s.text.id] });
      assert.deepEqual(sortedIds(byId.data), [s.card.id, s.text.id].sort());
      const bank = await s.reveal.tokens.list({ metadata: { run, kind: 'bank' } });
      assert.deepEqual(sortedIds(bank.data), [s.bank.id]);
      assert.equal(bank.data[0].data.account_number, '99887766', 'token data keys are not camel-cased');
      const masked = await s.mask.tokens.list({ metadata: { run, kind: 'bank' } });
      assert.equal(masked.data[0].data.account_number, 'XXXX7766');
    });

    test('tokens.list (v1): type filter', async () => {
      const cardsOnly = await s.reveal.tokens.list({ metadata: { run }, type: 'card' });
      assert.deepEqual(sortedIds(cardsOnly.data), [s.card.id], 'GET /tokens?type=card returns only cards');
    });

    test('tokens.search (v1)', async () => {
      const p = await s.reveal.tokens.search({ query: `metadata.run:${run}`, page: 1, size: 2 });
      assert.deepEqual(p.pagination, { totalItems: 3, pageNumber: 1, pageSize: 2, totalPages: 2 });
      const p2 = await s.reveal.tokens.search({ query: `metadata.run:${run}`, page: 2, size: 2 });
      assert.deepEqual([...p.data, ...p2.data].map((t) => t.id).sort(), [s.card.id, s.bank.id, s.text.id].sort());
      const q = await s.reveal.tokens.search({ query: `metadata.run:${run} AND (type:bank OR type:card) AND NOT metadata.kind:bank` });
      assert.deepEqual(sortedIds(q.data), [s.card.id]);
      assert.equal(q.data[0].data.number, cardNumber);
      const byData = await s.mask.tokens.search({ query: `data:${textValue}` });
      assert.deepEqual(sortedIds(byData.data), [s.text.id]);
      assert.equal(byData.data[0].data, s.text.data);
      await rejects(s.reveal.tokens.search({ query: 'metadata.run:(' }), checkError(400, 'malformed query'));
    });

    test('tokenize', async () => {
      const out = await s.reveal.tokenize({
        first: { type: 'token', data: 'js-tokenized', metadata: { run: `${run}-tk` } },
        card: { type: 'card', data: { number: cardNumber, expiration_month: 5, expiration_year: 2033 } },
        bare: 'js-bare',
      });
      assert.match(out.first.id, /^[0-9a-f-]{36}$/);
      assert.equal(out.card.type, 'card');
      assert.deepEqual(out.card.containers, ['/pci/high/']);
      assert.equal(typeof out.bare, 'string');
      assert.equal((await s.reveal.tokens.retrieve(out.first.id)).data, 'js-tokenized');
      assert.equal((await s.reveal.tokens.retrieve(out.card.id)).data.number, cardNumber);
      assert.equal((await s.reveal.tokens.retrieve(out.bare)).data, 'js-bare');
    });

    test('tokens.delete', async () => {
      const t = await s.reveal.tokens.create({ type: 'token', data: 'bye' });
      await s.reveal.tokens.delete(t.id);
      await rejects(s.reveal.tokens.retrieve(t.id), checkError(404, 'deleted token'));
    });

    test('idempotencyKey replays tokens.create', async () => {
      const key = randomUUID();
      const model = { type: 'token', data: 'js-idem', metadata: { idem: key } };
      const a = await s.reveal.tokens.create(model, { idempotencyKey: key });
      const b = await s.reveal.tokens.create(model, { idempotencyKey: key });
      assert.deepEqual(b, a);
      const l = await s.reveal.tokens.list({ metadata: { idem: key } });
      assert.equal(l.pagination.totalItems, 1);
    });
  });

  describe('proxies', () => {
    let p1, p2;
    const prefix = unique('js-proxy');

    test('proxies.create', async () => {
      p1 = await s.mgmt.proxies.create({
        name: `${prefix}-auth`, destinationUrl: `${env.destinationUrl}/${SDK}`, requireAuth: true,
        configuration: { SOME_KEY: 'v' },
      });
      assert.match(p1.key, /^[A-Za-z0-9]+$/);
      assert.equal(p1.destinationUrl, `${env.destinationUrl}/${SDK}`);
      assert.equal(p1.requireAuth, true);
      assert.deepEqual(p1.configuration, { SOME_KEY: 'v' }, 'configuration keys are not camel-cased');
      assert.match(p1.createdAt, isoWithOffset);
      p2 = await s.mgmt.proxies.create({
        name: `${prefix}-open`, destinationUrl: `${env.destinationUrl}/${SDK}-open`, requireAuth: false,
        application: { id: s.revealApp.id },
      });
      assert.equal(p2.applicationId, s.revealApp.id);
      assert.equal(p2.requireAuth, false);
    });

    test('proxies.retrieve and proxies.list', async () => {
      const g = await s.mgmt.proxies.retrieve(p1.id);
      assert.equal(g.key, p1.key);
      assert.deepEqual(g.configuration, { SOME_KEY: 'v' });
      const l = await s.mgmt.proxies.list({ name: prefix });
      assert.deepEqual(sortedIds(l.data), [p1.id, p2.id].sort());
      assert.equal(l.pagination.totalItems, 2);
      const wild = await s.mgmt.proxies.list({ name: `${prefix}-o*` });
      assert.deepEqual(sortedIds(wild.data), [p2.id]);
      const page = await s.mgmt.proxies.list({ name: prefix, page: 2, size: 1 });
      assert.equal(page.data.length, 1);
      assert.equal(page.pagination.totalPages, 2);
    });

    test('proxies.update and proxies.patch', async () => {
      const up = await s.mgmt.proxies.update(p1.id, {
        name: `${prefix}-auth-2`, destinationUrl: `${env.destinationUrl}/${SDK}`, requireAuth: true, configuration: { SOME_KEY: 'w' },
      });
      assert.equal(up.name, `${prefix}-auth-2`);
      assert.equal(up.key, p1.key);
      assert.deepEqual(up.configuration, { SOME_KEY: 'w' });
      // 204 without a body (the SDK resolves to {} rather than undefined)
      await s.mgmt.proxies.patch(p1.id, { name: `${prefix}-auth-3`, configuration: null });
      const g = await s.mgmt.proxies.retrieve(p1.id);
      assert.equal(g.name, `${prefix}-auth-3`);
      assert.ok(g.configuration === undefined || Object.keys(g.configuration).length === 0, `configuration after a null patch: ${JSON.stringify(g.configuration)}`);
    });

    test('proxy.post detokenizes {{ token_id }} on the way to the destination', async () => {
      const { data, headers } = await s.reveal.proxy.post({
        path: '/charge',
        query: { amount: '20' },
        headers: { 'BT-PROXY-KEY': p1.key, 'X-SDK': SDK },
        body: {
          number: `{{ ${s.card.id} | json: '$.number' }}`,
          card: `{{ ${s.card.id} }}`,
          text: `{{ ${s.text.id} }}`,
          kind: `{{ token: ${s.card.id} | json: '$.metadata.kind' }}`,
          keep: 1.5,
        },
        includeResponseHeaders: true,
      });
      assertEcho(data);
      assert.equal(headers['bt-proxy-destination-status'], '200');
      assert.equal(data.method, 'POST');
      assert.equal(data.path, `/${SDK}/charge`);
      assert.equal(data.query, 'amount=20');
      assert.equal(data.headers['x-sdk'], SDK);
      assertNoVaultHeaders(data);
      assert.equal(data.json.number, cardNumber);
      assert.deepEqual(data.json.card, { number: cardNumber, expiration_month: 4, expiration_year: 2029, cvc: '4321' });
      assert.equal(data.json.text, textValue);
      assert.equal(data.json.kind, 'card');
      assert.equal(data.json.keep, 1.5);
    });

    test('proxy.get, put, patch, delete', async () => {
      const g = await s.reveal.proxy.get({ path: '/lookup', query: { 'bt-proxy-key': p2.key, q: 'y' } });
      assert.equal(g.method, 'GET');
      assert.equal(g.path, `/${SDK}-open/lookup`);
      assert.equal(g.query, 'q=y');
      const put = await s.reveal.proxy.put({ path: '/r', headers: { 'BT-PROXY-KEY': p1.key }, body: { n: `{{ ${s.card.id} | json: '$.number' }}` } });
      assert.equal(put.method, 'PUT');
      assert.equal(put.json.n, cardNumber);
      const patch = await s.reveal.proxy.patch({ path: '/r', headers: { 'BT-PROXY-KEY': p1.key }, body: { a: 'b' } });
      assert.equal(patch.method, 'PATCH');
      assert.deepEqual(patch.json, { a: 'b' });
      const del = await s.reveal.proxy.delete({ path: '/r/1', headers: { 'BT-PROXY-KEY': p1.key } });
      assert.equal(del.method, 'DELETE');
      assert.equal(del.path, `/${SDK}/r/1`);
    });

    test('proxy: destination errors pass through, vault errors are proxy_error', async () => {
      const d = await rejects(s.reveal.proxy.post({ path: '/status/409', headers: { 'BT-PROXY-KEY': p1.key }, body: { x: 1 } }));
      assert.ok(d instanceof BasisTheoryApiError);
      assert.equal(d.status, 409);
      assert.equal(d.data.path, `/${SDK}/status/409`, 'the destination\'s body comes back');
      const u = await rejects(s.reveal.proxy.post({ path: '/x', headers: { 'BT-PROXY-KEY': p1.key }, body: { n: `{{ ${randomUUID()} }}` } }));
      assert.equal(u.status, 400);
      assertProblem(u.data.proxy_error, 400, 'unknown token');
      const f = await rejects(s.mask.proxy.post({ path: '/x', headers: { 'BT-PROXY-KEY': p1.key }, body: { n: `{{ ${s.card.id} }}` } }));
      assert.equal(f.status, 403, `caller without token:use: ${JSON.stringify(f.data)}`);
      assertProblem(f.data.proxy_error, 403, 'caller without token:use');
    });

    test('ephemeral proxy with BT-PROXY-URL', async () => {
      const r = await s.reveal.proxy.post({
        path: '/e', headers: { 'BT-PROXY-URL': `${env.destinationUrl}/${SDK}-ephemeral` },
        body: { number: `{{ ${s.card.id} | json: '$.number' }}` },
      });
      assert.equal(r.path, `/${SDK}-ephemeral/e`);
      assert.equal(r.json.number, cardNumber);
    });

    test('proxies.delete', async () => {
      await s.mgmt.proxies.delete(p2.id);
      await rejects(s.mgmt.proxies.retrieve(p2.id), checkError(404, 'deleted proxy'));
      await s.mgmt.proxies.delete(p1.id);
    });
  });

  describe('reactors', () => {
    let r;
    const prefix = unique('js-reactor');
    const code = `module.exports = async function (req) {
  return { raw: { args: req.args, configuration: req.configuration } };
};`;

    test('reactors.create, retrieve, list', async () => {
      r = await s.mgmt.reactors.create({ name: prefix, code, configuration: { API_KEY_NAME: 'x' }, application: { id: s.revealApp.id } });
      assert.match(r.id, /^[0-9a-f-]{36}$/);
      assert.equal(r.code, code);
      assert.deepEqual(r.configuration, { API_KEY_NAME: 'x' }, 'configuration keys are not camel-cased');
      assert.equal(r.application?.id, s.revealApp.id, `the reactor's application as the SDK reads it (application.id); reactor: ${JSON.stringify(r)}`);
      const g = await s.mgmt.reactors.retrieve(r.id);
      assert.equal(g.name, prefix);
      const l = await s.mgmt.reactors.list({ name: prefix });
      assert.deepEqual(sortedIds(l.data), [r.id]);
    });

    test('reactors.update and reactors.patch', async () => {
      const up = await s.mgmt.reactors.update(r.id, { name: `${prefix}-2`, code, configuration: { API_KEY_NAME: 'y' } });
      assert.equal(up.name, `${prefix}-2`);
      assert.deepEqual(up.configuration, { API_KEY_NAME: 'y' });
      await s.mgmt.reactors.patch(r.id, { configuration: { API_KEY_NAME: 'z' } });
      assert.deepEqual((await s.mgmt.reactors.retrieve(r.id)).configuration, { API_KEY_NAME: 'z' });
    });

    test('reactors.react detokenizes its args', async () => {
      const out = await s.reveal.reactors.react(r.id, { args: { number: `{{ ${s.card.id} | json: '$.number' }}`, plain: 'p' } });
      assert.deepEqual(out.raw, { args: { number: cardNumber, plain: 'p' }, configuration: { API_KEY_NAME: 'z' } });
      await rejects(s.pub.reactors.react(r.id, { args: {} }), checkError(403, 'public app reacting'));
    });

    test('reactors.delete', async () => {
      await s.mgmt.reactors.delete(r.id);
      await rejects(s.mgmt.reactors.retrieve(r.id), checkError(404, 'deleted reactor'));
    });

    test('reactorFormulas are retired: 400 naming the replacement', async () => {
      const err = await rejects(s.mgmt.reactorFormulas.list(), checkError(400, 'reactor formulas'));
      assert.match(JSON.stringify(err.data), /code/i);
    });
  });

  describe('logs and usage', () => {
    test('logs.list with filters', async () => {
      const l = await s.mgmt.logs.list({ entityType: 'token', entityId: s.card.id });
      assert.ok(l.data.length >= 2);
      for (const x of l.data) {
        assert.equal(x.entityType, 'token');
        assert.equal(x.entityId, s.card.id);
        assert.match(x.createdAt, isoWithOffset);
      }
      assert.ok(l.data.some((x) => x.operation === 'create' && x.actorId === s.revealApp.id));
      const none = await s.mgmt.logs.list({ entityId: s.card.id, startDate: new Date(Date.now() + 3600e3).toISOString() });
      assert.deepEqual(none.data, []);
      const some = await s.mgmt.logs.list({ entityId: s.card.id, startDate: new Date(Date.now() - 3600e3).toISOString(), endDate: new Date(Date.now() + 60e3).toISOString() });
      assert.equal(some.data.length, l.data.length);
    });

    test('logs.list cursor pagination', async () => {
      const a = await s.mgmt.logs.list({ size: 3 });
      assert.equal(a.data.length, 3);
      assert.equal(typeof a.pagination.next, 'string', `pagination ${JSON.stringify(a.pagination)}`);
      const b = await s.mgmt.logs.list({ size: 3, start: a.pagination.next });
      assert.equal(new Set([...a.data, ...b.data].map((x) => x.id)).size, a.data.length + b.data.length);
    });

    test('tenants.retrieveUsageReport', async () => {
      const u = await s.mgmt.tenants.retrieveUsageReport();
      assert.equal(typeof u.tokenReport, 'object', `report ${JSON.stringify(u)}`);
      assert.ok(u.tokenReport.totalTokens >= 5, `tokenReport.totalTokens ${u.tokenReport.totalTokens}`);
      assert.equal(u.tokenReport.includedMonthlyActiveTokens, 1000);
      assert.ok(u.tokenReport.monthlyActiveTokens >= 1);
      assert.ok(u.tokenReport.metricsByType.card.count >= 2);
      assert.match(u.tokenReport.metricsByType.card.lastCreatedAt, isoWithOffset);
    });
  });

  describe('errors', () => {
    test('400 with validation errors', async () => {
      const err = await rejects(
        s.reveal.tokens.create({ type: 'bank', data: { routing_number: '123456789', account_number: '1' } }),
        checkError(400, 'bad routing number'),
      );
      assert.equal(typeof err.data.errors, 'object', JSON.stringify(err.data));
    });

    test('401', async () => {
      const bad = await client('key_test_' + 'y'.repeat(40));
      await rejects(bad.tokens.retrieve(s.card.id), checkError(401, 'invalid key'));
    });

    test('403', async () => {
      await rejects(s.pub.tokens.retrieve(s.card.id), checkError(403, 'public app reading'));
      await rejects(s.reveal.logs.list(), checkError(403, 'private app reading logs'));
    });

    test('404', async () => {
      await rejects(s.reveal.tokens.retrieve(randomUUID()), checkError(404, 'unknown token'));
      await rejects(s.mgmt.reactors.retrieve(randomUUID()), checkError(404, 'unknown reactor'));
    });

    test('409 on a duplicate token id', async () => {
      const id = unique('js-dup');
      await s.reveal.tokens.create({ id, type: 'token', data: 'a' });
      await rejects(s.reveal.tokens.create({ id, type: 'token', data: 'b' }), checkError(409, 'duplicate id'));
    });

    test('415 is not reachable: tokens.update sends application/merge-patch+json', async () => {
      // A bare PATCH with application/json is refused; the SDK's update works
      // (tokens.update above), which shows it sends the merge-patch type.
      const r = await fetch(`${env.baseUrl}/tokens/${s.card.id}`, {
        method: 'PATCH', headers: { 'BT-API-KEY': s.revealApp.key, 'Content-Type': 'application/json' }, body: '{}',
      });
      assert.equal(r.status, 415);
    });
  });

  describe('tenant deletion', () => {
    test('tenants.delete (disposable tenant)', { skip: !env.disposableManagementKey && 'TV_DISPOSABLE_MANAGEMENT_KEY is not set' }, async () => {
      const d = await client(env.disposableManagementKey);
      const t = await d.tenants.retrieve();
      assert.notEqual(t.id, s.tenant.id);
      await d.tenants.delete();
      await rejects(d.tenants.retrieve(), checkError(401, 'key of a deleted tenant'));
    });
  });
});
