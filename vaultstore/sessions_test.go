package vaultstore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
)

// sessionWorld is a tenant with a public application (the browser), a
// private application that reveals every token (the back end) and two
// tokens.
type sessionWorld struct {
	s                *Store
	clock            *testclock.Clock
	tenant           *CreatedTenant
	public, private  *Principal
	privateApp       *Application
	tokenA, tokenB   string
	secretA, secretB string
}

func newSessionWorld(t *testing.T) *sessionWorld {
	t.Helper()
	ctx := context.Background()
	clock := testclock.New(time.Now().UTC().Truncate(time.Second))
	s := openTestStore(t, Options{Dir: t.TempDir(), Now: clock.Now})
	w := &sessionWorld{s: s, clock: clock, tenant: mustCreateTenant(t, s, "T", TenantTest)}
	_, pubKey := mustCreateApp(t, s, w.tenant.Tenant.ID, ApplicationInput{Name: "browser", Type: AppPublic, Permissions: []string{"token:create"}})
	var privKey *IssuedKey
	w.privateApp, privKey = mustCreateApp(t, s, w.tenant.Tenant.ID, ApplicationInput{Name: "backend", Type: AppPrivate, Rules: []AccessRule{
		{Priority: 1, Container: "/", Transform: TransformReveal, Permissions: []string{"token:create", "token:read", "token:use"}},
	}})
	var err error
	if w.public, err = s.Authenticate(ctx, pubKey.Key); err != nil {
		t.Fatal(err)
	}
	if w.private, err = s.Authenticate(ctx, privKey.Key); err != nil {
		t.Fatal(err)
	}
	w.secretA, w.secretB = "alpha-secret-value", "bravo-secret-value"
	for _, tc := range []struct {
		id   *string
		data string
	}{{&w.tokenA, w.secretA}, {&w.tokenB, w.secretB}} {
		tok, err := s.CreateToken(ctx, TokenRequest{Tenant: w.private.Tenant, Application: w.private.Application}, TokenInput{Type: "token", Data: tc.data})
		if err != nil {
			t.Fatal(err)
		}
		*tc.id = tok.ID
	}
	return w
}

// session creates a session and returns its key and nonce.
func (w *sessionWorld) session(t *testing.T) *CreatedSession {
	t.Helper()
	cs, err := w.s.CreateSession(context.Background(), w.public)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return cs
}

func (w *sessionWorld) as(t *testing.T, key string) *Principal {
	t.Helper()
	p, err := w.s.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatalf("Authenticate(session key): %v", err)
	}
	return p
}

