package vaultstore

// The token tests' harness: the secrets they submit, noSecretIn, which every
// store call's error goes through, and tokenWorld, a store with a fake clock,
// a tenant and applications by role.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// Card numbers, CVCs and bank accounts the token tests submit. Each is
// registered as a secret: no error any token test provokes may contain
// one (see noSecretIn).
const (
	testVisa       = "4242424242424242"
	testVisa2      = "4000056655665556"
	testMastercard = "5555555555554444"
	testAmex       = "378282246310005"
	testBadLuhn    = "4242424242424241"
	testCVC        = "9173"
	testCVC2       = "4821"
	testRouting    = "021000021"
	testRouting2   = "011000015"
	testAccount    = "98765432101234"
	testAccount2   = "12345678901"
)

// submittedSecrets holds every secret a token test has submitted.
var submittedSecrets = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func init() {
	for _, s := range []string{testVisa, testVisa2, testMastercard, testAmex, testBadLuhn, testCVC, testCVC2, testAccount, testAccount2} {
		submittedSecrets.m[s] = true
	}
}

// asSecret registers s as a secret and returns it. Strings shorter than
// four characters are too common to scan for and are not registered.
func asSecret(s string) string {
	if len(s) < 4 {
		return s
	}
	submittedSecrets.Lock()
	submittedSecrets.m[s] = true
	submittedSecrets.Unlock()
	return s
}

// noSecretIn checks that an error a token operation returned quotes no
// secret, in its text, its wrapped chain or any field name or message of
// a ValidationError, and returns it unchanged. Every store call of the
// token tests goes through it.
func noSecretIn(tb testing.TB, err error) error {
	tb.Helper()
	if err == nil {
		return nil
	}
	text := err.Error() + "\n" + fmt.Sprintf("%+v %#v", err, err)
	var v *ValidationError
	if errors.As(err, &v) {
		for f, msgs := range v.Fields {
			text += "\n" + f + ": " + strings.Join(msgs, "; ")
		}
	}
	submittedSecrets.Lock()
	defer submittedSecrets.Unlock()
	for s := range submittedSecrets.m {
		if strings.Contains(text, s) {
			// do not print the secret itself
			tb.Errorf("an error quotes a submitted secret (%d characters, ending %q): %s", len(s), s[len(s)-2:], strings.ReplaceAll(text, s, "<SECRET>"))
		}
	}
	return err
}

// luhnNumber returns prefix followed by zero-padded n and a Luhn check digit,
// length digits in all.
func luhnNumber(prefix string, n, length int) string {
	body := prefix + fmt.Sprintf("%0*d", length-1-len(prefix), n)
	for d := byte('0'); d <= '9'; d++ {
		if s := body + string(d); luhnValid(s) {
			return s
		}
	}
	panic("unreachable")
}

// cardData returns card data as the HTTP edge decodes it (numbers as
// json.Number), expiring 12/2030, with a cvc unless cvc is "".
func cardData(number, cvc string) map[string]any {
	asSecret(number)
	d := map[string]any{
		"number":           number,
		"expiration_month": json.Number("12"),
		"expiration_year":  json.Number("2030"),
	}
	if cvc != "" {
		d["cvc"] = asSecret(cvc)
	}
	return d
}

// bankData is a bank token's data.
func bankData(routing, account string) map[string]any {
	return map[string]any{"routing_number": routing, "account_number": asSecret(account)}
}

// decodeJSON decodes JSON as the HTTP edge does.
func decodeJSON(tb testing.TB, s string) any {
	tb.Helper()
	v, err := strictjson.DecodeValue([]byte(s), strictjson.DefaultLimits)
	if err != nil {
		tb.Fatalf("decoding %s: %v", s, err)
	}
	return v
}

// encodeJSON marshals v.
func encodeJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// jsonEqual reports whether got marshals like the JSON text want.
func jsonEqual(tb testing.TB, got any, want string) bool {
	tb.Helper()
	return encodeJSON(tb, got) == encodeJSON(tb, decodeJSON(tb, want))
}

var (
	crudPerms     = []string{"token:create", "token:read", "token:update", "token:delete"}
	allTokenPerms = []string{"token:create", "token:read", "token:update", "token:delete", "token:use", "token:search"}
)

// testRule is an access rule of the given priority, container, transform
// and permissions.
func testRule(prio int, container, transform string, perms ...string) AccessRule {
	return AccessRule{Priority: prio, Container: container, Transform: transform, Permissions: perms}
}

