package vaultstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// tokenIntentWorld is a token world with the applications intents need: a public
// application that creates intents, and a private back end that reads,
// deletes and converts them.
type tokenIntentWorld struct {
	*tokenWorld
	public, backend, reader *Application
}

func newTokenIntentWorld(tb testing.TB, o Options) *tokenIntentWorld {
	tb.Helper()
	clock := newFakeClock()
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	o.Now = clock.Now
	s := openTestStore(tb, o)
	w := &tokenIntentWorld{tokenWorld: newTokenWorldOn(tb, s, clock, o.Dir, nil)}
	w.public, _ = mustCreateApp(tb, s, w.tenant.ID, ApplicationInput{Name: "web", Type: AppPublic,
		Permissions: []string{"token-intent:create"}})
	w.backend, _ = mustCreateApp(tb, s, w.tenant.ID, ApplicationInput{Name: "backend", Type: AppPrivate,
		Permissions: []string{"token:create", "token:read", "token:use", "token-intent:read", "token-intent:delete"}})
	w.reader, _ = mustCreateApp(tb, s, w.tenant.ID, ApplicationInput{Name: "reader", Type: AppPrivate,
		Permissions: []string{"token:read"}})
	return w
}

func (w *tokenIntentWorld) as(app *Application) TokenRequest {
	return TokenRequest{Tenant: w.tenant, Application: app}
}

func (w *tokenIntentWorld) mustIntent(in TokenIntentInput) *TokenIntent {
	w.tb.Helper()
	ti, err := w.s.CreateTokenIntent(w.ctx, w.as(w.public), in)
	if err != nil {
		w.tb.Fatalf("CreateTokenIntent: %v", noSecretIn(w.tb, err))
	}
	return ti
}

// TestCreateTokenIntent: an intent answers its details and fingerprint,
// never its data, lives 24 hours, and is sealed.
func TestCreateTokenIntent(t *testing.T) {
	w := newTokenIntentWorld(t, Options{})
	now := w.clock.Peek()
	ti := w.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, testCVC)})
	if ti.ID == "" || ti.Type != "card" || ti.TenantID != w.tenant.ID || ti.CreatedBy != w.public.ID || ti.Fingerprint == "" {
		t.Errorf("intent = %s", encodeJSON(t, ti))
	}
	if got := encodeJSON(t, ti.Card); got != `{"bin":"42424242","last4":"4242","expiration_month":12,"expiration_year":2030,"brand":"visa"}` {
		t.Errorf("card = %s", got)
	}
	if ti.ExpiresAt == nil || ti.CreatedAt == nil || ti.ExpiresAt.Sub(ti.CreatedAt.Time) != TokenIntentTTL || ti.CreatedAt.Before(now) {
		t.Errorf("created %v, expires %v", ti.CreatedAt, ti.ExpiresAt)
	}
	raw := encodeJSON(t, ti)
	if strings.Contains(raw, testVisa) || strings.Contains(raw, testCVC) || strings.Contains(raw, `"data"`) {
		t.Errorf("the answer holds data: %s", raw)
	}
	for _, v := range kvValues(t, w.s, "v1/t/"+w.tenant.ID+"/") {
		if strings.Contains(v, testVisa) || strings.Contains(v, "42424242") {
			t.Fatal("a stored value holds the card in clear")
		}
	}
	// the fingerprint is the one a token of the same card gets
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), FingerprintExpression: "{{ data.number }}"})
	if tok.Fingerprint != ti.Fingerprint {
		t.Errorf("intent fingerprint %s, token fingerprint %s", ti.Fingerprint, tok.Fingerprint)
	}
	bank := w.mustIntent(TokenIntentInput{Type: "bank", Data: bankData(testRouting, testAccount)})
	if got := encodeJSON(t, bank.Bank); got != `{"routing_number":"021000021","account_number_last4":"1234"}` || bank.Card != nil {
		t.Errorf("bank intent = %s", encodeJSON(t, bank))
	}
	general := w.mustIntent(TokenIntentInput{Type: "token", Data: map[string]any{"ssn": "123-45-6789"}})
	if general.Card != nil || general.Bank != nil || general.Fingerprint == "" {
		t.Errorf("general intent = %s", encodeJSON(t, general))
	}
}

