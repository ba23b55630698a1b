// End-to-end: card and bank details, the card-details enrichment and token
// intents, through @basis-theory/node-sdk, unchanged, against Tokenvault.
//
// Run by caddymodule/caddy/sdk_e2e_test.go (TV_SDK=1 go test
// ./caddymodule/caddy/ -run TestNodeSDKs) with a tenant of its own, on a
// vault started with header_prefix BT and the BIN table
// node-sdk-details-intents.bins.csv (bin_table), which lists 42424242.
//
// Wire shapes taken from the SDK (dist/cjs/serialization): Token.card and
// CreateTokenIntentResponse.card are CardDetails {bin, last4,
// expiration_month, expiration_year, brand, funding, issuer {country, name},
// issuer_country {alpha2, name, numeric}, segment, product {code}};
// Token.bank is BankDetails {routing_number, account_number_last4};
// CreateTokenRequest.token_intent_id; enrichments.getcarddetails answers
// CardDetailsResponse {brand, funding, segment, issuer}.

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { BasisTheoryClient, BasisTheoryError } from '@basis-theory/node-sdk';
import { env, unique, routingNumber, rejects, assertProblem, assertRecent } from './helpers.mjs';

const visa = '4242424242424242';
const amex = '378282246310005';
const account = '000123456789';

function client(apiKey) {
  return new BasisTheoryClient({ apiKey, baseUrl: env.baseUrl, maxRetries: 0, timeoutInSeconds: 20 });
}
const mgmt = client(env.managementKey);

const s = { web: null, backend: null, masker: null, redactor: null };

// errorsOf returns the problem's errors member of an SDK error.
function errorsOf(err) {
  assert.ok(err instanceof BasisTheoryError, `not a BasisTheoryError: ${err}`);
  assert.equal(err.statusCode, 400, `status ${err.statusCode}: ${JSON.stringify(err.body)}`);
  assertProblem(err.body, 400, 'refusal');
  return err.body.errors || {};
}