// testApps are the applications a token test can act as.
var testApps = map[string]ApplicationInput{
	// everything, revealed
	"admin": {Rules: []AccessRule{testRule(1, "/", TransformReveal, allTokenPerms...)}},
	// everything, masked / redacted
	"masker":   {Rules: []AccessRule{testRule(1, "/", TransformMask, crudPerms...)}},
	"redactor": {Rules: []AccessRule{testRule(1, "/", TransformRedact, crudPerms...)}},
	// PCI only, revealed; nothing elsewhere
	"pci": {Rules: []AccessRule{testRule(1, "/pci/", TransformReveal, crudPerms...)}},
	// a rule on a sub-container does not cover its parent
	"pcihigh": {Rules: []AccessRule{testRule(1, "/pci/high/", TransformReveal, crudPerms...)}},
	// one transform per container family
	"mixed": {Rules: []AccessRule{
		testRule(1, "/pci/", TransformMask, crudPerms...),
		testRule(2, "/general/", TransformReveal, crudPerms...),
		testRule(3, "/bank/", TransformRedact, crudPerms...),
	}},
	// lowest priority first
	"priority": {Rules: []AccessRule{
		testRule(3, "/", TransformMask, "token:read"),
		testRule(1, "/pci/high/", TransformRedact, "token:read"),
		testRule(2, "/pci/", TransformReveal, "token:read", "token:create"),
	}},
	// a covering rule without the permission does not decide
	"fallthrough": {Rules: []AccessRule{
		testRule(1, "/pci/", TransformReveal, "token:create"),
		testRule(2, "/", TransformMask, "token:read", "token:create"),
	}},
	// may create anywhere, read nothing
	"writer": {Rules: []AccessRule{testRule(1, "/", TransformReveal, "token:create")}},
	// update only under /general/
	"generalupdater": {Rules: []AccessRule{
		testRule(1, "/general/", TransformReveal, crudPerms...),
		testRule(2, "/pci/", TransformReveal, "token:create", "token:read"),
	}},
	// update only under /pci/
	"pciupdater": {Rules: []AccessRule{
		testRule(1, "/pci/", TransformReveal, crudPerms...),
		testRule(2, "/general/", TransformReveal, "token:create", "token:read"),
	}},
	// plain permissions, no rules
	"plain": {Permissions: []string{"token:create", "token:read", "token:update", "token:delete"}},
}

// tokenWorld is a store with one tenant and its applications.
type tokenWorld struct {
	tb     testing.TB
	ctx    context.Context
	s      *Store
	clock  *testclock.Clock
	dir    string
	tenant *Tenant
	apps   map[string]*Application
}

// newTokenWorld opens a fresh store with a fake clock and a tenant with the
// given settings.
func newTokenWorld(tb testing.TB, settings map[string]string) *tokenWorld {
	tb.Helper()
	clock := newFakeClock()
	dir := tb.TempDir()
	s := openTestStore(tb, Options{Dir: dir, Now: clock.Now})
	return newTokenWorldOn(tb, s, clock, dir, settings)
}

// newTokenWorldOn is newTokenWorld on a store the test opened itself, with
// its clock and storage directory.
func newTokenWorldOn(tb testing.TB, s *Store, clock *testclock.Clock, dir string, settings map[string]string) *tokenWorld {
	tb.Helper()
	ct := mustCreateTenant(tb, s, "Tokens", TenantTest)
	w := &tokenWorld{tb: tb, ctx: context.Background(), s: s, clock: clock, dir: dir, tenant: ct.Tenant, apps: map[string]*Application{}}
	if len(settings) > 0 {
		w.setSettings(settings)
	}
	return w
}

// at returns the world reporting to tb (a subtest).
func (w *tokenWorld) at(tb testing.TB) *tokenWorld {
	c := *w
	c.tb = tb
	return &c
}

func (w *tokenWorld) setSettings(settings map[string]string) {
	w.tb.Helper()
	t, err := w.s.UpdateTenant(w.ctx, w.tenant.ID, "actor", TenantUpdate{Name: w.tenant.Name, Settings: settings})
	if err != nil {
		w.tb.Fatalf("UpdateTenant: %v", err)
	}
	*w.tenant = *t
}

// app returns the named application of testApps, creating it on first use.
func (w *tokenWorld) app(name string) *Application {
	w.tb.Helper()
	if a := w.apps[name]; a != nil {
		return a
	}
	in, ok := testApps[name]
	if !ok {
		w.tb.Fatalf("no application spec %q", name)
	}
	in.Name, in.Type = name, AppPrivate
	a, _ := mustCreateApp(w.tb, w.s, w.tenant.ID, in)
	w.apps[name] = a
	return a
}

func (w *tokenWorld) req(app string) TokenRequest {
	return TokenRequest{Tenant: w.tenant, Application: w.app(app)}
}

func (w *tokenWorld) create(app string, in TokenInput) (*Token, error) {
	w.tb.Helper()
	tok, err := w.s.CreateToken(w.ctx, w.req(app), in)
	return tok, noSecretIn(w.tb, err)
}

func (w *tokenWorld) mustCreate(app string, in TokenInput) *Token {
	w.tb.Helper()
	tok, err := w.create(app, in)
	if err != nil {
		w.tb.Fatalf("CreateToken(%s, type %s): %v", app, in.Type, err)
	}
	return tok
}

