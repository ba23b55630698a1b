package vaultstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/tokenvault/tokenvault/internal/testclock"
)

// hostnameWorld is a store with two tenants: A with proxies p1 and p2, B with q1.
type hostnameWorld struct {
	s      *Store
	clock  *testclock.Clock
	a, b   *CreatedTenant
	p1, p2 *Proxy
	q1     *Proxy
}

func newHostnameWorld(tb testing.TB) *hostnameWorld {
	tb.Helper()
	s, clock := newTestStore(tb)
	w := &hostnameWorld{s: s, clock: clock}
	w.a = mustCreateTenant(tb, s, "A", TenantTest)
	w.b = mustCreateTenant(tb, s, "B", TenantTest)
	w.p1 = mustCreateProxy(tb, s, w.a.Tenant.ID, proxyInput("p1"))
	w.p2 = mustCreateProxy(tb, s, w.a.Tenant.ID, proxyInput("p2"))
	w.q1 = mustCreateProxy(tb, s, w.b.Tenant.ID, proxyInput("q1"))
	return w
}

func (w *hostnameWorld) mustRegister(tb testing.TB, tenantID, proxyID, name string) *Hostname {
	tb.Helper()
	h, err := w.s.RegisterHostname(context.Background(), tenantID, proxyID, name)
	if err != nil {
		tb.Fatalf("RegisterHostname(%q): %v", name, err)
	}
	return h
}

// hostnameNames returns the names of hostnames.
func hostnameNames(hs []*Hostname) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.Hostname)
	}
	return out
}

// rawHostnames lists the KV entries of a hostname: its global entry and every
// tenant-side entry.
func rawHostnames(tb testing.TB, s *Store, tenantID, name string) []string {
	tb.Helper()
	return append(kvKeys(tb, s, string(hostnameKey(name))), kvKeys(tb, s, string(tenantHostnameKey(tenantID, name)))...)
}

// A name of exactly n characters made of valid labels.
func hostnameOfLength(n int) string {
	var labels []string
	for n > 0 {
		l := min(63, n)
		if n-l == 1 { // a one-character remainder would need a dot of its own
			l--
		}
		labels = append(labels, strings.Repeat(string(rune('a'+len(labels))), l))
		n -= l
		if n > 0 {
			n-- // the dot
		}
	}
	return strings.Join(labels, ".")
}

func TestRegisterHostnameValidation(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	tid := w.a.Tenant.ID
	auditBefore := len(allAuditRecords(t, w.s, tid))
	if n := len(hostnameOfLength(253)); n != 253 {
		t.Fatalf("hostnameOfLength(253) has %d characters", n)
	}
	for _, tc := range []struct {
		name, host string
	}{
		{"empty", ""},
		{"IPv4 address", "192.0.2.10"},
		{"IPv6 address", "2001:db8::1"},
		{"bracketed IPv6 address", "[2001:db8::1]"},
		{"single label", "localhost"},
		{"trailing dot", "pay.example.com."},
		{"leading dot", ".pay.example.com"},
		{"empty label", "pay..example.com"},
		{"wildcard", "*.example.com"},
		{"port", "pay.example.com:443"},
		{"scheme", "https://pay.example.com"},
		{"path", "pay.example.com/x"},
		{"space", " shop.example.net"},
		{"underscore", "pay_1.example.com"},
		{"label starting with a hyphen", "-pay.example.com"},
		{"label ending with a hyphen", "pay-.example.com"},
		{"64 character label", strings.Repeat("a", 64) + ".example.com"},
		{"254 characters", hostnameOfLength(254)},
		{"non-ASCII", "zahlung.bücher.de"},
		{"numeric top-level label", "pay.example.123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := w.s.RegisterHostname(ctx, tid, w.p1.ID, tc.host)
			if h != nil {
				t.Errorf("RegisterHostname returned %+v with the error", h)
			}
			v := wantFieldErrors(t, err, "hostname")
			if msg := strings.Join(v.Fields["hostname"], ";"); tc.host != "" && strings.Contains(msg, tc.host) {
				t.Errorf("message quotes the input: %q", msg)
			}
			if _, err := w.s.LookupHostname(ctx, tc.host); !errors.Is(err, ErrNotFound) {
				t.Errorf("LookupHostname of a refused name error = %v, want ErrNotFound", err)
			}
		})
	}
	for _, tc := range []struct {
		name, proxyID string
	}{
		{"empty", ""},
		{"not a uuid", "not-a-uuid"},
		{"proxy key", w.p1.Key},
		{"unknown", uuid.NewString()},
		{"proxy of another tenant", w.q1.ID},
		{"an application id", w.a.Application.ID},
		{"the tenant id", tid},
	} {
		t.Run("proxy_id "+tc.name, func(t *testing.T) {
			h, err := w.s.RegisterHostname(ctx, tid, tc.proxyID, "pay.example.com")
			if h != nil {
				t.Errorf("RegisterHostname returned %+v with the error", h)
			}
			wantFieldErrors(t, err, "proxy_id")
		})
	}
	// nothing was written
	if hs, err := w.s.ListHostnames(ctx, tid); err != nil || len(hs) != 0 {
		t.Errorf("ListHostnames after refused registrations = %v, %v; want empty", hostnameNames(hs), err)
	}
	if left := kvKeys(t, w.s, "v1/hostname/"); len(left) != 0 {
		t.Errorf("hostname entries written by refused registrations: %v", left)
	}
	if left := kvKeys(t, w.s, string(tenantHostnamePrefix(w.b.Tenant.ID))); len(left) != 0 {
		t.Errorf("entries written in tenant B: %v", left)
	}
	if n := len(allAuditRecords(t, w.s, tid)); n != auditBefore {
		t.Errorf("refused registrations wrote %d audit records", n-auditBefore)
	}
}