// TestCreateTokenIntentRefusals: data is validated like a token's, and
// only an application with token-intent:create may create intents.
func TestCreateTokenIntentRefusals(t *testing.T) {
	w := newTokenIntentWorld(t, Options{})
	for _, tc := range []struct {
		name   string
		in     TokenIntentInput
		fields []string
	}{
		{"no type", TokenIntentInput{Data: cardData(testVisa, "")}, []string{"type"}},
		{"unknown type", TokenIntentInput{Type: "cheque", Data: "x"}, []string{"type"}},
		{"no data", TokenIntentInput{Type: "card"}, []string{"data"}},
		{"bad luhn", TokenIntentInput{Type: "card", Data: cardData(testBadLuhn, "")}, []string{"data.number"}},
		{"bad cvc", TokenIntentInput{Type: "card", Data: map[string]any{"number": testVisa, "cvc": "12"}}, []string{"data.cvc"}},
		{"unknown member", TokenIntentInput{Type: "card", Data: map[string]any{"number": testVisa, "pin": "1234"}}, []string{"data.pin"}},
		{"bad routing", TokenIntentInput{Type: "bank", Data: bankData("021000022", testAccount)}, []string{"data.routing_number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.s.CreateTokenIntent(w.ctx, w.as(w.public), tc.in)
			wantFieldErrors(t, noSecretIn(t, err), tc.fields...)
		})
	}
	_, err := w.s.CreateTokenIntent(w.ctx, w.as(w.reader), TokenIntentInput{Type: "card", Data: cardData(testVisa, "")})
	var pe *PermissionError
	if !errors.As(err, &pe) || pe.Permission != "token-intent:create" {
		t.Errorf("without the permission: %v", err)
	}
	if n := len(kvKeys(t, w.s, "v1/t/"+w.tenant.ID+"/intent/")); n != 0 {
		t.Errorf("%d intents stored after refusals", n)
	}
}

// TestTokenFromIntent: a token made from an intent has its type and data
// but no CVC, takes the request's other fields, and consumes the intent.
func TestTokenFromIntent(t *testing.T) {
	w := newTokenIntentWorld(t, Options{})
	ti := w.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, testCVC)})
	tok, err := w.s.CreateToken(w.ctx, w.as(w.backend), TokenInput{TokenIntentID: ti.ID, Metadata: Metadata{"customer": "c1"}})
	if err != nil {
		t.Fatal(noSecretIn(t, err))
	}
	if tok.Type != "card" || tok.Metadata["customer"] != "c1" || tok.Card == nil || tok.Card.Last4 != "4242" {
		t.Errorf("token = %s", encodeJSON(t, tok))
	}
	got := w.mustGet("admin", tok.ID) // revealed
	data := got.Data.(map[string]any)
	if data["number"] != testVisa || data["cvc"] != nil {
		t.Errorf("revealed data: number ok %v, cvc %v", data["number"] == testVisa, data["cvc"] != nil)
	}
	// consumed: gone to readers, and a second use is told so
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), ti.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get a used intent: %v", err)
	}
	_, err = w.s.CreateToken(w.ctx, w.as(w.backend), TokenInput{TokenIntentID: ti.ID})
	wantFieldMessage(t, err, "token_intent_id", msgIntentConsumed)
	if err := w.s.DeleteTokenIntent(w.ctx, w.as(w.backend), ti.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete a used intent: %v", err)
	}
	// the used mark holds no data
	for _, v := range kvValues(t, w.s, "v1/t/"+w.tenant.ID+"/intent/") {
		if strings.Contains(v, testVisa) {
			t.Fatal("the used intent holds the card")
		}
	}
	var rec *tokenIntentRecord
	_ = w.s.kv.View(w.ctx, func(r Reader) error {
		tk, err := w.s.tenantKeysFor(r, w.tenant.ID)
		if err == nil {
			rec, err = w.s.loadIntent(r, tk, w.tenant.ID, ti.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if rec.Data != nil || rec.Card != nil || rec.ConsumedAt == nil {
		t.Errorf("used intent record: %s", encodeJSON(t, rec))
	}
}

func wantFieldMessage(tb testing.TB, err error, field, msg string) {
	tb.Helper()
	var v *ValidationError
	if !errors.As(noSecretIn(tb, err), &v) {
		tb.Fatalf("error %v, want a ValidationError on %s", err, field)
	}
	if got := v.Fields[field]; len(v.Fields) != 1 || len(got) != 1 || got[0] != msg {
		tb.Fatalf("fields %v, want %s: %s", v.Fields, field, msg)
	}
}

// TestTokenFromIntentRefusals: every way a token_intent_id cannot be used
// is a 400 naming the field, and changes nothing.
func TestTokenFromIntentRefusals(t *testing.T) {
	w := newTokenIntentWorld(t, Options{})
	other := newTokenIntentWorld(t, Options{})
	foreign := other.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, "")})
	live := w.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, "")})
	for _, tc := range []struct {
		name, field, msg string
		in               TokenInput
	}{
		{"unknown id", "token_intent_id", msgIntentUnknown, TokenInput{TokenIntentID: "3f0c1a52-9a1e-4c55-8a57-5d8d6c1b2f00"}},
		{"not a uuid", "token_intent_id", msgIntentUnknown, TokenInput{TokenIntentID: "../tok/x"}},
		{"another tenant's", "token_intent_id", msgIntentUnknown, TokenInput{TokenIntentID: foreign.ID}},
		{"data beside it", "data", "give either data or token_intent_id, not both", TokenInput{TokenIntentID: live.ID, Data: "x"}},
		{"another type", "type", "type must be the token intent's type (card), or left out", TokenInput{TokenIntentID: live.ID, Type: "bank"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.s.CreateToken(w.ctx, w.as(w.backend), tc.in)
			wantFieldMessage(t, err, tc.field, tc.msg)
		})
	}
	// the refusals consumed nothing
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), live.ID); err != nil {
		t.Errorf("the intent after refusals: %v", err)
	}
	// a caller without token:create on the container consumes nothing
	writer, _ := mustCreateApp(t, w.s, w.tenant.ID, ApplicationInput{Name: "generalonly", Type: AppPrivate,
		Rules: []AccessRule{testRule(1, "/general/", TransformReveal, "token:create")}})
	if _, err := w.s.CreateToken(w.ctx, w.as(writer), TokenInput{TokenIntentID: live.ID}); !errors.Is(err, ErrForbidden) {
		t.Errorf("without token:create on /pci/: %v", err)
	}
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), live.ID); err != nil {
		t.Errorf("the intent after a forbidden create: %v", err)
	}
	// /tokenize does not take intents
	_, err := w.s.Tokenize(w.ctx, w.as(w.backend), map[string]any{"type": "card", "data": cardData(testVisa, ""), "token_intent_id": live.ID})
	if err == nil {
		t.Error("tokenize took a token_intent_id")
	}
	// the type, when given, may be the intent's own
	if _, err := w.s.CreateToken(w.ctx, w.as(w.backend), TokenInput{TokenIntentID: live.ID, Type: "card"}); err != nil {
		t.Errorf("with the intent's type: %v", noSecretIn(t, err))
	}
}