func (w *tokenWorld) get(app, id string) (*Token, error) {
	w.tb.Helper()
	tok, err := w.s.GetToken(w.ctx, w.req(app), id)
	return tok, noSecretIn(w.tb, err)
}

func (w *tokenWorld) mustGet(app, id string) *Token {
	w.tb.Helper()
	tok, err := w.get(app, id)
	if err != nil {
		w.tb.Fatalf("GetToken(%s, %s): %v", app, id, err)
	}
	return tok
}

func (w *tokenWorld) list(app string, f TokenFilter, offset, limit int) ([]*Token, int, error) {
	w.tb.Helper()
	toks, total, err := w.s.ListTokens(w.ctx, w.req(app), f, offset, limit)
	return toks, total, noSecretIn(w.tb, err)
}

func (w *tokenWorld) mustList(app string, f TokenFilter, offset, limit int) ([]*Token, int) {
	w.tb.Helper()
	toks, total, err := w.list(app, f, offset, limit)
	if err != nil {
		w.tb.Fatalf("ListTokens(%s): %v", app, err)
	}
	return toks, total
}

// total is how many tokens the admin application can list.
func (w *tokenWorld) total() int {
	w.tb.Helper()
	_, n := w.mustList("admin", TokenFilter{}, 0, 100)
	return n
}

func (w *tokenWorld) update(app, id string, patch map[string]any) (*Token, error) {
	w.tb.Helper()
	tok, err := w.s.UpdateToken(w.ctx, w.req(app), id, patch)
	return tok, noSecretIn(w.tb, err)
}

func (w *tokenWorld) del(app, id string) error {
	w.tb.Helper()
	return noSecretIn(w.tb, w.s.DeleteToken(w.ctx, w.req(app), id))
}

func (w *tokenWorld) tokenize(app string, body any) (any, error) {
	w.tb.Helper()
	out, err := w.s.Tokenize(w.ctx, w.req(app), body)
	return out, noSecretIn(w.tb, err)
}

func (w *tokenWorld) usage() *UsageReport {
	w.tb.Helper()
	rep, err := w.s.Usage(w.ctx, w.tenant)
	if err != nil {
		w.tb.Fatalf("Usage: %v", err)
	}
	return rep
}

// record reads a token record as stored, expired or not.
func (w *tokenWorld) record(id string) (*tokenRecord, error) {
	var rec tokenRecord
	err := w.s.kv.View(w.ctx, func(r Reader) error {
		tk, err := w.s.tenantKeysFor(r, w.tenant.ID)
		if err != nil {
			return err
		}
		return w.s.getSealed(r, tk, "token", w.tenant.ID, id, tokenKey(w.tenant.ID, id), &rec)
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

func (w *tokenWorld) keys() *tenantKeys {
	w.tb.Helper()
	var tk *tenantKeys
	err := w.s.kv.View(w.ctx, func(r Reader) error {
		var err error
		tk, err = w.s.tenantKeysFor(r, w.tenant.ID)
		return err
	})
	if err != nil {
		w.tb.Fatal(err)
	}
	return tk
}

// indexEntries lists the kinds of KV entries that belong to token id:
// "tok", "tokc", "fpx", "six" and "exp" entries named by it, and "fpc"
// for a dedupe claim it holds. Monthly activity markers are history, not
// index entries, and are left out.
func (w *tokenWorld) indexEntries(id string) []string {
	w.tb.Helper()
	var kinds []string
	tp := string(tenantDataPrefix(w.tenant.ID))
	err := w.s.kv.View(w.ctx, func(r Reader) error {
		err := r.Scan(tenantDataPrefix(w.tenant.ID), nil, func(k, v []byte) error {
			key := string(k)
			kind, _, _ := strings.Cut(key[len(tp):], "/")
			switch {
			case kind == "mat":
			case kind == "fpc" && string(v) == id:
				kinds = append(kinds, "fpc")
			case strings.HasSuffix(key, "/"+id):
				kinds = append(kinds, kind)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return r.Scan(expiryPrefix(), nil, func(k, _ []byte) error {
			if strings.HasSuffix(string(k), "/"+w.tenant.ID+"/"+id) {
				kinds = append(kinds, "exp")
			}
			return nil
		})
	})
	if err != nil {
		w.tb.Fatal(err)
	}
	sort.Strings(kinds)
	return kinds
}

// idsOf returns the ids of tokens.
func idsOf(toks []*Token) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.ID
	}
	return out
}

// wantErrorIs fails unless errors.Is(err, target).
func wantErrorIs(tb testing.TB, err, target error) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Fatalf("error = %v, want %v", err, target)
	}
}

// wantFieldErrors fails unless err is a ValidationError on exactly want,
// and returns it.
func wantFieldErrors(tb testing.TB, err error, want ...string) *ValidationError {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want a ValidationError on %v", want)
	}
	got := validationFields(tb, err)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		tb.Fatalf("ValidationError fields = %v, want %v (%v)", got, want, err)
	}
	var v *ValidationError
	errors.As(err, &v)
	return v
}
