// End-to-end: @basis-theory/node-sdk, unchanged, against Tokenvault.
//
// Run by caddymodule/caddy/sdk_e2e_test.go (TV_SDK=1 go test
// ./caddymodule/caddy/ -run TestNodeSDKs), which starts the vault with
// `header_prefix BT`, creates the tenants and the echo destination, and sets:
//   TV_BASE_URL                   the vault's API, e.g. http://localhost:8080
//   TV_MANAGEMENT_KEY             the tenant's management application key
//   TV_DESTINATION_URL            the echo destination (see helpers.mjs)
//   TV_DISPOSABLE_MANAGEMENT_KEY  optional: a second tenant's management key;
//                                 tenants.self.delete runs only with it
//
// The client is built with { apiKey, baseUrl, maxRetries: 0 }: no retries, so
// a 5xx or 429 shows as the failure it is.
//
// Methods of this SDK the vault does not serve (not called here):
//   accountUpdater.jobs.*, accountUpdater.realTime.invoke  account updater: card networks
//   agentic.*                          agentic commerce: networks and issuers
//   applePay.*, googlePay.*            wallet tokens: wallet decryption, merchant certificates
//   networkTokens.*                    network tokenization: card networks
//   tenants.connections.*, .invitations.*, .members.*, .merchants.*, .owner.get,
//   .ownerTransfer, .securityContact.*         portal users, invitations, merchants
//   threeds.sessions.*                 3-D Secure
// (The test "methods the vault does not serve fail cleanly" checks that a few
// of them reject with a BasisTheoryError of status 404 or 405, not a hang.)
//
// Card and bank details, enrichments.getcarddetails and tokenIntents.* are
// exercised in node-sdk-details-intents.test.mjs; sessions.*,
// reactors.reactAsync, reactors.results.get, roles.list and
// applicationTemplates.* in node-sdk-sessions-async.test.mjs; keys.*
// (client-side encryption) and documents.* in
// node-sdk-keys-documents.test.mjs.
//
// Not in this SDK at all (exercised in basis-theory-js.test.mjs): the v1
// GET /tokens list and POST /tokens/search, and a proxy helper; proxies are
// invoked here with fetch and BT-PROXY-KEY.

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BasisTheoryClient, BasisTheory, BasisTheoryError } from '@basis-theory/node-sdk';
import {
  env, unique, cards, routingNumber, privateTokenPermissions,
  assertEcho, assertNoVaultHeaders, raw, rejects, assertProblem, assertRecent,
} from './helpers.mjs';

const SDK = 'node-sdk';
const cardNumber = cards[SDK];
const run = unique('run');

function client(apiKey) {
  return new BasisTheoryClient({ apiKey, baseUrl: env.baseUrl, maxRetries: 0, timeoutInSeconds: 20 });
}
const mgmt = client(env.managementKey);

// Set up by the first tests, used by the later ones.
const s = {
  tenant: null,
  reveal: null, revealApp: null, // private, access rule revealing everything
  mask: null, maskApp: null, // private, plain permissions (masked reads)
  pub: null, pubApp: null, // public, token:create only
  card: null, bank: null, text: null,
};

function sortedIds(items) {
  return items.map((x) => x.id).sort();
}

// checkError asserts an SDK error of class Cls with the status and a
// problem-details body.
function checkError(Cls, status, what) {
  return (err) => {
    assert.ok(err instanceof BasisTheoryError, `${what}: not a BasisTheoryError: ${err?.stack || err}`);
    assert.ok(err instanceof Cls, `${what}: ${err.constructor.name} (status ${err.statusCode}), want ${Cls.name}; body ${JSON.stringify(err.body)}`);
    assert.equal(err.statusCode, status, `${what}: statusCode`);
    assertProblem(err.body, status, what);
  };
}