// TestTokenIntentExpiry: an intent is gone to readers once expired and
// cannot be used, with a message that says so.
func TestTokenIntentExpiry(t *testing.T) {
	w := newTokenIntentWorld(t, Options{})
	ti := w.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, "")})
	w.clock.Advance(TokenIntentTTL - time.Minute)
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), ti.ID); err != nil {
		t.Fatalf("a minute before expiry: %v", err)
	}
	w.clock.Advance(time.Minute)
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), ti.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get once expired: %v", err)
	}
	if err := w.s.DeleteTokenIntent(w.ctx, w.as(w.backend), ti.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete once expired: %v", err)
	}
	_, err := w.s.CreateToken(w.ctx, w.as(w.backend), TokenInput{TokenIntentID: ti.ID})
	wantFieldMessage(t, err, "token_intent_id", msgIntentExpired)
}

// ttlKV records the time to live of every intent record written.
type ttlKV struct {
	KV
	mu   sync.Mutex
	ttls map[string]time.Duration
}

func (k *ttlKV) Update(ctx context.Context, fn func(Writer) error) error {
	return k.KV.Update(ctx, func(w Writer) error { return fn(ttlWriter{w, k}) })
}

func (k *ttlKV) Unwrap() KV { return k.KV }

type ttlWriter struct {
	Writer
	k *ttlKV
}

func (w ttlWriter) Put(key, value []byte, ttl time.Duration) error {
	if strings.Contains(string(key), "/intent/") {
		w.k.mu.Lock()
		w.k.ttls[string(key)] = ttl
		w.k.mu.Unlock()
	}
	return w.Writer.Put(key, value, ttl)
}

func (k *ttlKV) ttl(key string) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ttls[key]
}