func TestSessionGrantsExactlyTheAuthorizedToken(t *testing.T) {
	ctx := context.Background()
	w := newSessionWorld(t)
	cs := w.session(t)
	if !wellFormedSessionKey(cs.SessionKey) || !strings.HasPrefix(cs.SessionKey, "key_test_sess_") || len(cs.Nonce) != nonceLen {
		t.Fatalf("session key %q / nonce %q have the wrong shape", cs.SessionKey, cs.Nonce)
	}
	if got := cs.ExpiresAt.Sub(w.clock.Now()); got != DefaultSessionLifetime {
		t.Fatalf("expires in %v, want %v", got, DefaultSessionLifetime)
	}

	// before authorization the key authenticates but may do nothing
	p := w.as(t, cs.SessionKey)
	if p.Application.Can("token:read") || p.Application.Can("token:create") {
		t.Fatal("an unauthorized session holds rights")
	}
	if _, err := w.s.GetToken(ctx, TokenRequest{Tenant: p.Tenant, Application: p.Application}, w.tokenA); !errors.Is(err, ErrForbidden) {
		t.Fatalf("read before authorization: %v, want ErrForbidden", err)
	}

	err := w.s.AuthorizeSession(ctx, w.private, SessionAuthorization{Nonce: cs.Nonce, Rules: []SessionRule{{
		Priority: 1, Transform: TransformReveal, Permissions: []string{"token:read"},
		Conditions: []Condition{{Attribute: "id", Operator: "equals", Value: w.tokenA}},
	}}})
	if err != nil {
		t.Fatalf("AuthorizeSession: %v", err)
	}
	p = w.as(t, cs.SessionKey)
	req := TokenRequest{Tenant: p.Tenant, Application: p.Application}
	tok, err := w.s.GetToken(ctx, req, w.tokenA)
	if err != nil {
		t.Fatalf("read the granted token: %v", err)
	}
	if tok.Data != w.secretA {
		t.Fatalf("granted token data = %#v, want it revealed", tok.Data)
	}
	var pe *PermissionError
	if _, err := w.s.GetToken(ctx, req, w.tokenB); !errors.As(err, &pe) || pe.Permission != "token:read" {
		t.Fatalf("read another token: %v, want a PermissionError for token:read", err)
	}
	if _, err := w.s.CreateToken(ctx, req, TokenInput{Type: "token", Data: "x"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("create with a read-only session: %v, want ErrForbidden", err)
	}
	if p.Application.Can("token:create") || !p.Application.Can("token:read") {
		t.Fatal("Can does not follow the session's grant")
	}

	// audited as the session, naming its authorizer
	recs, _, err := w.s.ListAudit(ctx, w.tenant.Tenant.ID, AuditFilter{EntityType: "token", EntityID: w.tokenA, Operation: "read"}, "", 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit of the session's read: %v, %d records", err, len(recs))
	}
	if r := recs[0]; r.ActorType != ActorSession || r.ActorID != p.Application.ID || r.AuthorizedBy != w.privateApp.ID {
		t.Fatalf("audit record = %+v, want actor session %s authorized by %s", r, p.Application.ID, w.privateApp.ID)
	}
	recs, _, err = w.s.ListAudit(ctx, w.tenant.Tenant.ID, AuditFilter{EntityType: "session", Operation: "authorize"}, "", 10)
	if err != nil || len(recs) != 1 || recs[0].ActorID != w.privateApp.ID {
		t.Fatalf("audit of the authorization: %v, %+v", err, recs)
	}
}

func TestSessionNeverExceedsItsAuthorizer(t *testing.T) {
	ctx := context.Background()
	w := newSessionWorld(t)

	// a mask-only authorizer cannot hand out reveal: the session reads masked
	_, maskKey := mustCreateApp(t, w.s, w.tenant.Tenant.ID, ApplicationInput{Name: "masker", Type: AppPrivate, Rules: []AccessRule{
		{Priority: 1, Container: "/", Transform: TransformRedact, Permissions: []string{"token:read"}},
	}})
	masker := w.as(t, maskKey.Key)
	cs := w.session(t)
	if err := w.s.AuthorizeSession(ctx, masker, SessionAuthorization{Nonce: cs.Nonce, Rules: []SessionRule{{
		Priority: 1, Transform: TransformReveal, Permissions: []string{"token:read"},
		Conditions: []Condition{{Attribute: "id", Operator: "starts_with", Value: w.tokenA[:8]}},
	}}}); err != nil {
		t.Fatal(err)
	}
	p := w.as(t, cs.SessionKey)
	tok, err := w.s.GetToken(ctx, TokenRequest{Tenant: p.Tenant, Application: p.Application}, w.tokenA)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Data != nil {
		t.Fatalf("session of a redacting authorizer read data %#v", tok.Data)
	}

	// granting what the authorizer lacks is refused, naming the permission
	for _, in := range []SessionAuthorization{
		{Nonce: w.session(t).Nonce, Permissions: []string{"token:delete"}},
		{Nonce: w.session(t).Nonce, Rules: []SessionRule{{Priority: 1, Transform: TransformMask, Permissions: []string{"token:use"}, Conditions: []Condition{{Attribute: "id", Operator: "equals", Value: w.tokenA}}}}},
	} {
		var pe *PermissionError
		if err := w.s.AuthorizeSession(ctx, masker, in); !errors.As(err, &pe) || !errors.Is(err, ErrForbidden) {
			t.Fatalf("AuthorizeSession beyond the authorizer: %v, want a PermissionError", err)
		}
	}

	// the authorizer losing a right takes it from the session at once
	cs = w.session(t)
	if err := w.s.AuthorizeSession(ctx, w.private, SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}}); err != nil {
		t.Fatal(err)
	}
	p = w.as(t, cs.SessionKey)
	if _, err := w.s.GetToken(ctx, TokenRequest{Tenant: p.Tenant, Application: p.Application}, w.tokenB); err != nil {
		t.Fatalf("read with token:read: %v", err)
	}
	if _, err := w.s.UpdateApplication(ctx, w.tenant.Tenant.ID, w.privateApp.ID, "actor", ApplicationInput{Name: "backend", Rules: []AccessRule{
		{Priority: 1, Container: "/", Transform: TransformReveal, Permissions: []string{"token:create"}},
	}}); err != nil {
		t.Fatal(err)
	}
	p = w.as(t, cs.SessionKey)
	if _, err := w.s.GetToken(ctx, TokenRequest{Tenant: p.Tenant, Application: p.Application}, w.tokenB); !errors.Is(err, ErrForbidden) {
		t.Fatalf("read after the authorizer lost token:read: %v, want ErrForbidden", err)
	}
	if p.Application.Can("token:read") {
		t.Fatal("Can reports a permission the authorizer no longer holds")
	}
	// and deleting the authorizer ends the session
	if err := w.s.DeleteApplication(ctx, w.tenant.Tenant.ID, w.privateApp.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Authenticate(ctx, cs.SessionKey); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("session of a deleted authorizer: %v, want ErrUnauthenticated", err)
	}
}