describe('@basis-theory/node-sdk against Tokenvault', { concurrency: false }, () => {
  before(async () => {
    s.tenant = await mgmt.tenants.self.get();
    s.revealApp = await mgmt.applications.create({
      name: unique('sdk-reveal'),
      type: 'private',
      rules: [{
        description: 'reveal everything', priority: 1, container: '/', transform: 'reveal',
        permissions: [...privateTokenPermissions, 'reactor:invoke'],
      }],
    });
    s.maskApp = await mgmt.applications.create({
      name: unique('sdk-mask'), type: 'private',
      permissions: ['token:create', 'token:read', 'token:update', 'token:search'],
    });
    s.pubApp = await mgmt.applications.create({ name: unique('sdk-public'), type: 'public', permissions: ['token:create'] });
    s.reveal = client(s.revealApp.key);
    s.mask = client(s.maskApp.key);
    s.pub = client(s.pubApp.key);
  });

  describe('tenants', () => {
    test('tenants.self.get returns the tenant; BT-TRACE-ID is echoed', async () => {
      const trace = randomUUID();
      const { data: t, rawResponse } = await mgmt.tenants.self.get({ correlationId: trace }).withRawResponse();
      assert.equal(rawResponse.status, 200);
      assert.equal(rawResponse.headers.get('bt-trace-id'), trace, 'BT-TRACE-ID of the response');
      assert.match(t.id, /^[0-9a-f-]{36}$/);
      assert.equal(t.type, 'test');
      assert.equal(typeof t.name, 'string');
      assert.ok(t.createdAt instanceof Date, 'createdAt is a Date');
      assertRecent(t.createdAt, 'tenant createdAt', 10 * 60 * 1000);
      assert.equal(t.settings.deduplicate_tokens, 'false');
      assert.equal(t.settings.fingerprint_tokens, 'false');
      assert.equal(t.settings.disable_ephemeral_proxy, 'false');
    });

    test('tenants.self.update changes the name and keeps settings not named', async () => {
      const name = unique('sdk-tenant');
      const t = await mgmt.tenants.self.update({ name, settings: { fingerprint_tokens: 'false' } });
      assert.equal(t.name, name);
      assert.equal(t.id, s.tenant.id);
      assert.equal(t.settings.fingerprint_tokens, 'false');
      assert.equal(t.settings.disable_ephemeral_proxy, 'false', 'a setting not named keeps its value');
      assert.ok(t.modifiedAt instanceof Date, 'modifiedAt after an update');
      const again = await mgmt.tenants.self.get();
      assert.equal(again.name, name);
    });
  });

  describe('applications and keys', () => {
    let app;
    test('applications.create returns key and keys[0].key', async () => {
      app = await mgmt.applications.create({
        name: unique('sdk-mgmt'), type: 'management', permissions: ['tenant:read', 'application:read'],
      });
      assert.match(app.id, /^[0-9a-f-]{36}$/);
      assert.equal(app.tenantId, s.tenant.id);
      assert.equal(app.type, 'management');
      assert.deepEqual([...app.permissions].sort(), ['application:read', 'tenant:read']);
      assert.match(app.key, /^key_test_/);
      assert.equal(app.keys.length, 1);
      assert.equal(app.keys[0].key, app.key);
      assert.match(app.keys[0].id, /^[0-9a-f-]{36}$/);
      assert.ok(app.createdAt instanceof Date);
      assertRecent(app.createdAt, 'application createdAt');
    });

    test('applications.create with createKey false has no key', async () => {
      const a = await mgmt.applications.create({ name: unique('sdk-nokey'), type: 'private', permissions: ['token:read'], createKey: false });
      assert.equal(a.key, undefined);
      assert.ok(!a.keys || a.keys.length === 0, `keys: ${JSON.stringify(a.keys)}`);
      await mgmt.applications.delete(a.id);
    });

    test('applications.getByKey returns the calling application', async () => {
      const self = await client(app.key).applications.getByKey();
      assert.equal(self.id, app.id);
      assert.equal(self.name, app.name);
      assert.equal(self.key, undefined, 'the key is shown once');
      const priv = await s.reveal.applications.getByKey();
      assert.equal(priv.id, s.revealApp.id);
      assert.equal(priv.rules[0].transform, 'reveal');
      assert.equal(priv.rules[0].container, '/');
    });

    test('applications.get', async () => {
      const got = await mgmt.applications.get(app.id);
      assert.equal(got.id, app.id);
      assert.equal(got.name, app.name);
      assert.equal(got.type, 'management');
      assert.equal(got.key, undefined, 'the key is shown once');
      assert.equal(got.createdAt.getTime(), app.createdAt.getTime());
    });

    test('applications.list: page pagination and filters', async () => {
      const ids = [s.revealApp.id, s.maskApp.id, app.id];
      const byId = await mgmt.applications.list({ id: ids });
      assert.deepEqual(sortedIds(byId.data), [...ids].sort());
      const p = await mgmt.applications.list({ size: 1, page: 1 });
      assert.equal(p.data.length, 1);
      assert.equal(p.response.pagination.pageSize, 1);
      assert.equal(p.response.pagination.pageNumber, 1);
      assert.ok(p.response.pagination.totalItems >= 4, `totalItems ${p.response.pagination.totalItems}`);
      assert.equal(p.response.pagination.totalPages, p.response.pagination.totalItems);
      const first = p.data[0].id;
      assert.ok(p.hasNextPage());
      await p.getNextPage();
      assert.equal(p.data.length, 1);
      assert.notEqual(p.data[0].id, first, 'page 2 is another application');
      const typed = await mgmt.applications.list({ type: 'public' });
      assert.ok(typed.data.length >= 1);
      for (const a of typed.data) assert.equal(a.type, 'public');
      const all = [];
      for await (const a of await mgmt.applications.list({ size: 2 })) {
        all.push(a.id);
        assert.ok(all.length < 100, 'iteration does not end');
      }
      assert.equal(new Set(all).size, all.length, 'iteration repeats applications');
      for (const id of ids) assert.ok(all.includes(id), `iteration misses ${id}`);
    });

    test('applications.update', async () => {
      const name = unique('sdk-renamed');
      const up = await mgmt.applications.update(app.id, { name, permissions: ['tenant:read'] });
      assert.equal(up.id, app.id);
      assert.equal(up.name, name);
      assert.deepEqual(up.permissions, ['tenant:read']);
      assert.ok(up.modifiedAt instanceof Date);
      assert.equal((await mgmt.applications.get(app.id)).name, name);
    });

    test('applicationKeys.create, list, delete', async () => {
      const k = await mgmt.applicationKeys.create(app.id);
      assert.match(k.id, /^[0-9a-f-]{36}$/);
      assert.match(k.key, /^key_test_/);
      assert.notEqual(k.key, app.key);
      assert.ok(k.createdAt instanceof Date);
      const keys = await mgmt.applicationKeys.list(app.id);
      assert.deepEqual(keys.map((x) => x.id).sort(), [app.keys[0].id, k.id].sort());
      for (const x of keys) assert.equal(x.key, undefined, 'listed keys carry no secret');
      assert.equal((await client(k.key).applications.getByKey()).id, app.id, 'the new key works');
      await mgmt.applicationKeys.delete(app.id, k.id);
      await rejects(client(k.key).applications.getByKey(), checkError(BasisTheory.UnauthorizedError, 401, 'deleted key'));
      assert.deepEqual((await mgmt.applicationKeys.list(app.id)).map((x) => x.id), [app.keys[0].id]);
    });

    test('applications.delete', async () => {
      await mgmt.applications.delete(app.id);
      await rejects(mgmt.applications.get(app.id), checkError(BasisTheory.NotFoundError, 404, 'deleted application'));
      await rejects(client(app.key).applications.getByKey(), checkError(BasisTheory.UnauthorizedError, 401, 'key of a deleted application'));
    });

    test('permissions.list by application type', async () => {
      const priv = await mgmt.permissions.list({ applicationType: 'private' });
      const types = priv.map((p) => p.type);
      for (const want of ['token:create', 'token:read', 'token:update', 'token:delete', 'token:search', 'token:use']) {
        assert.ok(types.includes(want), `private permissions lack ${want}: ${types}`);
      }
      assert.ok(!types.includes('tenant:read'), 'a management permission listed for private');
      for (const p of priv) {
        assert.ok(p.applicationTypes.includes('private'), `${p.type} applicationTypes ${p.applicationTypes}`);
        assert.equal(typeof p.description, 'string', `permission ${p.type} has no description`);
      }
      const m = (await mgmt.permissions.list({ applicationType: 'management' })).map((p) => p.type);
      for (const want of ['tenant:read', 'application:create', 'proxy:create', 'reactor:create', 'log:read', 'report:read']) {
        assert.ok(m.includes(want), `management permissions lack ${want}`);
      }
    });
  });

  describe('tokens', () => {
    const textValue = `sensitive-${randomUUID().slice(0, 8)}-1234`;
    const expiresAt = new Date(Date.now() + 24 * 3600 * 1000);
    expiresAt.setUTCMilliseconds(0);

    test('tokens.create: card with the default mask', async () => {
      s.card = await s.reveal.tokens.create({
        type: 'card',
        data: { number: cardNumber, expiration_month: 12, expiration_year: 2030, cvc: '123' },
        metadata: { run, sdk: SDK, kind: 'card' },
      });
      const c = s.card;
      assert.match(c.id, /^[0-9a-f-]{36}$/);
      assert.equal(c.type, 'card');
      assert.equal(c.tenantId, s.tenant.id);
      assert.deepEqual(c.data, { number: 'XXXXXXXXXXXX' + cardNumber.slice(-4), expiration_month: 12, expiration_year: 2030 }, 'create returns masked data without the CVC');
      assert.deepEqual(c.containers, ['/pci/high/']);
      assert.deepEqual(c.metadata, { run, sdk: SDK, kind: 'card' });
      assert.equal(c.createdBy, s.revealApp.id);
      assert.ok(c.createdAt instanceof Date);
      assertRecent(c.createdAt, 'token createdAt');
      assert.equal(c.mask.number, '{{ data.number | reveal_last: 4 }}');
    });

    test('tokens.create: bank', async () => {
      s.bank = await s.reveal.tokens.create({
        type: 'bank', data: { routing_number: routingNumber, account_number: '12345678901' },
        metadata: { run, sdk: SDK, kind: 'bank' },
      });
      assert.equal(s.bank.type, 'bank');
      assert.deepEqual(s.bank.data, { routing_number: routingNumber, account_number: 'XXXXXXX8901' });
      assert.deepEqual(s.bank.containers, ['/bank/high/']);
    });

    test('tokens.create: token with id, mask, search index and expiry', async () => {
      const id = unique('sdk-node-token');
      s.text = await s.reveal.tokens.create({
        id, type: 'token', data: textValue, mask: '{{ data | reveal_last: 4 }}',
        searchIndexes: ['{{ data }}'], metadata: { run, sdk: SDK, kind: 'text' },
        fingerprintExpression: '{{ data }}', expiresAt: expiresAt.toISOString(),
      });
      const t = s.text;
      assert.equal(t.id, id);
      assert.equal(t.type, 'token');
      assert.equal(t.data, textValue.replace(/[A-Za-z0-9](?=.{4})/g, 'X'), 'masked data');
      assert.equal(t.mask, '{{ data | reveal_last: 4 }}');
      assert.deepEqual(t.searchIndexes, ['{{ data }}']);
      assert.deepEqual(t.containers, ['/general/high/']);
      assert.equal(t.fingerprintExpression, '{{ data }}');
      assert.match(t.fingerprint ?? '', /^[A-Za-z0-9_-]{20,}$/, `fingerprint ${t.fingerprint}`);
      assert.ok(t.expiresAt instanceof Date, `expiresAt ${t.expiresAt}`);
      assert.equal(t.expiresAt.getTime(), expiresAt.getTime());
    });

    test('tokens.create with deduplicateToken returns the existing token', async () => {
      const body = { type: 'token', data: `dedup-${run}`, fingerprintExpression: '{{ data }}', deduplicateToken: true, metadata: { run: `${run}-dedup` } };
      const a = await s.reveal.tokens.create(body);
      const b = await s.reveal.tokens.create(body);
      assert.equal(b.id, a.id);
      assert.equal(b.fingerprint, a.fingerprint);
      assert.equal(b.extras?.deduplicated, true, `_extras: ${JSON.stringify(b.extras)}`);
      assert.notEqual(a.extras?.deduplicated, true);
    });

    test('tokens.get: revealed by an access rule, masked by plain permissions', async () => {
      const r = await s.reveal.tokens.get(s.card.id);
      assert.deepEqual(r.data, { number: cardNumber, expiration_month: 12, expiration_year: 2030, cvc: '123' });
      assert.deepEqual(r.metadata, s.card.metadata);
      const m = await s.mask.tokens.get(s.card.id);
      assert.deepEqual(m.data, { number: 'XXXXXXXXXXXX' + cardNumber.slice(-4), expiration_month: 12, expiration_year: 2030 });
      assert.equal((await s.reveal.tokens.get(s.text.id)).data, textValue);
      assert.equal((await s.mask.tokens.get(s.text.id)).data, s.text.data);
      assert.deepEqual((await s.reveal.tokens.get(s.bank.id)).data, { routing_number: routingNumber, account_number: '12345678901' });
    });

    test('tokens.update: merge patch of data and metadata', async () => {
      const up = await s.reveal.tokens.update(s.card.id, { data: { expiration_year: 2031 }, metadata: { note: 'patched' } });
      assert.equal(up.id, s.card.id);
      assert.deepEqual(up.metadata, { run, sdk: SDK, kind: 'card', note: 'patched' });
      assert.equal(up.modifiedBy, s.revealApp.id);
      assert.ok(up.modifiedAt instanceof Date);
      const r = await s.reveal.tokens.get(s.card.id);
      assert.deepEqual(r.data, { number: cardNumber, expiration_month: 12, expiration_year: 2031, cvc: '123' });
      assert.deepEqual(r.metadata, { run, sdk: SDK, kind: 'card', note: 'patched' });
    });

    test('tokens.listV2: metadata filter and cursor pagination', async () => {
      const want = [s.card.id, s.bank.id, s.text.id].sort();
      const p = await s.reveal.tokens.listV2({ metadata: { run }, size: 2 });
      assert.equal(p.data.length, 2);
      assert.equal(p.response.pagination.pageSize, 2);
      assert.equal(typeof p.response.pagination.next, 'string', 'a next cursor');
      assert.ok(p.hasNextPage());
      const seen = p.data.map((t) => t.id);
      await p.getNextPage();
      assert.equal(p.data.length, 1);
      seen.push(...p.data.map((t) => t.id));
      assert.ok(!p.hasNextPage(), 'no cursor after the last page');
      assert.deepEqual(seen.sort(), want);
      const all = [];
      for await (const t of await s.reveal.tokens.listV2({ metadata: { run }, size: 1 })) {
        all.push(t.id);
        assert.ok(all.length <= 10, 'iteration does not end');
      }
      assert.deepEqual(all.sort(), want);
      const one = await s.reveal.tokens.listV2({ metadata: { run, kind: 'bank' } });
      assert.deepEqual(sortedIds(one.data), [s.bank.id]);
      const revealed = one.data[0];
      assert.equal(revealed.data.account_number, '12345678901', 'listed data follows the caller\'s rules');
      const masked = await s.mask.tokens.listV2({ metadata: { run, kind: 'bank' } });
      assert.equal(masked.data[0].data.account_number, 'XXXXXXX8901');
    });

    test('tokens.listV2: type, container and fingerprint filters', async () => {
      const wrong = [];
      for (const [query, want] of [
        [{ type: 'bank' }, [s.bank.id]],
        [{ container: '/pci/high/' }, [s.card.id]],
        [{ fingerprint: s.text.fingerprint }, [s.text.id]],
      ]) {
        const got = sortedIds((await s.reveal.tokens.listV2({ metadata: { run }, ...query })).data);
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          wrong.push(`GET /v2/tokens?${new URLSearchParams(query)}&metadata=…: got ${got.length} tokens ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
        }
      }
      assert.deepEqual(wrong, [], 'listV2 filters are ignored');
    });

    test('tokens.searchV2: metadata, type and data queries, cursor pagination', async () => {
      const p = await s.reveal.tokens.searchV2({ query: `metadata.run:${run}`, size: 2 });
      assert.equal(p.data.length, 2);
      assert.equal(typeof p.response.pagination.next, 'string');
      const seen = p.data.map((t) => t.id);
      await p.getNextPage();
      seen.push(...p.data.map((t) => t.id));
      assert.deepEqual(seen.sort(), [s.card.id, s.bank.id, s.text.id].sort());
      const cardsOnly = await s.reveal.tokens.searchV2({ query: `metadata.run:${run} AND type:card` });
      assert.deepEqual(sortedIds(cardsOnly.data), [s.card.id]);
      assert.equal(cardsOnly.data[0].data.number, cardNumber);
      const byData = await s.reveal.tokens.searchV2({ query: `data:${textValue}` });
      assert.deepEqual(sortedIds(byData.data), [s.text.id]);
      const masked = await s.mask.tokens.searchV2({ query: `data:${textValue}` });
      assert.equal(masked.data[0].data, s.text.data, 'search results are masked for a masking caller');
    });

    test('tokens.tokenize keeps the body\'s shape', async () => {
      const out = await s.reveal.tokens.tokenize({
        card: { type: 'card', data: { number: cardNumber, expiration_month: 1, expiration_year: 2032 }, metadata: { run: `${run}-tk` } },
        list: [{ type: 'token', data: 'tokenized-1', metadata: { run: `${run}-tk` } }, 'tokenized-2'],
      });
      assert.equal(out.card.type, 'card');
      assert.match(out.card.id, /^[0-9a-f-]{36}$/);
      assert.deepEqual(out.card.containers, ['/pci/high/']);
      assert.deepEqual(out.card.metadata, { run: `${run}-tk` });
      assert.deepEqual(out.card.mask, { number: 'XXXXXXXXXXXX' + cardNumber.slice(-4), expiration_month: 1, expiration_year: 2032 },
        'a tokenized object answers with its evaluated mask, as the interface documents');
      assert.equal(out.card.data, undefined, 'no data in a tokenize answer');
      assert.equal(out.list.length, 2);
      assert.match(out.list[0].id, /^[0-9a-f-]{36}$/);
      assert.equal(typeof out.list[1], 'string', 'a bare value becomes a token id');
      const c = await s.reveal.tokens.get(out.card.id);
      assert.equal(c.data.number, cardNumber);
      assert.equal((await s.reveal.tokens.get(out.list[0].id)).data, 'tokenized-1');
      assert.equal((await s.reveal.tokens.get(out.list[1])).data, 'tokenized-2');
    });

    test('tokens.detokenize', async () => {
      const out = await s.reveal.tokens.detokenize({
        number: `{{ ${s.card.id} | json: '$.number' }}`,
        text: `{{ ${s.text.id} }}`,
        nested: { bank: `{{ ${s.bank.id} }}` },
        whole: `{{ token: ${s.card.id} | json: '$.data.expiration_year' }}`,
        meta: `{{ token: ${s.card.id} | json: '$.metadata.kind' }} / {{ ${s.bank.id} | json: '$.routing_number' }}`,
        literal: 42,
      });
      assert.deepEqual(out, {
        number: cardNumber,
        text: textValue,
        nested: { bank: { routing_number: routingNumber, account_number: '12345678901' } },
        whole: 2031,
        meta: `card / ${routingNumber}`,
        literal: 42,
      });
    });

    test('tokens.delete', async () => {
      const t = await s.reveal.tokens.create({ type: 'token', data: 'to-delete', metadata: { run: `${run}-del` } });
      await s.reveal.tokens.delete(t.id);
      await rejects(s.reveal.tokens.get(t.id), checkError(BasisTheory.NotFoundError, 404, 'deleted token'));
      const left = await s.reveal.tokens.listV2({ metadata: { run: `${run}-del` } });
      assert.equal(left.data.length, 0);
    });
  });

  describe('idempotency', () => {
    test('tokens.create with an idempotencyKey replays the first answer', async () => {
      const key = randomUUID();
      const body = { type: 'token', data: 'idempotent', metadata: { idem: key } };
      const a = await s.reveal.tokens.create(body, { idempotencyKey: key });
      const b = await s.reveal.tokens.create(body, { idempotencyKey: key });
      assert.equal(b.id, a.id);
      assert.deepEqual(b, a);
      const c = await s.reveal.tokens.create(body, { idempotencyKey: randomUUID() });
      assert.notEqual(c.id, a.id);
      const listed = await s.reveal.tokens.listV2({ metadata: { idem: key } });
      assert.deepEqual(sortedIds(listed.data), [a.id, c.id].sort(), 'the replay created no token');
    });

    test('a failed request is not stored under its idempotencyKey', async () => {
      const key = randomUUID();
      await rejects(
        s.reveal.tokens.create({ type: 'card', data: { number: '1' } }, { idempotencyKey: key }),
        checkError(BasisTheory.BadRequestError, 400, 'invalid card with an idempotency key'),
      );
      const t = await s.reveal.tokens.create({ type: 'token', data: 'after-failure' }, { idempotencyKey: key });
      assert.equal(t.type, 'token');
      assert.equal((await s.reveal.tokens.get(t.id)).data, 'after-failure');
    });

    test('applications.create with an idempotencyKey', async () => {
      const key = randomUUID();
      const body = { name: unique('sdk-idem'), type: 'private', permissions: ['token:read'] };
      const a = await mgmt.applications.create(body, { idempotencyKey: key });
      const b = await mgmt.applications.create(body, { idempotencyKey: key });
      assert.equal(b.id, a.id);
      assert.equal(b.key, a.key);
      const listed = await mgmt.applications.list({ id: a.id });
      assert.equal(listed.data.length, 1);
      await mgmt.applications.delete(a.id);
    });
  });

  describe('proxies', () => {
    let p1, p2;
    const prefix = unique('sdk-proxy');

    test('proxies.create', async () => {
      p1 = await mgmt.proxies.create({
        name: `${prefix}-auth`, destinationUrl: `${env.destinationUrl}/${SDK}`, requireAuth: true,
        configuration: { MODE: 'test' },
      });
      assert.match(p1.id, /^[0-9a-f-]{36}$/);
      assert.match(p1.key, /^[A-Za-z0-9]+$/);
      assert.equal(p1.name, `${prefix}-auth`);
      assert.equal(p1.destinationUrl, `${env.destinationUrl}/${SDK}`);
      assert.equal(p1.requireAuth, true);
      assert.deepEqual(p1.configuration, { MODE: 'test' });
      assert.equal(p1.tenantId, s.tenant.id);
      assert.ok(p1.createdAt instanceof Date);
      p2 = await mgmt.proxies.create({
        name: `${prefix}-open`, destinationUrl: `${env.destinationUrl}/${SDK}-open`, requireAuth: false,
        application: { id: s.revealApp.id },
      });
      assert.equal(p2.requireAuth, false);
      assert.equal(p2.applicationId, s.revealApp.id);
      assert.notEqual(p2.key, p1.key);
    });

    test('proxies.get and proxies.list', async () => {
      const g = await mgmt.proxies.get(p1.id);
      assert.equal(g.id, p1.id);
      assert.equal(g.key, p1.key);
      assert.equal(g.destinationUrl, p1.destinationUrl);
      const byName = await mgmt.proxies.list({ name: prefix });
      assert.deepEqual(sortedIds(byName.data), [p1.id, p2.id].sort());
      assert.equal(byName.response.pagination.totalItems, 2);
      const byId = await mgmt.proxies.list({ id: p2.id });
      assert.deepEqual(sortedIds(byId.data), [p2.id]);
      const paged = await mgmt.proxies.list({ name: prefix, size: 1, page: 2 });
      assert.equal(paged.data.length, 1);
      assert.equal(paged.response.pagination.pageNumber, 2);
      assert.equal(paged.response.pagination.totalPages, 2);
    });

    test('proxies.update (PUT) keeps the key', async () => {
      const up = await mgmt.proxies.update(p1.id, {
        name: `${prefix}-auth-2`, destinationUrl: `${env.destinationUrl}/${SDK}`, requireAuth: true,
        configuration: { MODE: 'updated' },
      });
      assert.equal(up.name, `${prefix}-auth-2`);
      assert.equal(up.key, p1.key);
      assert.deepEqual(up.configuration, { MODE: 'updated' });
      assert.ok(up.modifiedAt instanceof Date);
    });

    test('proxies.patch (merge patch, 204)', async () => {
      const r = await mgmt.proxies.patch(p1.id, { name: `${prefix}-auth-3` });
      assert.equal(r, undefined);
      const g = await mgmt.proxies.get(p1.id);
      assert.equal(g.name, `${prefix}-auth-3`);
      assert.equal(g.destinationUrl, p1.destinationUrl);
      assert.deepEqual(g.configuration, { MODE: 'updated' });
    });

    test('proxy invocation detokenizes {{ token_id }} on the way to the destination', async () => {
      const r = await raw('POST', '/proxy/charge', {
        key: s.revealApp.key,
        query: { amount: '10' },
        headers: { 'BT-PROXY-KEY': p1.key, 'X-SDK': SDK },
        body: {
          number: `{{ ${s.card.id} | json: '$.number' }}`,
          card: `{{ ${s.card.id} }}`,
          text: `prefix {{ ${s.text.id} }} suffix`,
          plain: 'unchanged',
        },
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('bt-proxy-destination-status'), '200');
      const echo = r.json;
      assertEcho(echo);
      assert.equal(echo.method, 'POST');
      assert.equal(echo.path, `/${SDK}/charge`);
      assert.equal(echo.query, 'amount=10');
      assert.equal(echo.headers['x-sdk'], SDK);
      assertNoVaultHeaders(echo);
      assert.equal(echo.json.number, cardNumber);
      assert.equal(echo.json.card.number, cardNumber);
      assert.equal(echo.json.card.expiration_year, 2031);
      assert.match(echo.json.text, /^prefix sensitive-[0-9a-f]{8}-1234 suffix$/);
      assert.equal(echo.json.plain, 'unchanged');
    });

    test('proxy invocation with bt-proxy-key in the query and require_auth false', async () => {
      const r = await raw('GET', '/proxy/lookup', { query: { 'bt-proxy-key': p2.key, q: 'x' }, headers: { 'X-SDK': SDK } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.path, `/${SDK}-open/lookup`);
      assert.equal(r.json.query, 'q=x', 'bt-proxy-key is removed before forwarding');
    });

    test('proxy: destination status passes through, vault errors are proxy_error', async () => {
      const d = await raw('POST', '/proxy/status/402', { key: s.revealApp.key, headers: { 'BT-PROXY-KEY': p1.key }, body: { a: 1 } });
      assert.equal(d.status, 402);
      assert.equal(d.headers.get('bt-proxy-destination-status'), '402');
      const unknown = await raw('POST', '/proxy/x', { key: s.revealApp.key, headers: { 'BT-PROXY-KEY': p1.key }, body: { n: `{{ ${randomUUID()} }}` } });
      assert.equal(unknown.status, 400, unknown.text);
      assert.equal(unknown.headers.get('bt-proxy-destination-status'), null);
      assertProblem(unknown.json.proxy_error, 400, 'unknown token in a proxy body');
      const noAuth = await raw('POST', '/proxy/x', { headers: { 'BT-PROXY-KEY': p1.key }, body: { a: 1 } });
      assert.equal(noAuth.status, 401, noAuth.text);
      assertProblem(noAuth.json.proxy_error, 401, 'require_auth proxy without an API key');
    });

    test('ephemeral proxy with BT-PROXY-URL', async () => {
      const r = await raw('POST', '/proxy/pay', {
        key: s.revealApp.key,
        headers: { 'BT-PROXY-URL': `${env.destinationUrl}/${SDK}-ephemeral` },
        body: { number: `{{ ${s.card.id} | json: '$.number' }}` },
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.path, `/${SDK}-ephemeral/pay`);
      assert.equal(r.json.json.number, cardNumber);
      assertNoVaultHeaders(r.json);
    });

    test('proxies.delete', async () => {
      await mgmt.proxies.delete(p2.id);
      await rejects(mgmt.proxies.get(p2.id), checkError(BasisTheory.NotFoundError, 404, 'deleted proxy'));
      const r = await raw('GET', '/proxy/x', { query: { 'bt-proxy-key': p2.key } });
      assert.equal(r.status, 401, `a deleted proxy's key: ${r.status} ${r.text}`);
    });
  });

  describe('reactors', () => {
    let r;
    const prefix = unique('sdk-reactor');
    const code = `module.exports = async function (req) {
  return { raw: { args: req.args, configuration: req.configuration } };
};`;

    test('reactors.create', async () => {
      r = await mgmt.reactors.create({ name: `${prefix}-a`, code, configuration: { GREETING: 'hello' }, application: { id: s.revealApp.id } });
      assert.match(r.id, /^[0-9a-f-]{36}$/);
      assert.equal(r.name, `${prefix}-a`);
      assert.equal(r.code, code);
      assert.deepEqual(r.configuration, { GREETING: 'hello' });
      assert.equal(r.tenantId, s.tenant.id);
      assert.ok(r.createdAt instanceof Date);
      assert.equal(r.application?.id, s.revealApp.id, `the reactor's application as the SDK reads it (application.id); reactor: ${JSON.stringify(r)}`);
    });

    test('reactors.get and reactors.list', async () => {
      const g = await mgmt.reactors.get(r.id);
      assert.equal(g.id, r.id);
      assert.equal(g.code, code);
      const l = await mgmt.reactors.list({ name: prefix });
      assert.deepEqual(sortedIds(l.data), [r.id]);
      assert.equal(l.response.pagination.totalItems, 1);
      const byId = await mgmt.reactors.list({ id: r.id });
      assert.deepEqual(sortedIds(byId.data), [r.id]);
    });

    test('reactors.update (PUT) and reactors.patch (204)', async () => {
      const up = await mgmt.reactors.update(r.id, { name: `${prefix}-b`, code, configuration: { GREETING: 'hi' }, application: { id: s.revealApp.id } });
      assert.equal(up.name, `${prefix}-b`);
      assert.deepEqual(up.configuration, { GREETING: 'hi' });
      assert.ok(up.modifiedAt instanceof Date);
      const p = await mgmt.reactors.patch(r.id, { configuration: { GREETING: 'patched' } });
      assert.equal(p, undefined);
      const g = await mgmt.reactors.get(r.id);
      assert.equal(g.name, `${prefix}-b`);
      assert.deepEqual(g.configuration, { GREETING: 'patched' });
    });

    test('reactors.react detokenizes its args', async () => {
      const out = await s.reveal.reactors.react(r.id, {
        args: { number: `{{ ${s.card.id} | json: '$.number' }}`, n: 7, nested: { text: `{{ ${s.text.id} }}` } },
      });
      assert.equal(out.raw.args.number, cardNumber);
      assert.equal(out.raw.args.n, 7);
      assert.match(out.raw.args.nested.text, /^sensitive-[0-9a-f]{8}-1234$/);
      assert.deepEqual(out.raw.configuration, { GREETING: 'patched' });
      await rejects(s.mask.reactors.react(r.id, { args: {} }), checkError(BasisTheory.ForbiddenError, 403, 'react without reactor:invoke'));
    });

    test('reactors.react returning tokenize', async () => {
      const t = await mgmt.reactors.create({
        name: `${prefix}-tokenize`, application: { id: s.revealApp.id },
        code: `module.exports = async function (req) {
  return { raw: { ok: true }, tokenize: { saved: { type: 'token', data: req.args.value } } };
};`,
      });
      const out = await s.reveal.reactors.react(t.id, { args: { value: 'from-reactor' } });
      assert.deepEqual(out.raw, { ok: true });
      const id = out.tokens?.saved?.id;
      assert.match(id ?? '', /^[0-9a-f-]{36}$/, `tokens: ${JSON.stringify(out.tokens)}`);
      assert.equal((await s.reveal.tokens.get(id)).data, 'from-reactor');
      await mgmt.reactors.delete(t.id);
    });

    test('reactors.react: an error the code throws is the SDK\'s error class', async () => {
      const t = await mgmt.reactors.create({
        name: `${prefix}-throws`,
        code: `const { BadRequestError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
module.exports = async function (req) { throw new BadRequestError('amount is required'); };`,
      });
      const err = await rejects(s.reveal.reactors.react(t.id, { args: {} }), checkError(BasisTheory.BadRequestError, 400, 'reactor BadRequestError'));
      assert.match(JSON.stringify(err.body), /amount is required/);
      await mgmt.reactors.delete(t.id);
    });

    test('reactors.delete', async () => {
      await mgmt.reactors.delete(r.id);
      await rejects(mgmt.reactors.get(r.id), checkError(BasisTheory.NotFoundError, 404, 'deleted reactor'));
    });
  });

  describe('logs and usage', () => {
    test('logs.list filtered by entity', async () => {
      const p = await mgmt.logs.list({ entityType: 'token', entityId: s.card.id });
      assert.ok(p.data.length >= 2, `records: ${JSON.stringify(p.data)}`);
      for (const l of p.data) {
        assert.equal(l.entityType, 'token');
        assert.equal(l.entityId, s.card.id);
        assert.equal(l.tenantId, s.tenant.id);
        assert.ok(l.createdAt instanceof Date);
        assert.equal(typeof l.operation, 'string');
        assert.equal(typeof l.message, 'string');
      }
      const create = p.data.find((l) => l.operation === 'create');
      assert.ok(create, `no create record: ${p.data.map((l) => l.operation)}`);
      assert.equal(create.actorId, s.revealApp.id);
      assert.equal(create.actorType, 'application');
      const times = p.data.map((l) => l.createdAt.getTime());
      assert.deepEqual(times, [...times].sort((a, b) => b - a), 'newest first');
    });

    test('logs.list filtered by date', async () => {
      const future = await mgmt.logs.list({ entityId: s.card.id, startDate: new Date(Date.now() + 3600 * 1000) });
      assert.equal(future.data.length, 0);
      const past = await mgmt.logs.list({ entityId: s.card.id, endDate: new Date(s.card.createdAt.getTime() - 3600 * 1000) });
      assert.equal(past.data.length, 0);
      const around = await mgmt.logs.list({
        entityId: s.card.id, startDate: new Date(s.card.createdAt.getTime() - 60 * 1000), endDate: new Date(Date.now() + 60 * 1000),
      });
      assert.ok(around.data.length >= 2);
    });

    test('logs.list cursor pagination (start)', async () => {
      const a = await mgmt.logs.list({ entityType: 'token', size: 2 });
      assert.equal(a.data.length, 2);
      assert.equal(a.response.pagination.pageSize, 2);
      const next = a.response.pagination.next;
      assert.equal(typeof next, 'string', `pagination: ${JSON.stringify(a.response.pagination)}`);
      const b = await mgmt.logs.list({ entityType: 'token', size: 2, start: next });
      assert.equal(b.data.length, 2);
      const ids = new Set([...a.data, ...b.data].map((l) => l.id));
      assert.equal(ids.size, 4, 'the second page repeats records');
    });

    test('logs.list page iteration ends (the SDK pages logs with ?page=)', async () => {
      const p = await mgmt.logs.list({ entityId: s.card.id, size: 1 });
      const first = p.data.map((l) => l.id);
      await p.getNextPage();
      assert.ok(p.data.every((l) => !first.includes(l.id)),
        `GET /logs?entity_id=…&size=1&page=2 repeats page 1 (${first}); the SDK's iterator sends page=2,3,… and never ends`);
    });

    test('logs.getEntityTypes', async () => {
      const types = await mgmt.logs.getEntityTypes();
      const values = types.map((t) => t.value);
      for (const v of ['token', 'application', 'proxy', 'reactor', 'tenant']) assert.ok(values.includes(v), `entity types lack ${v}`);
      assert.equal(types.find((t) => t.value === 'token').displayName, 'Token');
    });

    test('tenants.self.getUsageReports', async () => {
      const u = await mgmt.tenants.self.getUsageReports();
      assert.equal(typeof u.totalTokens, 'number', `report: ${JSON.stringify(u)}`);
      assert.ok(u.totalTokens >= 6, `totalTokens ${u.totalTokens}`);
      const rep = u.token_report ?? u.tokenReport;
      assert.ok(rep, `no token_report: ${JSON.stringify(u)}`);
      assert.ok(rep.metrics_by_type.card.count >= 2);
      assert.ok(rep.metrics_by_type.bank.count >= 1);
      assert.ok(rep.monthly_active_tokens >= 1);
    });
  });

  describe('errors', () => {
    test('400 BadRequestError with validation errors', async () => {
      const err = await rejects(
        s.reveal.tokens.create({ type: 'card', data: { number: '4242424242424241', expiration_month: 12, expiration_year: 2030 } }),
        checkError(BasisTheory.BadRequestError, 400, 'invalid card'),
      );
      assert.equal(typeof err.body.errors, 'object', `errors: ${JSON.stringify(err.body)}`);
      const fields = Object.keys(err.body.errors);
      assert.ok(fields.some((f) => /number/.test(f)), `errors name no number field: ${fields}`);
      for (const f of fields) assert.ok(Array.isArray(err.body.errors[f]) && err.body.errors[f].length > 0);
      assert.ok(!JSON.stringify(err.body).includes('4242424242424241'), 'the error quotes the card number');
    });

    test('401 UnauthorizedError', async () => {
      const bad = client('key_test_' + 'x'.repeat(40));
      await rejects(bad.tokens.get(s.card.id), checkError(BasisTheory.UnauthorizedError, 401, 'invalid key'));
      await rejects(client(undefined).tenants.self.get(), checkError(BasisTheory.UnauthorizedError, 401, 'no key'));
    });

    test('403 ForbiddenError', async () => {
      await rejects(s.pub.tokens.get(s.card.id), checkError(BasisTheory.ForbiddenError, 403, 'public app reading'));
      await rejects(s.mask.tokens.delete(s.card.id), checkError(BasisTheory.ForbiddenError, 403, 'delete without token:delete'));
      await rejects(s.reveal.tenants.self.get(), checkError(BasisTheory.ForbiddenError, 403, 'private app reading the tenant'));
    });

    test('404 NotFoundError', async () => {
      await rejects(s.reveal.tokens.get(randomUUID()), checkError(BasisTheory.NotFoundError, 404, 'unknown token'));
      await rejects(mgmt.applications.get(randomUUID()), checkError(BasisTheory.NotFoundError, 404, 'unknown application'));
      await rejects(mgmt.proxies.get(randomUUID()), checkError(BasisTheory.NotFoundError, 404, 'unknown proxy'));
    });

    test('409 ConflictError on a duplicate token id', async () => {
      await rejects(
        s.reveal.tokens.create({ id: s.text.id, type: 'token', data: 'dup' }),
        checkError(BasisTheory.ConflictError, 409, 'duplicate id'),
      );
    });

    test('applicationKeys.get returns the key without its secret', async () => {
      const k = await mgmt.applicationKeys.get(s.revealApp.id, s.revealApp.keys[0].id);
      assert.equal(k.id, s.revealApp.keys[0].id);
      assert.equal(k.key, undefined);
    });

    test('methods the vault does not serve fail cleanly', async () => {
      const calls = {
        'tenants.members.list': () => mgmt.tenants.members.list(),
        'tenants.owner.get': () => mgmt.tenants.owner.get(),
      };
      for (const [name, call] of Object.entries(calls)) {
        await rejects(call(), (err) => {
          assert.ok(err instanceof BasisTheoryError, `${name}: ${err}`);
          assert.ok([404, 405].includes(err.statusCode), `${name}: status ${err.statusCode}`);
        });
      }
    });
  });

  describe('tenant deletion', () => {
    test('tenants.self.delete (disposable tenant)', { skip: !env.disposableManagementKey && 'TV_DISPOSABLE_MANAGEMENT_KEY is not set' }, async () => {
      const d = client(env.disposableManagementKey);
      const t = await d.tenants.self.get();
      assert.notEqual(t.id, s.tenant.id);
      await d.tenants.self.delete();
      await rejects(d.tenants.self.get(), checkError(BasisTheory.UnauthorizedError, 401, 'key of a deleted tenant'));
    });
  });
});
