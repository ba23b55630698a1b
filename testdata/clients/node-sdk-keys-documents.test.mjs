// End-to-end: client-side encryption keys (keys.*, and tokens.create /
// tokenIntents.create with `encrypted`) and documents (documents.*,
// documents.data.get) through @basis-theory/node-sdk, unchanged, against
// Tokenvault. Run by caddymodule/caddy/sdk_e2e_test.go with the
// environment node-sdk.test.mjs describes.
//
// The JWE is made here as the vendor's Elements make it (ECDH-ES on the
// X25519 key the PEM holds as raw bytes, Concat KDF, A256GCM, kid the key
// id) with node:crypto only; the Go end-to-end test
// (caddymodule/caddy/jwe_documents_e2e_test.go) encrypts with a JOSE
// library.

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
  createHash, createPublicKey, createCipheriv, diffieHellman, generateKeyPairSync, randomBytes,
} from 'node:crypto';
import { BasisTheoryClient, BasisTheory, BasisTheoryError } from '@basis-theory/node-sdk';
import { env, unique, rejects, assertProblem, assertRecent } from './helpers.mjs';

const visa = '4242424242424242';

function client(apiKey) {
  return new BasisTheoryClient({ apiKey, baseUrl: env.baseUrl, maxRetries: 0, timeoutInSeconds: 30 });
}
const mgmt = client(env.managementKey);
const s = { backend: null, web: null, viewer: null, key: null };

const b64url = (b) => Buffer.from(b).toString('base64url');
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
const prefixed = (b) => Buffer.concat([u32(b.length), b]);

// encryptJWE is a compact JWE of payload to the key in pem, as Elements
// encrypt: {alg: ECDH-ES, enc: A256GCM, kid, epk: X25519}.
function encryptJWE(pem, kid, payload) {
  const raw = Buffer.from(pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64');
  assert.equal(raw.length, 32, 'the PEM holds the raw 32 bytes of an X25519 key, not SPKI');
  const server = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: b64url(raw) }, format: 'jwk' });
  const eph = generateKeyPairSync('x25519');
  const z = diffieHellman({ privateKey: eph.privateKey, publicKey: server });
  const otherInfo = Buffer.concat([prefixed(Buffer.from('A256GCM')), prefixed(Buffer.alloc(0)), prefixed(Buffer.alloc(0)), u32(256)]);
  const cek = createHash('sha256').update(Buffer.concat([u32(1), z, otherInfo])).digest();
  const epk = eph.publicKey.export({ format: 'jwk' });
  const header = b64url(JSON.stringify({ alg: 'ECDH-ES', enc: 'A256GCM', kid, epk: { kty: 'OKP', crv: 'X25519', x: epk.x } }));
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', cek, iv);
  cipher.setAAD(Buffer.from(header, 'ascii'));
  const ct = Buffer.concat([cipher.update(Buffer.from(payload)), cipher.final()]);
  return [header, '', b64url(iv), b64url(ct), b64url(cipher.getAuthTag())].join('.');
}

function refusedOn(field) {
  return (err) => {
    assert.ok(err instanceof BasisTheory.BadRequestError, `not a BadRequestError: ${err}`);
    assertProblem(err.body, 400, 'refusal');
    assert.deepEqual(err.body.errors?.[field], ['could not be decrypted'], JSON.stringify(err.body));
  };
}