func TestRegisterHostnameAccepted(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	tid := w.a.Tenant.ID
	for _, tc := range []struct {
		name, host, want string
	}{
		{"plain", "pay.example.com", "pay.example.com"},
		{"upper case", "Checkout.EXAMPLE.Org", "checkout.example.org"},
		{"digits and hyphens", "pay-1.x2.example.io", "pay-1.x2.example.io"},
		{"253 characters", hostnameOfLength(253), hostnameOfLength(253)},
		{"63 character label", strings.Repeat("z", 63) + ".example.com", strings.Repeat("z", 63) + ".example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := w.clock.Peek()
			h := w.mustRegister(t, tid, w.p1.ID, tc.host)
			if h.Hostname != tc.want || h.TenantID != tid || h.ProxyID != w.p1.ID || h.CreatedAt == nil || h.CreatedAt.Before(now) {
				t.Errorf("RegisterHostname = %+v, want %s for proxy %s created at or after %v", h, tc.want, w.p1.ID, now)
			}
			for _, q := range []string{tc.host, tc.want, strings.ToUpper(tc.want)} {
				got, err := w.s.LookupHostname(ctx, q)
				if err != nil || !sameJSON(t, got, h) {
					t.Errorf("LookupHostname(%q) = %+v, %v; want %+v", q, got, err, h)
				}
			}
			if raw := kvKeys(t, w.s, string(hostnameKey(tc.want))); len(raw) != 1 {
				t.Errorf("global entries for %s: %v", tc.want, raw)
			}
		})
	}
}

func TestRegisterHostnameIdempotentAndConflicts(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	a, b := w.a.Tenant.ID, w.b.Tenant.ID
	orig := w.mustRegister(t, a, w.p1.ID, "pay.example.com")

	for _, again := range []string{"pay.example.com", "PAY.Example.com"} {
		h, err := w.s.RegisterHostname(ctx, a, w.p1.ID, again)
		if err != nil {
			t.Fatalf("re-registering %q: %v", again, err)
		}
		if !sameJSON(t, h, orig) {
			t.Errorf("re-registering %q = %+v, want the original %+v", again, h, orig)
		}
	}
	for _, tc := range []struct {
		name, tenant, proxy, host string
	}{
		{"another proxy of the tenant", a, w.p2.ID, "pay.example.com"},
		{"another proxy, other case", a, w.p2.ID, "Pay.Example.Com"},
		{"another tenant", b, w.q1.ID, "pay.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := w.s.RegisterHostname(ctx, tc.tenant, tc.proxy, tc.host)
			if !errors.Is(err, ErrConflict) {
				t.Errorf("RegisterHostname = %+v, %v; want ErrConflict", h, err)
			}
		})
	}
	got, err := w.s.LookupHostname(ctx, "pay.example.com")
	if err != nil || !sameJSON(t, got, orig) {
		t.Errorf("after conflicts LookupHostname = %+v, %v; want %+v", got, err, orig)
	}
	if hs, err := w.s.ListHostnames(ctx, a); err != nil || !slices.Equal(hostnameNames(hs), []string{"pay.example.com"}) {
		t.Errorf("ListHostnames(A) = %v, %v", hostnameNames(hs), err)
	}
	if hs, err := w.s.ListHostnames(ctx, b); err != nil || len(hs) != 0 {
		t.Errorf("ListHostnames(B) = %v, %v; want empty", hostnameNames(hs), err)
	}
	// a proxy may have several hostnames
	w.mustRegister(t, a, w.p1.ID, "pay.example.net")
}