func TestSessionExpires(t *testing.T) {
	ctx := context.Background()
	w := newSessionWorld(t)
	cs := w.session(t)
	if err := w.s.AuthorizeSession(ctx, w.private, SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(DefaultSessionLifetime - time.Second)
	w.as(t, cs.SessionKey)
	w.clock.Advance(time.Second)
	if _, err := w.s.Authenticate(ctx, cs.SessionKey); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("expired session: %v, want ErrUnauthenticated", err)
	}

	// an authorization may set its own expiry, within an hour of creation
	cs = w.session(t)
	at := w.clock.Now().Add(10 * time.Minute).Format(time.RFC3339)
	if err := w.s.AuthorizeSession(ctx, w.private, SessionAuthorization{Nonce: cs.Nonce, ExpiresAt: at, Permissions: []string{"token:read"}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(9 * time.Minute)
	w.as(t, cs.SessionKey)
	w.clock.Advance(2 * time.Minute)
	if _, err := w.s.Authenticate(ctx, cs.SessionKey); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("session past its authorized expiry: %v, want ErrUnauthenticated", err)
	}
	// a nonce whose session expired is unknown
	cs = w.session(t)
	w.clock.Advance(DefaultSessionLifetime)
	if err := w.s.AuthorizeSession(ctx, w.private, SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("authorize an expired session: %v, want ErrNotFound", err)
	}
}

func TestSessionRefusals(t *testing.T) {
	ctx := context.Background()
	w := newSessionWorld(t)
	other := mustCreateTenant(t, w.s, "O", TenantTest)
	_, otherKey := mustCreateApp(t, w.s, other.Tenant.ID, privateApp("other"))
	otherPriv := w.as(t, otherKey.Key)
	mgmt, err := w.s.Authenticate(ctx, w.tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	cs := w.session(t)
	sess := w.as(t, cs.SessionKey)

	if _, err := w.s.CreateSession(ctx, w.private); !errors.Is(err, ErrForbidden) {
		t.Errorf("private application creates a session: %v, want ErrForbidden", err)
	}
	if _, err := w.s.CreateSession(ctx, sess); !errors.Is(err, ErrForbidden) {
		t.Errorf("session creates a session: %v, want ErrForbidden", err)
	}
	ok := SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}}
	for name, tc := range map[string]struct {
		by   *Principal
		in   SessionAuthorization
		want error
	}{
		"public authorizer":           {w.public, ok, ErrForbidden},
		"session authorizer":          {sess, ok, ErrForbidden},
		"unknown nonce":               {w.private, SessionAuthorization{Nonce: "nope", Permissions: []string{"token:read"}}, ErrNotFound},
		"nonce of another tenant":     {otherPriv, ok, ErrNotFound},
		"management lacks token:read": {mgmt, ok, ErrForbidden},
	} {
		if err := w.s.AuthorizeSession(ctx, tc.by, tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	for name, tc := range map[string]struct {
		in    SessionAuthorization
		field string
	}{
		"no nonce":           {SessionAuthorization{Permissions: []string{"token:read"}}, "nonce"},
		"nothing granted":    {SessionAuthorization{Nonce: cs.Nonce}, "permissions"},
		"unknown perm":       {SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:fly"}}, "permissions[0]"},
		"management perm":    {SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read", "application:create"}}, "permissions[1]"},
		"both":               {SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}, Rules: []SessionRule{{Priority: 1, Container: "/", Transform: "mask", Permissions: []string{"token:read"}}}}, "rules"},
		"bad attribute":      {SessionAuthorization{Nonce: cs.Nonce, Rules: []SessionRule{{Priority: 1, Transform: "mask", Permissions: []string{"token:read"}, Conditions: []Condition{{Attribute: "data", Operator: "equals", Value: "x"}}}}}, "rules[0].conditions[0].attribute"},
		"bad operator":       {SessionAuthorization{Nonce: cs.Nonce, Rules: []SessionRule{{Priority: 1, Transform: "mask", Permissions: []string{"token:read"}, Conditions: []Condition{{Attribute: "id", Operator: "matches", Value: "x"}}}}}, "rules[0].conditions[0].operator"},
		"no scope":           {SessionAuthorization{Nonce: cs.Nonce, Rules: []SessionRule{{Priority: 1, Transform: "mask", Permissions: []string{"token:read"}}}}, "rules[0].conditions"},
		"bad transform":      {SessionAuthorization{Nonce: cs.Nonce, Rules: []SessionRule{{Priority: 1, Container: "/", Transform: "show", Permissions: []string{"token:read"}}}}, "rules[0].transform"},
		"expiry in the past": {SessionAuthorization{Nonce: cs.Nonce, ExpiresAt: w.clock.Now().Add(-time.Minute).Format(time.RFC3339), Permissions: []string{"token:read"}}, "expires_at"},
		"expiry too late":    {SessionAuthorization{Nonce: cs.Nonce, ExpiresAt: w.clock.Now().Add(2 * time.Hour).Format(time.RFC3339), Permissions: []string{"token:read"}}, "expires_at"},
	} {
		err := w.s.AuthorizeSession(ctx, w.private, tc.in)
		if got := validationFields(t, err); len(got) == 0 || !strings.Contains(strings.Join(got, ","), tc.field) {
			t.Errorf("%s: fields %v, want %s", name, got, tc.field)
		}
	}
	if err := w.s.AuthorizeSession(ctx, w.private, ok); err != nil {
		t.Fatal(err)
	}
	if err := w.s.AuthorizeSession(ctx, w.private, ok); !errors.Is(err, ErrConflict) {
		t.Errorf("second authorization: %v, want ErrConflict", err)
	}
	// the key with its last character changed (a random key ends in x
	// one time in 62, so x alone would sometimes change nothing)
	last := "x"
	if strings.HasSuffix(cs.SessionKey, last) {
		last = "y"
	}
	for _, bad := range []string{cs.SessionKey[:len(cs.SessionKey)-1] + last, "key_test_sess_short", strings.Replace(cs.SessionKey, "key_test", "key_prod", 1)} {
		if _, err := w.s.Authenticate(ctx, bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate(%q): %v, want ErrUnauthenticated", bad, err)
		}
	}
}

func TestSessionSecretsStoredOnlyHashed(t *testing.T) {
	w := newSessionWorld(t)
	cs := w.session(t)
	if err := w.s.AuthorizeSession(context.Background(), w.private, SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}}); err != nil {
		t.Fatal(err)
	}
	err := w.s.kv.View(context.Background(), func(r Reader) error {
		return r.Scan([]byte(keyVersion), nil, func(k, v []byte) error {
			for _, secret := range []string{cs.SessionKey, cs.Nonce} {
				if bytes.Contains(k, []byte(secret)) || bytes.Contains(v, []byte(secret)) {
					t.Errorf("stored entry %q holds a session secret", k)
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys := kvKeys(t, w.s, keyVersion+"sesskey/"+keyDigest(cs.SessionKey)); len(keys) != 1 {
		t.Fatalf("session key index entries: %v", keys)
	}
}

// BenchmarkAuthenticateSession measures resolving an authorized session
// key, cached as an API key's principal is (until the session expires or
// its tenant or authorizer changes); compare BenchmarkAuthenticate.
func BenchmarkAuthenticateSession(b *testing.B) {
	ctx := context.Background()
	s := openTestStore(b, Options{Dir: b.TempDir(), SyncWrites: false})
	ct := mustCreateTenant(b, s, "Bench", TenantTest)
	_, pubKey := mustCreateApp(b, s, ct.Tenant.ID, ApplicationInput{Name: "pub", Type: AppPublic, Permissions: []string{"token:create"}})
	_, privKey := mustCreateApp(b, s, ct.Tenant.ID, privateApp("priv"))
	pub, err := s.Authenticate(ctx, pubKey.Key)
	if err != nil {
		b.Fatal(err)
	}
	priv, err := s.Authenticate(ctx, privKey.Key)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := s.CreateSession(ctx, pub)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.AuthorizeSession(ctx, priv, SessionAuthorization{Nonce: cs.Nonce, Permissions: []string{"token:read"}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := s.Authenticate(ctx, cs.SessionKey)
		if err != nil || !p.Application.Can("token:read") {
			b.Fatalf("Authenticate = %v, %v", p, err)
		}
	}
}
