// End-to-end: sessions, asynchronous reactors, roles and application
// templates through @basis-theory/node-sdk, unchanged, against Tokenvault.
// Run by caddymodule/caddy/sdk_e2e_test.go with the rest of the suite (see
// helpers.mjs for the environment).

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { BasisTheoryClient, BasisTheory, BasisTheoryError } from '@basis-theory/node-sdk';
import { env, unique, privateTokenPermissions, rejects, assertProblem, assertRecent } from './helpers.mjs';

function client(apiKey) {
  return new BasisTheoryClient({ apiKey, baseUrl: env.baseUrl, maxRetries: 0, timeoutInSeconds: 20 });
}
const mgmt = client(env.managementKey);

function checkError(Cls, status, what) {
  return (err) => {
    assert.ok(err instanceof BasisTheoryError, `${what}: not a BasisTheoryError: ${err?.stack || err}`);
    assert.ok(err instanceof Cls, `${what}: ${err.constructor.name} (status ${err.statusCode}), want ${Cls.name}; body ${JSON.stringify(err.body)}`);
    assert.equal(err.statusCode, status, `${what}: statusCode`);
    assertProblem(err.body, status, what);
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('sessions, async reactors, roles and templates through @basis-theory/node-sdk', { concurrency: false }, () => {
  const s = {};
  before(async () => {
    s.backendApp = await mgmt.applications.create({
      name: unique('sdk-sess-backend'), type: 'private',
      rules: [{ description: 'reveal everything', priority: 1, container: '/', transform: 'reveal', permissions: [...privateTokenPermissions, 'reactor:invoke'] }],
    });
    s.pubApp = await mgmt.applications.create({ name: unique('sdk-sess-browser'), type: 'public', permissions: ['token:create'] });
    s.backend = client(s.backendApp.key);
    s.pub = client(s.pubApp.key);
    s.tokenA = (await s.backend.tokens.create({ type: 'token', data: 'sdk-session-visible' })).id;
    s.tokenB = (await s.backend.tokens.create({ type: 'token', data: 'sdk-session-hidden' })).id;
  });

  test('sessions.create, then sessions.authorize with a rule on one token id', async () => {
    const sess = await s.pub.sessions.create();
    assert.match(sess.sessionKey, /^key_test_sess_/);
    assert.ok(sess.nonce.length >= 16, `nonce ${sess.nonce}`);
    assert.ok(sess.expiresAt instanceof Date, `expiresAt ${sess.expiresAt}`);
    assertRecent(sess.expiresAt, 'session expiry', 4 * 60 * 1000);
    const browser = client(sess.sessionKey);
    await rejects(browser.tokens.get(s.tokenA), checkError(BasisTheory.ForbiddenError, 403, 'read before authorization'));

    await s.backend.sessions.authorize({
      nonce: sess.nonce,
      rules: [{ description: 'one token', priority: 1, transform: 'reveal', permissions: ['token:read'], conditions: [{ attribute: 'id', operator: 'equals', value: s.tokenA }] }],
    });
    const t = await browser.tokens.get(s.tokenA);
    assert.equal(t.data, 'sdk-session-visible');
    await rejects(browser.tokens.get(s.tokenB), checkError(BasisTheory.ForbiddenError, 403, 'read another token'));
    await rejects(browser.tokens.create({ type: 'token', data: 'x' }), checkError(BasisTheory.ForbiddenError, 403, 'create with a read-only session'));
    await rejects(s.backend.sessions.authorize({ nonce: sess.nonce, permissions: ['token:read'] }), checkError(BasisTheory.ConflictError, 409, 'authorize twice'));
  });

  test('sessions refusals', async () => {
    await rejects(mgmt.sessions.create(), checkError(BasisTheory.ForbiddenError, 403, 'a management key creates a session'));
    await rejects(s.backend.sessions.authorize({ nonce: 'no-such-nonce', permissions: ['token:read'] }), (err) => {
      assert.ok(err instanceof BasisTheory.NotFoundError, `unknown nonce: ${err}`);
      assert.equal(err.statusCode, 404);
    });
    const sess = await s.pub.sessions.create();
    const reader = client((await mgmt.applications.create({ name: unique('sdk-sess-reader'), type: 'private', permissions: ['token:read'] })).key);
    await rejects(reader.sessions.authorize({ nonce: sess.nonce, permissions: ['token:use'] }), checkError(BasisTheory.ForbiddenError, 403, 'grant beyond the authorizer'));
    await rejects(s.backend.sessions.authorize({ nonce: sess.nonce, permissions: ['tenant:read'] }), checkError(BasisTheory.BadRequestError, 400, 'a management permission for a session'));
    await rejects(s.pub.sessions.authorize({ nonce: sess.nonce, permissions: ['token:create'] }), checkError(BasisTheory.ForbiddenError, 403, 'a public key authorizes'));
    await rejects(s.backend.sessions.authorize({ nonce: sess.nonce }), checkError(BasisTheory.BadRequestError, 400, 'nothing granted'));
  });

  test('a session key stops working when the session expires (401)', async () => {
    const sess = await s.pub.sessions.create();
    await s.backend.sessions.authorize({ nonce: sess.nonce, permissions: ['token:read'], expiresAt: new Date(Date.now() + 20000).toISOString() });
    const browser = client(sess.sessionKey);
    await browser.tokens.get(s.tokenA);
    const deadline = Date.now() + 60000;
    for (;;) {
      try {
        await browser.tokens.get(s.tokenA);
      } catch (err) {
        checkError(BasisTheory.UnauthorizedError, 401, 'expired session')(err);
        break;
      }
      assert.ok(Date.now() < deadline, 'the session still works 60 s after its expiry was due');
      await sleep(500);
    }
  });

  test('reactors.reactAsync answers asyncReactorRequestId; reactors.results.get the outcome', async () => {
    const code = `module.exports = async function (req) {
  if (req.args.fail) throw new Error('asked to fail');
  return { raw: { got: req.args.secret } };
};`;
    const r = await mgmt.reactors.create({ name: unique('sdk-async'), code });
    const { asyncReactorRequestId: ok } = await s.backend.reactors.reactAsync(r.id, { args: { secret: `{{ ${s.tokenA} }}` } });
    assert.match(ok, /^[0-9a-f-]{36}$/);
    const { asyncReactorRequestId: failing } = await s.backend.reactors.reactAsync(r.id, { args: { fail: true } });
    const settle = async (id) => {
      const deadline = Date.now() + 60000;
      for (;;) {
        const res = await s.backend.reactors.results.get(r.id, id);
        if (res.status === 'completed' || res.status === 'failed') return res;
        assert.ok(['pending', 'running'].includes(res.status), `status ${JSON.stringify(res)}`);
        assert.ok(Date.now() < deadline, `reaction ${id} did not run within 60 s: ${JSON.stringify(res)}`);
        await sleep(200);
      }
    };
    const done = await settle(ok);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.raw, { got: 'sdk-session-visible' });
    const failed = await settle(failing);
    assert.equal(failed.status, 'failed', JSON.stringify(failed));
    assert.equal(failed.error_status, 500, JSON.stringify(failed));
    assertProblem(failed.error, 500, 'failed reaction');

    await rejects(s.backend.reactors.results.get(r.id, '5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c'), (err) => {
      assert.ok(err instanceof BasisTheory.NotFoundError, `unknown request: ${err}`);
    });
    await rejects(client(s.pubApp.key).reactors.reactAsync(r.id, { args: {} }), checkError(BasisTheory.ForbiddenError, 403, 'react-async without reactor:invoke'));
  });

  test('roles.list, applicationTemplates.list and .get, and an application made from a template', async () => {
    const roles = await mgmt.roles.list();
    assert.ok(roles.some((r) => r.name === 'ADMIN'), JSON.stringify(roles));
    const templates = await mgmt.applicationTemplates.list();
    assert.ok(templates.length >= 5, JSON.stringify(templates));
    const front = templates.find((t) => t.applicationType === 'public');
    assert.ok(front && front.isStarter !== undefined && front.templateType, JSON.stringify(templates));
    const card = templates.find((t) => t.templateType === 'payments' && t.rules?.length);
    const got = await mgmt.applicationTemplates.get(card.id);
    assert.deepEqual(got, card);
    // as the vendor's CLI does: the template's type, permissions and rules
    const app = await mgmt.applications.create({ name: unique(got.name), type: got.applicationType, permissions: got.permissions, rules: got.rules });
    assert.equal(app.type, got.applicationType);
    assert.equal(app.rules.length, got.rules.length);
    assert.equal(app.rules[0].container, got.rules[0].container);
    await rejects(mgmt.applicationTemplates.get('5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c'), (err) => {
      assert.ok(err instanceof BasisTheory.NotFoundError, `unknown template: ${err}`);
    });
  });
});