func TestLookupHostnameUnknown(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	w.mustRegister(t, w.a.Tenant.ID, w.p1.ID, "pay.example.com")
	for _, name := range []string{"", "other.example.com", "example.com", "x.pay.example.com", "pay.example.com.", "pay.example.co", "pay.example.com:443", strings.Repeat("a", 300)} {
		if h, err := w.s.LookupHostname(ctx, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupHostname(%q) = %+v, %v; want ErrNotFound", name, h, err)
		}
	}
}

func TestListHostnamesSortedPerTenant(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	a, b := w.a.Tenant.ID, w.b.Tenant.ID
	for _, r := range []struct{ proxy, host string }{
		{w.p1.ID, "zeta.example.com"},
		{w.p2.ID, "Alpha.example.com"},
		{w.p1.ID, "mid.example.org"},
		{w.p2.ID, "beta.example.com"},
	} {
		w.mustRegister(t, a, r.proxy, r.host)
	}
	w.mustRegister(t, b, w.q1.ID, "b-only.example.com")

	hs, err := w.s.ListHostnames(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"alpha.example.com", "beta.example.com", "mid.example.org", "zeta.example.com"}
	if got := hostnameNames(hs); !slices.Equal(got, want) {
		t.Errorf("ListHostnames(A) = %v, want %v", got, want)
	}
	wantProxy := map[string]string{"alpha.example.com": w.p2.ID, "beta.example.com": w.p2.ID, "mid.example.org": w.p1.ID, "zeta.example.com": w.p1.ID}
	for _, h := range hs {
		if h.TenantID != a || h.ProxyID != wantProxy[h.Hostname] {
			t.Errorf("listed %+v, want tenant %s proxy %s", h, a, wantProxy[h.Hostname])
		}
	}
	hs, err = w.s.ListHostnames(ctx, b)
	if err != nil || !slices.Equal(hostnameNames(hs), []string{"b-only.example.com"}) {
		t.Errorf("ListHostnames(B) = %v, %v", hostnameNames(hs), err)
	}
	if _, err := w.s.ListHostnames(ctx, uuid.NewString()); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListHostnames of an unknown tenant error = %v, want ErrNotFound", err)
	}
}

func TestDeleteHostname(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	a, b := w.a.Tenant.ID, w.b.Tenant.ID
	orig := w.mustRegister(t, a, w.p1.ID, "pay.example.com")
	keep := w.mustRegister(t, a, w.p1.ID, "keep.example.com")

	// Another tenant cannot delete it.
	for _, name := range []string{"pay.example.com", "PAY.EXAMPLE.COM"} {
		if err := w.s.DeleteHostname(ctx, b, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("tenant B DeleteHostname(%q) error = %v, want ErrNotFound", name, err)
		}
	}
	if got, err := w.s.LookupHostname(ctx, "pay.example.com"); err != nil || !sameJSON(t, got, orig) {
		t.Fatalf("after B's attempt LookupHostname = %+v, %v", got, err)
	}
	for _, name := range []string{"", "unknown.example.com", "pay.example.com.", "*.example.com"} {
		if err := w.s.DeleteHostname(ctx, a, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteHostname(%q) error = %v, want ErrNotFound", name, err)
		}
	}

	if err := w.s.DeleteHostname(ctx, a, "Pay.Example.com"); err != nil {
		t.Fatalf("DeleteHostname: %v", err)
	}
	if h, err := w.s.LookupHostname(ctx, "pay.example.com"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LookupHostname after delete = %+v, %v; want ErrNotFound", h, err)
	}
	if left := rawHostnames(t, w.s, a, "pay.example.com"); len(left) != 0 {
		t.Errorf("entries left after DeleteHostname: %v", left)
	}
	if err := w.s.DeleteHostname(ctx, a, "pay.example.com"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteHostname error = %v, want ErrNotFound", err)
	}
	if hs, err := w.s.ListHostnames(ctx, a); err != nil || !slices.Equal(hostnameNames(hs), []string{"keep.example.com"}) {
		t.Errorf("ListHostnames(A) = %v, %v", hostnameNames(hs), err)
	}
	if got, err := w.s.LookupHostname(ctx, "keep.example.com"); err != nil || !sameJSON(t, got, keep) {
		t.Errorf("the other hostname: %+v, %v", got, err)
	}
	// The freed name can go to another tenant.
	if h, err := w.s.RegisterHostname(ctx, b, w.q1.ID, "pay.example.com"); err != nil || h.TenantID != b {
		t.Errorf("registering the freed name in B = %+v, %v", h, err)
	}
}