describe('client encryption keys and documents through @basis-theory/node-sdk', { concurrency: false }, () => {
  before(async () => {
    const backend = await mgmt.applications.create({
      name: unique('keys-docs-backend'), type: 'private',
      permissions: ['token:create', 'token:read', 'documents:create', 'documents:read', 'documents:reveal', 'documents:delete'],
    });
    const web = await mgmt.applications.create({ name: unique('keys-docs-web'), type: 'public', permissions: ['token-intent:create'] });
    const viewer = await mgmt.applications.create({ name: unique('docs-viewer'), type: 'private', permissions: ['documents:read'] });
    s.backend = client(backend.key);
    s.web = client(web.key);
    s.viewer = client(viewer.key);
  });

  test('keys.create, keys.get, keys.list: the public key once, then metadata only', async () => {
    const expiresAt = new Date(Date.now() + 30 * 24 * 3600 * 1000);
    const key = await mgmt.keys.create({ expiresAt });
    assert.ok(key.keyId, JSON.stringify(key));
    assert.match(key.publicKeyPem, /^-----BEGIN PUBLIC KEY-----\n[A-Za-z0-9+/=]{44}\n-----END PUBLIC KEY-----\n?$/);
    assert.ok(Math.abs(key.expiresAt.getTime() - expiresAt.getTime()) < 1000, `${key.expiresAt} vs ${expiresAt}`);
    s.key = key;
    const got = await mgmt.keys.get(key.keyId);
    assert.equal(got.keyId, key.keyId);
    assert.equal(got.publicKeyPem, undefined);
    assertRecent(new Date(got.expiresAt.getTime() - 30 * 24 * 3600 * 1000), 'expires_at - 30 days');
    const list = await mgmt.keys.list();
    assert.ok(list.some((k) => k.keyId === key.keyId), JSON.stringify(list));
    assert.ok(list.every((k) => k.publicKeyPem === undefined));
  });

  test('tokens.create with encrypted data: decrypted, validated and stored', async () => {
    const data = JSON.stringify({ number: visa, expiration_month: 10, expiration_year: 2031, cvc: '123' });
    const tok = await s.backend.tokens.create({ type: 'card', encrypted: encryptJWE(s.key.publicKeyPem, s.key.keyId, data) });
    assert.equal(tok.card?.last4, '4242', JSON.stringify(tok));
    assert.ok(!JSON.stringify(tok).includes(visa));
    const bad = JSON.stringify({ number: '4242424242424241', expiration_month: 10, expiration_year: 2031 });
    await rejects(s.backend.tokens.create({ type: 'card', encrypted: encryptJWE(s.key.publicKeyPem, s.key.keyId, bad) }), (err) => {
      assert.ok(err instanceof BasisTheory.BadRequestError, `${err}`);
      assert.ok(err.body.errors['data.number'], JSON.stringify(err.body));
    });
  });

  test('tokenIntents.create with encrypted data from a public application', async () => {
    const data = JSON.stringify({ number: visa, expiration_month: 10, expiration_year: 2031 });
    const intent = await s.web.tokenIntents.create({ type: 'card', encrypted: encryptJWE(s.key.publicKeyPem, s.key.keyId, data) });
    assert.equal(intent.card?.last4, '4242', JSON.stringify(intent));
  });

  test('encrypted data that does not open is refused, naming encrypted and nothing else', async () => {
    const good = encryptJWE(s.key.publicKeyPem, s.key.keyId, '"x"');
    const parts = good.split('.');
    const flip = (i) => { const b = Buffer.from(parts[i], 'base64url'); b[0] ^= 1; const p = [...parts]; p[i] = b64url(b); return p.join('.'); };
    const header = (h) => [b64url(JSON.stringify(h)), '', parts[2], parts[3], parts[4]].join('.');
    const other = await mgmt.keys.create({});
    const cases = {
      'tampered ciphertext': flip(3),
      'tampered tag': flip(4),
      'unknown kid': encryptJWE(s.key.publicKeyPem, '5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c', '"x"'),
      'kid of another key': encryptJWE(s.key.publicKeyPem, other.keyId, '"x"'),
      'alg none': header({ alg: 'none', enc: 'A256GCM', kid: s.key.keyId }),
      'alg RSA1_5': header({ alg: 'RSA1_5', enc: 'A256GCM', kid: s.key.keyId }),
      'alg dir': header({ alg: 'dir', enc: 'A256GCM', kid: s.key.keyId }),
    };
    for (const [name, jwe] of Object.entries(cases)) {
      await rejects(s.backend.tokens.create({ type: 'token', encrypted: jwe }), refusedOn('encrypted'));
      await rejects(s.web.tokenIntents.create({ type: 'token', encrypted: jwe }), refusedOn('encrypted'), name);
    }
  });

  test('keys.delete: the key is gone, and so is what it decrypted', async () => {
    const key = await mgmt.keys.create({});
    const jwe = encryptJWE(key.publicKeyPem, key.keyId, '"secret"');
    await mgmt.keys.delete(key.keyId);
    await rejects(mgmt.keys.get(key.keyId), (err) => {
      assert.ok(err instanceof BasisTheory.NotFoundError, `${err}`);
    });
    await rejects(s.backend.tokens.create({ type: 'token', encrypted: jwe }), refusedOn('encrypted'));
    await rejects(s.backend.keys.list(), (err) => {
      assert.ok(err instanceof BasisTheory.ForbiddenError, `a private application lists keys: ${err}`);
    });
  });

  test('documents.upload, get, data.get and delete', async () => {
    const content = randomBytes(200 * 1024);
    const doc = await s.backend.documents.upload({
      document: new Blob([content], { type: 'application/pdf' }),
      request: { metadata: { kind: 'mandate' } },
    });
    assert.ok(doc.id, JSON.stringify(doc));
    assert.equal(doc.contentType, 'application/pdf');
    assert.deepEqual(doc.metadata, { kind: 'mandate' });
    assertRecent(doc.createdAt, 'created_at');
    const meta = await s.viewer.documents.get(doc.id);
    assert.equal(meta.id, doc.id);
    const data = await s.backend.documents.data.get(doc.id);
    assert.ok(Buffer.from(await data.arrayBuffer()).equals(content), 'the downloaded content differs');
    await rejects(s.viewer.documents.data.get(doc.id), (err) => {
      assert.ok(err instanceof BasisTheory.ForbiddenError, `download without documents:reveal: ${err}`);
    });
    await s.backend.documents.delete(doc.id);
    await rejects(s.backend.documents.get(doc.id), (err) => {
      assert.ok(err instanceof BasisTheory.NotFoundError, `${err}`);
    });
    await rejects(s.backend.documents.data.get(doc.id), (err) => {
      assert.ok(err instanceof BasisTheoryError && err.statusCode === 404, `${err}`);
    });
  });
});