// TestTokenIntentPurgedByEngine: an intent is written with the engine's
// time to live, so the engine purges it at expiry (its used mark too),
// and a data key rotation re-seals it keeping what is left of its life.
func TestTokenIntentPurgedByEngine(t *testing.T) {
	k := &ttlKV{ttls: map[string]time.Duration{}}
	w := newTokenIntentWorld(t, Options{WrapKV: func(inner KV) KV { k.KV = inner; return k }})
	ti := w.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, "")})
	key := string(tokenIntentKey(w.tenant.ID, ti.ID))
	if got := k.ttl(key); got <= TokenIntentTTL-time.Second || got > TokenIntentTTL {
		t.Errorf("intent written with ttl %v, want about %v", got, TokenIntentTTL)
	}
	w.clock.Advance(10 * time.Hour)
	if _, err := w.s.RotateDataKey(w.ctx, w.tenant.ID); err != nil {
		t.Fatal(err)
	}
	waitReseal(t, w.s, w.tenant.ID)
	if got := k.ttl(key); got <= 14*time.Hour-time.Minute || got > 14*time.Hour {
		t.Errorf("re-sealed with ttl %v, want about 14h", got)
	}
	assertAllSealedUnder(t, w.s, w.tenant.ID, 2)
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), ti.ID); err != nil {
		t.Errorf("after the re-seal: %v", err)
	}
	w.clock.Advance(4 * time.Hour)
	if _, err := w.s.CreateToken(w.ctx, w.as(w.backend), TokenInput{TokenIntentID: ti.ID}); err != nil {
		t.Fatal(noSecretIn(t, err))
	}
	if got := k.ttl(key); got <= 10*time.Hour-time.Minute || got > 10*time.Hour {
		t.Errorf("used mark written with ttl %v, want about 10h", got)
	}
}

// TestTokenIntentEngineExpiry: on the real clock, the engine itself stops
// answering an intent record once its time to live has passed.
func TestTokenIntentEngineExpiry(t *testing.T) {
	s := openTestStore(t, Options{Dir: t.TempDir()})
	ct := mustCreateTenant(t, s, "Intents", TenantTest)
	id := "7b0d1c4e-2f3a-4b5c-8d6e-9f0a1b2c3d4e"
	err := s.kv.Update(context.Background(), func(w Writer) error {
		tk, err := s.tenantKeysFor(w, ct.Tenant.ID)
		if err != nil {
			return err
		}
		now := time.Now()
		rec := &tokenIntentRecord{TokenIntent: TokenIntent{ID: id, TenantID: ct.Tenant.ID, Type: "token",
			CreatedAt: stamp(now), ExpiresAt: stamp(now.Add(1500 * time.Millisecond))}, Data: "x"}
		return s.putIntent(w, tk, rec, now)
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(kvKeys(t, s, "v1/t/"+ct.Tenant.ID+"/intent/")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine still answers the intent record a minute after its time to live")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTokenIntentReadDeleteAudit: reads and deletes need their
// permissions, stay in the tenant, and every operation is audited
// without data.
func TestTokenIntentReadDeleteAudit(t *testing.T) {
	w := newTokenIntentWorld(t, Options{})
	other := newTokenIntentWorld(t, Options{})
	ti := w.mustIntent(TokenIntentInput{Type: "card", Data: cardData(testVisa, testCVC)})
	got, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), ti.ID)
	if err != nil {
		t.Fatal(err)
	}
	if encodeJSON(t, got) != encodeJSON(t, ti) {
		t.Errorf("get = %s, create answered %s", encodeJSON(t, got), encodeJSON(t, ti))
	}
	var pe *PermissionError
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.reader), ti.ID); !errors.As(err, &pe) || pe.Permission != "token-intent:read" {
		t.Errorf("get without token-intent:read: %v", err)
	}
	if err := w.s.DeleteTokenIntent(w.ctx, w.as(w.public), ti.ID); !errors.As(err, &pe) || pe.Permission != "token-intent:delete" {
		t.Errorf("delete without token-intent:delete: %v", err)
	}
	otherReq := TokenRequest{Tenant: other.tenant, Application: other.backend}
	if _, err := other.s.GetTokenIntent(other.ctx, otherReq, ti.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's get: %v", err)
	}
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), "not-an-id"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get of a malformed id: %v", err)
	}
	if err := w.s.DeleteTokenIntent(w.ctx, w.as(w.backend), ti.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.GetTokenIntent(w.ctx, w.as(w.backend), ti.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	_, err = w.s.CreateToken(w.ctx, w.as(w.backend), TokenInput{TokenIntentID: ti.ID})
	wantFieldMessage(t, err, "token_intent_id", msgIntentUnknown)
	logs, _, err := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{EntityType: tokenIntentKind}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, l := range logs {
		if l.EntityID != ti.ID {
			t.Errorf("audit record names %q", l.EntityID)
		}
		ops[l.Operation]++
		if raw := encodeJSON(t, l); strings.Contains(raw, testVisa) || strings.Contains(raw, "42424242") || strings.Contains(raw, testCVC) {
			t.Errorf("audit record holds data: %s", raw)
		}
	}
	if ops["create"] != 1 || ops["read"] != 1 || ops["delete"] != 1 {
		t.Errorf("audit operations %v, want one create, read and delete", ops)
	}
}