func TestDeleteProxyRemovesItsHostnames(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	a := w.a.Tenant.ID
	w.mustRegister(t, a, w.p1.ID, "one.example.com")
	w.mustRegister(t, a, w.p1.ID, "two.example.com")
	other := w.mustRegister(t, a, w.p2.ID, "other.example.com")
	theirs := w.mustRegister(t, w.b.Tenant.ID, w.q1.ID, "theirs.example.com")

	if err := w.s.DeleteProxy(ctx, a, w.p1.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one.example.com", "two.example.com"} {
		if h, err := w.s.LookupHostname(ctx, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupHostname(%s) after DeleteProxy = %+v, %v; want ErrNotFound", name, h, err)
		}
		if left := rawHostnames(t, w.s, a, name); len(left) != 0 {
			t.Errorf("entries left for %s: %v", name, left)
		}
	}
	if hs, err := w.s.ListHostnames(ctx, a); err != nil || !slices.Equal(hostnameNames(hs), []string{"other.example.com"}) {
		t.Errorf("ListHostnames(A) = %v, %v", hostnameNames(hs), err)
	}
	for _, h := range []*Hostname{other, theirs} {
		if got, err := w.s.LookupHostname(ctx, h.Hostname); err != nil || !sameJSON(t, got, h) {
			t.Errorf("LookupHostname(%s) = %+v, %v", h.Hostname, got, err)
		}
	}
	// a deleted proxy takes no new hostnames
	if _, err := w.s.RegisterHostname(ctx, a, w.p1.ID, "one.example.com"); err == nil {
		t.Error("registered a hostname for a deleted proxy")
	} else {
		wantFieldErrors(t, err, "proxy_id")
	}
}

func TestDeleteTenantRemovesHostnames(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	a, b := w.a.Tenant.ID, w.b.Tenant.ID
	names := []string{"one.example.com", "two.example.com", "three.example.org"}
	w.mustRegister(t, a, w.p1.ID, names[0])
	w.mustRegister(t, a, w.p1.ID, names[1])
	w.mustRegister(t, a, w.p2.ID, names[2])
	theirs := w.mustRegister(t, b, w.q1.ID, "theirs.example.com")

	if err := w.s.DeleteTenant(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if h, err := w.s.LookupHostname(ctx, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupHostname(%s) after DeleteTenant = %+v, %v; want ErrNotFound", name, h, err)
		}
		if left := rawHostnames(t, w.s, a, name); len(left) != 0 {
			t.Errorf("entries left for %s: %v", name, left)
		}
	}
	if got, err := w.s.LookupHostname(ctx, theirs.Hostname); err != nil || !sameJSON(t, got, theirs) {
		t.Errorf("tenant B's hostname: %+v, %v", got, err)
	}
	if _, err := w.s.ListHostnames(ctx, a); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListHostnames of the deleted tenant error = %v, want ErrNotFound", err)
	}
	if _, err := w.s.RegisterHostname(ctx, a, w.p1.ID, "late.example.com"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RegisterHostname in the deleted tenant error = %v, want ErrNotFound", err)
	}
	if err := w.s.DeleteHostname(ctx, a, names[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteHostname in the deleted tenant error = %v, want ErrNotFound", err)
	}
	// the freed names can be registered again
	if h, err := w.s.RegisterHostname(ctx, b, w.q1.ID, names[0]); err != nil || h.TenantID != b {
		t.Errorf("registering a freed name in B = %+v, %v", h, err)
	}
}

// DNS names compare case-insensitively in ASCII only (RFC 4343). A name
// holding a non-ASCII letter is not a DNS name, even when Unicode case
// mapping (strings.ToLower) turns it into one: the KELVIN SIGN U+212A
// lower-cases to "k" and the dotted capital I U+0130 to "i", so such input
// must be refused, not silently registered (or looked up) as a different,
// all-ASCII name.
func TestHostnameNonASCIINotFoldedToASCII(t *testing.T) {
	ctx := context.Background()
	w := newHostnameWorld(t)
	tid := w.a.Tenant.ID
	for _, tc := range []struct{ name, host, folded string }{
		{"kelvin sign", "\u212Aey.example.com", "key.example.com"},
		{"dotted capital I", "\u0130nfo.example.com", "info.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := w.s.RegisterHostname(ctx, tid, w.p1.ID, tc.host)
			if err == nil {
				t.Errorf("RegisterHostname accepted a non-ASCII name and registered %q", h.Hostname)
			} else {
				wantFieldErrors(t, err, "hostname")
			}
		})
		t.Run(tc.name+" lookup", func(t *testing.T) {
			other := w.mustRegister(t, w.b.Tenant.ID, w.q1.ID, "b-"+tc.folded)
			if h, err := w.s.LookupHostname(ctx, "b-"+tc.host); !errors.Is(err, ErrNotFound) {
				t.Errorf("LookupHostname of the non-ASCII name = %+v, %v; want ErrNotFound (it found %s)", h, err, other.Hostname)
			}
		})
	}
}