describe('card details and token intents through @basis-theory/node-sdk', { concurrency: false }, () => {
  before(async () => {
    const web = await mgmt.applications.create({ name: unique('intents-web'), type: 'public', permissions: ['token-intent:create'] });
    const backend = await mgmt.applications.create({
      name: unique('intents-backend'), type: 'private',
      permissions: ['token:create', 'token:read', 'token:search', 'token-intent:read', 'token-intent:delete'],
    });
    const masker = await mgmt.applications.create({
      name: unique('details-mask'), type: 'private',
      rules: [{ description: 'mask', priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:read'] }],
    });
    const redactor = await mgmt.applications.create({
      name: unique('details-redact'), type: 'private',
      rules: [{ description: 'redact', priority: 1, container: '/', transform: 'redact', permissions: ['token:read'] }],
    });
    s.web = client(web.key);
    s.backend = client(backend.key);
    s.masker = client(masker.key);
    s.redactor = client(redactor.key);
  });

  test('permissions.list offers token-intent:create to public applications', async () => {
    const perms = (await mgmt.permissions.list({ applicationType: 'public' })).map((p) => p.type);
    assert.ok(perms.includes('token-intent:create'), JSON.stringify(perms));
    const priv = (await mgmt.permissions.list({ applicationType: 'private' })).map((p) => p.type);
    for (const p of ['token-intent:create', 'token-intent:read', 'token-intent:delete']) assert.ok(priv.includes(p), p);
  });

  test('tokens.create: a card carries card details, with the BIN table fields, to every reader', async () => {
    const tok = await s.masker.tokens.create({
      type: 'card', data: { number: visa, expiration_month: 11, expiration_year: 2031, cvc: '123' },
    });
    for (const reader of [s.masker, s.redactor]) {
      const got = await reader.tokens.get(tok.id);
      assert.equal(got.card.bin, '42424242');
      assert.equal(got.card.last4, '4242');
      assert.equal(got.card.expirationMonth, 11);
      assert.equal(got.card.expirationYear, 2031);
      assert.equal(got.card.brand, 'visa');
      assert.equal(got.card.funding, 'credit');
      assert.deepEqual(got.card.issuer, { country: 'US', name: 'Tokenvault Test Bank' });
      assert.deepEqual(got.card.issuerCountry, { alpha2: 'US', name: 'United States of America', numeric: '840' });
      assert.equal(got.card.segment, 'consumer');
      assert.equal(got.card.product.code, 'F');
      assert.ok(!JSON.stringify(got).includes(visa), 'a masked or redacted read shows the number');
    }
    const amexTok = await s.masker.tokens.create({ type: 'card', data: { number: amex } });
    assert.equal(amexTok.card.bin, '378282');
    assert.equal(amexTok.card.brand, 'american-express');
    assert.equal(amexTok.card.funding, undefined, 'a BIN the table does not list has no funding');
  });

  test('tokens.create: a bank account carries bank details', async () => {
    const tok = await s.masker.tokens.create({ type: 'bank', data: { routing_number: routingNumber, account_number: account } });
    const got = await s.redactor.tokens.get(tok.id);
    assert.deepEqual(got.bank, { routingNumber, accountNumberLast4: '6789' });
    assert.equal(got.data, undefined);
  });

  test('tokens.searchV2 finds cards by card.bin, card.last4 and card.brand', async () => {
    const page = await s.backend.tokens.searchV2({ query: 'card.bin:42424242 AND card.brand:visa AND card.last4:4242', size: 10 });
    const found = page.data;
    assert.ok(found.length >= 1, `nothing found: ${JSON.stringify(page)}`);
    for (const t of found) assert.equal(t.card.last4, '4242');
  });

  test('enrichments.getcarddetails answers a BIN, and 400 naming bin otherwise', async () => {
    const d = await s.web.enrichments.getcarddetails({ bin: '42424242' });
    assert.equal(d.brand, 'visa');
    assert.equal(d.funding, 'credit');
    assert.equal(d.segment, 'consumer');
    assert.deepEqual(d.issuer, { country: 'US', name: 'Tokenvault Test Bank' });
    const mc = await s.web.enrichments.getcarddetails({ bin: '222100' });
    assert.equal(mc.brand, 'mastercard');
    for (const bin of ['42424', '424242424', '4242x2']) {
      await rejects(s.web.enrichments.getcarddetails({ bin }), (err) => {
        assert.ok(errorsOf(err).bin, `bin ${bin}: ${JSON.stringify(err.body)}`);
      });
    }
  });

  test('tokenIntents.create by a public application, get, and tokens.create from it', async () => {
    const ti = await s.web.tokenIntents.create({
      type: 'card', data: { number: visa, expiration_month: 12, expiration_year: 2030, cvc: '123' },
    });
    assert.equal(ti.type, 'card');
    assert.ok(ti.id && ti.tenantId && ti.fingerprint && ti.createdBy, JSON.stringify(ti));
    assert.equal(ti.card.bin, '42424242');
    assert.equal(ti.card.last4, '4242');
    assert.equal(ti.card.brand, 'visa');
    assert.equal(ti.card.funding, 'credit');
    assert.equal(ti.data, undefined);
    assert.ok(!JSON.stringify(ti).includes(visa));
    assertRecent(ti.createdAt, 'created_at');
    assert.equal(ti.expiresAt.getTime() - ti.createdAt.getTime(), 24 * 3600 * 1000);

    const got = await s.backend.tokenIntents.get(ti.id);
    assert.equal(got.id, ti.id);
    assert.equal(got.fingerprint, ti.fingerprint);
    assert.equal(got.card.last4, '4242');

    const tok = await s.backend.tokens.create({ tokenIntentId: ti.id, metadata: { order: 'o-1' } });
    assert.equal(tok.type, 'card');
    assert.equal(tok.card.last4, '4242');
    assert.equal(tok.metadata.order, 'o-1');

    // the intent is consumed, and a second use says so
    await rejects(s.backend.tokenIntents.get(ti.id), (err) => {
      assert.ok(err instanceof BasisTheoryError);
      assert.equal(err.statusCode, 404);
    });
    await rejects(s.backend.tokens.create({ tokenIntentId: ti.id }), (err) => {
      assert.match(String(errorsOf(err).token_intent_id), /already used/);
    });
  });

  test('a token made from an intent has no CVC', async () => {
    const ti = await s.web.tokenIntents.create({ type: 'card', data: { number: visa, cvc: '987' } });
    const tok = await s.backend.tokens.create({ tokenIntentId: ti.id });
    const revealer = await mgmt.applications.create({
      name: unique('intents-reveal'), type: 'private',
      rules: [{ description: 'reveal', priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }],
    });
    const data = (await client(revealer.key).tokens.get(tok.id)).data;
    assert.equal(data.number, visa);
    assert.equal(data.cvc, undefined);
  });

  test('tokenIntents: refusals', async () => {
    await rejects(s.web.tokenIntents.create({ type: 'card', data: { number: '4242424242424241' } }), (err) => {
      assert.ok(errorsOf(err)['data.number']);
    });
    await rejects(s.web.tokenIntents.create({ type: 'cheque', data: 'x' }), (err) => {
      assert.ok(errorsOf(err).type);
    });
    const ti = await s.web.tokenIntents.create({ type: 'bank', data: { routing_number: routingNumber, account_number: account } });
    assert.deepEqual(ti.bank, { routingNumber, accountNumberLast4: '6789' });
    // a public application may create intents, not read or delete them
    await rejects(s.web.tokenIntents.get(ti.id), (err) => assert.equal(err.statusCode, 403));
    await rejects(s.web.tokenIntents.delete(ti.id), (err) => assert.equal(err.statusCode, 403));
    // data beside token_intent_id, another type, an unknown id
    await rejects(s.backend.tokens.create({ tokenIntentId: ti.id, type: 'bank', data: { routing_number: routingNumber, account_number: account } }),
      (err) => assert.ok(errorsOf(err).data));
    await rejects(s.backend.tokens.create({ tokenIntentId: ti.id, type: 'card' }), (err) => assert.ok(errorsOf(err).type));
    await rejects(s.backend.tokens.create({ tokenIntentId: '6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b' }), (err) => {
      assert.match(String(errorsOf(err).token_intent_id), /no token intent/);
    });
    // delete, then it is gone
    await s.backend.tokenIntents.delete(ti.id);
    await rejects(s.backend.tokenIntents.get(ti.id), (err) => assert.equal(err.statusCode, 404));
    await rejects(s.backend.tokens.create({ tokenIntentId: ti.id }), (err) => {
      assert.match(String(errorsOf(err).token_intent_id), /no token intent/);
    });
  });
});
