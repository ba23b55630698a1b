// Shared by the SDK end-to-end tests (node-sdk.test.mjs,
// basis-theory-js.test.mjs): the environment, a few test values, and
// plain-fetch helpers for the calls an SDK has no method for.
//
// Environment (set by caddymodule/caddy/sdk_e2e_test.go):
//   TV_BASE_URL                   the vault's API, e.g. http://localhost:8080
//                                 (basis-theory-js forces https for every host
//                                 but `localhost`, so use localhost)
//   TV_MANAGEMENT_KEY             key of the tenant's management application
//   TV_DESTINATION_URL            an echo server reachable by the vault's
//                                 proxies (see echoShape below)
//   TV_DISPOSABLE_MANAGEMENT_KEY  optional: management key of a second tenant
//                                 that the suite may delete (tenants.self.delete)

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

function need(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run these tests through caddymodule/caddy/sdk_e2e_test.go (TV_SDK=1 go test ./caddymodule/caddy/ -run TestNodeSDKs) or set it yourself`);
  }
  return v;
}

export const env = {
  baseUrl: need('TV_BASE_URL').replace(/\/$/, ''),
  managementKey: need('TV_MANAGEMENT_KEY'),
  destinationUrl: need('TV_DESTINATION_URL').replace(/\/$/, ''),
  disposableManagementKey: process.env.TV_DISPOSABLE_MANAGEMENT_KEY || '',
};

// unique returns a name no other run or test file uses.
export function unique(prefix) {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

// Luhn-valid test card numbers, one per SDK, so the destination's record
// tells which SDK's proxy call detokenized.
export const cards = {
  'node-sdk': '4242424242424242',
  'basis-theory-js': '5555555555554444',
};
// An ABA-valid routing number.
export const routingNumber = '021000021';

// Every permission of a private application's access rules.
export const privateTokenPermissions = [
  'token:create', 'token:read', 'token:update', 'token:delete', 'token:search', 'token:use',
];

// The echo destination answers every request with 200 (or with NNN on
// /status/NNN) and the JSON
//   {method, path, query, headers: {lower-case name: value}, body, json}
// where body is the raw request body and json its parse (null if not JSON).
export function assertEcho(echo) {
  assert.equal(typeof echo, 'object', `destination answer is not an object: ${JSON.stringify(echo)}`);
  for (const k of ['method', 'path', 'query', 'headers', 'body']) {
    assert.ok(k in echo, `destination answer lacks ${k}: ${JSON.stringify(echo)}`);
  }
}

// The vault's own headers must never reach a destination.
export function assertNoVaultHeaders(echo) {
  for (const name of Object.keys(echo.headers)) {
    assert.ok(!name.toLowerCase().startsWith('bt-'), `the destination received the vault header ${name}`);
  }
}

// raw sends one request with fetch; key goes in BT-API-KEY.
export async function raw(method, path, { key, headers = {}, body, query } = {}) {
  const url = new URL(env.baseUrl + path);
  for (const [k, v] of Object.entries(query || {})) url.searchParams.append(k, v);
  const h = { ...headers };
  if (key) h['BT-API-KEY'] = key;
  let payload;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    if (!Object.keys(h).some((n) => n.toLowerCase() === 'content-type')) h['Content-Type'] = 'application/json';
  }
  const res = await fetch(url, { method, headers: h, body: payload, signal: AbortSignal.timeout(15000) });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

// rejects awaits p, which must reject, checks the error with check and
// returns it.
export async function rejects(p, check) {
  let err;
  try {
    const v = await p;
    assert.fail(`expected a rejection, got ${JSON.stringify(v)?.slice(0, 500)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    err = e;
  }
  if (check) check(err);
  return err;
}

// assertProblem checks an RFC 7807 body of the status.
export function assertProblem(body, status, what) {
  assert.equal(typeof body, 'object', `${what}: problem body is not an object: ${JSON.stringify(body)}`);
  assert.equal(body.status, status, `${what}: problem status: ${JSON.stringify(body)}`);
  assert.equal(typeof body.title, 'string', `${what}: problem without title: ${JSON.stringify(body)}`);
  assert.ok(body.title.length > 0, `${what}: empty problem title`);
  assert.equal(typeof body.type, 'string', `${what}: problem without type: ${JSON.stringify(body)}`);
}

// assertRecent checks that a Date (or date string) is a valid time within
// slackMs of now.
export function assertRecent(d, what, slackMs = 5 * 60 * 1000) {
  const t = d instanceof Date ? d.getTime() : Date.parse(d);
  assert.ok(Number.isFinite(t), `${what}: not a date: ${d}`);
  assert.ok(Math.abs(Date.now() - t) < slackMs, `${what}: ${new Date(t).toISOString()} is not near now`);
}
