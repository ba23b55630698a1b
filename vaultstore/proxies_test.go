package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// proxyDest is the destination of the proxies the tests create.
const proxyDest = "https://api.example.com/pay"

// proxyInput is a minimal valid proxy input.
func proxyInput(name string) ProxyInput {
	return ProxyInput{Name: name, DestinationURL: proxyDest}
}

func mustCreateProxy(tb testing.TB, s *Store, tenantID string, in ProxyInput) *Proxy {
	tb.Helper()
	p, err := s.CreateProxy(context.Background(), tenantID, "actor", in, nil)
	if err != nil {
		tb.Fatalf("CreateProxy(%s, %q): %v", tenantID, in.Name, err)
	}
	return p
}

// proxyIndexKeys lists the proxy key index entries of a proxy key.
func proxyIndexKeys(tb testing.TB, s *Store, key string) []string {
	tb.Helper()
	return kvKeys(tb, s, string(proxyKeyIndexKey(keyDigest(key))))
}

func TestCreateProxyValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	tid := ct.Tenant.ID
	auditBefore := len(allAuditRecords(t, s, tid))
	code := func(c string) *ProxyTransform { return &ProxyTransform{Code: c} }
	for _, tc := range []struct {
		name   string
		in     ProxyInput
		fields []string
		msg    string // a substring of the message of fields[0]
	}{
		{"empty name", ProxyInput{DestinationURL: proxyDest}, []string{"name"}, "required"},
		{"201 character name", ProxyInput{Name: strings.Repeat("n", 201), DestinationURL: proxyDest}, []string{"name"}, "200"},
		{"201 multibyte name", ProxyInput{Name: strings.Repeat("ß", 201), DestinationURL: proxyDest}, []string{"name"}, "200"},
		{"no destination_url", ProxyInput{Name: "p"}, []string{"destination_url"}, "required"},
		{"request_reactor_id", ProxyInput{Name: "p", DestinationURL: proxyDest, RequestReactorID: json.RawMessage(`"` + uuid.NewString() + `"`)},
			[]string{"request_reactor_id"}, "request_transform"},
		{"response_reactor_id", ProxyInput{Name: "p", DestinationURL: proxyDest, ResponseReactorID: json.RawMessage(`"` + uuid.NewString() + `"`)},
			[]string{"response_reactor_id"}, "response_transform"},
		{"empty request transform code", ProxyInput{Name: "p", DestinationURL: proxyDest, RequestTransform: code("")},
			[]string{"request_transform.code"}, "required"},
		{"empty response transform code", ProxyInput{Name: "p", DestinationURL: proxyDest, ResponseTransform: code("")},
			[]string{"response_transform.code"}, "required"},
		{"50001 character code", ProxyInput{Name: "p", DestinationURL: proxyDest, RequestTransform: code(strings.Repeat("x", MaxTransformCode+1))},
			[]string{"request_transform.code"}, "50000"},
		{"50001 multibyte code", ProxyInput{Name: "p", DestinationURL: proxyDest, ResponseTransform: code(strings.Repeat("€", MaxTransformCode+1))},
			[]string{"response_transform.code"}, "50000"},
		{"application id not a uuid", ProxyInput{Name: "p", DestinationURL: proxyDest, Application: &ApplicationRef{ID: "not-a-uuid"}},
			[]string{"application.id"}, "application"},
		{"empty application id", ProxyInput{Name: "p", DestinationURL: proxyDest, Application: &ApplicationRef{}},
			[]string{"application.id"}, "application"},
		{"unknown application", ProxyInput{Name: "p", DestinationURL: proxyDest, Application: &ApplicationRef{ID: uuid.NewString()}},
			[]string{"application.id"}, "application"},
		{"everything at once", ProxyInput{RequestTransform: code(""), RequestReactorID: json.RawMessage(`1`), ResponseReactorID: json.RawMessage(`1`)},
			[]string{"destination_url", "name", "request_reactor_id", "request_transform.code", "response_reactor_id"}, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.CreateProxy(ctx, tid, "actor", tc.in, nil)
			if p != nil {
				t.Errorf("CreateProxy returned a proxy with the error: %+v", p)
			}
			v := wantFieldErrors(t, err, tc.fields...)
			if msgs := strings.Join(v.Fields[tc.fields[0]], "; "); !strings.Contains(msgs, tc.msg) {
				t.Errorf("message of %s = %q, want it to mention %q", tc.fields[0], msgs, tc.msg)
			}
		})
	}
	// Nothing was written by any refused create.
	list, err := s.ListProxies(ctx, tid)
	if err != nil || len(list) != 0 {
		t.Errorf("ListProxies after refused creates = %d proxies, %v; want none", len(list), err)
	}
	if left := kvKeys(t, s, "v1/proxykey/"); len(left) != 0 {
		t.Errorf("proxy key index entries written by refused creates: %v", left)
	}
	if left := kvKeys(t, s, string(proxyPrefix(tid))); len(left) != 0 {
		t.Errorf("proxy records written by refused creates: %v", left)
	}
	if n := len(allAuditRecords(t, s, tid)); n != auditBefore {
		t.Errorf("refused creates wrote %d audit records", n-auditBefore)
	}
}

// The limits are inclusive and count characters, not bytes.
func TestCreateProxyLimits(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	for _, tc := range []struct {
		name string
		in   ProxyInput
	}{
		{"200 character name", ProxyInput{Name: strings.Repeat("n", 200), DestinationURL: proxyDest}},
		{"200 multibyte name", ProxyInput{Name: strings.Repeat("ß", 200), DestinationURL: proxyDest}},
		{"50000 character code", ProxyInput{Name: "p", DestinationURL: proxyDest, RequestTransform: &ProxyTransform{Code: strings.Repeat("x", MaxTransformCode)}}},
		// 150,000 bytes, 50,000 characters
		{"50000 euro signs", ProxyInput{Name: "p", DestinationURL: proxyDest,
			RequestTransform: &ProxyTransform{Code: strings.Repeat("€", MaxTransformCode)}, ResponseTransform: &ProxyTransform{Code: strings.Repeat("€", MaxTransformCode)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.CreateProxy(ctx, tid, "actor", tc.in, nil)
			if err != nil {
				t.Fatalf("CreateProxy: %v", err)
			}
			got, err := s.GetProxy(ctx, tid, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, p) || got.Name != tc.in.Name {
				t.Errorf("stored proxy differs from the created one")
			}
		})
	}
}

func TestCreateProxyApplication(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	a := mustCreateTenant(t, s, "A", TenantTest)
	b := mustCreateTenant(t, s, "B", TenantTest)
	private, _ := mustCreateApp(t, s, a.Tenant.ID, privateApp("backend"))
	public, _ := mustCreateApp(t, s, a.Tenant.ID, ApplicationInput{Name: "browser", Type: AppPublic, Permissions: []string{"token:create"}})
	gone, _ := mustCreateApp(t, s, a.Tenant.ID, privateApp("gone"))
	if err := s.DeleteApplication(ctx, a.Tenant.ID, gone.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	otherTenant, _ := mustCreateApp(t, s, b.Tenant.ID, privateApp("theirs"))
	for _, tc := range []struct {
		name  string
		appID string
		ok    bool
	}{
		{"private application", private.ID, true},
		{"public application", public.ID, true},
		{"management application", a.Application.ID, false},
		{"application of another tenant", otherTenant.ID, false},
		{"management application of another tenant", b.Application.ID, false},
		{"deleted application", gone.ID, false},
		{"upper-case id of an application", strings.ToUpper(private.ID), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := proxyInput("p")
			in.Application = &ApplicationRef{ID: tc.appID}
			p, err := s.CreateProxy(ctx, a.Tenant.ID, "actor", in, nil)
			if !tc.ok {
				wantFieldErrors(t, err, "application.id")
				return
			}
			if err != nil {
				t.Fatalf("CreateProxy: %v", err)
			}
			if p.ApplicationID != tc.appID {
				t.Errorf("ApplicationID = %q, want %q", p.ApplicationID, tc.appID)
			}
			got, err := s.GetProxy(ctx, a.Tenant.ID, p.ID)
			if err != nil || got.ApplicationID != tc.appID {
				t.Errorf("GetProxy = %+v, %v", got, err)
			}
		})
	}
	list, err := s.ListProxies(ctx, a.Tenant.ID)
	if err != nil || len(list) != 2 {
		t.Errorf("ListProxies = %d proxies, %v; want the 2 accepted", len(list), err)
	}
}

func TestCreateProxyCheck(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	var calls int
	var seen []string
	refuse := func(field, msg string) ProxyCheck {
		return func(in *ProxyInput, v *ValidationError) {
			calls++
			seen = append(seen, in.DestinationURL)
			if field != "" {
				v.Add(field, msg)
			}
		}
	}
	for _, tc := range []struct {
		name      string
		in        ProxyInput
		check     ProxyCheck
		wantCalls int
		fields    []string // nil: accepted
	}{
		{"check passes", proxyInput("ok"), refuse("", ""), 1, nil},
		{"destination refused", proxyInput("p"), refuse("destination_url", "outside the egress policy"), 1, []string{"destination_url"}},
		{"code refused", ProxyInput{Name: "p", DestinationURL: proxyDest, RequestTransform: &ProxyTransform{Code: "x"}},
			refuse("request_transform.code", "cannot run"), 1, []string{"request_transform.code"}},
		{"added to the store's own errors", ProxyInput{DestinationURL: proxyDest}, refuse("destination_url", "outside the egress policy"), 1,
			[]string{"destination_url", "name"}},
		{"not called without destination_url", ProxyInput{Name: "p"}, refuse("destination_url", "outside the egress policy"), 0,
			[]string{"destination_url"}},
		{"nil check", proxyInput("nil check"), nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, seen = 0, nil
			before, err := s.ListProxies(ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.CreateProxy(ctx, tid, "actor", tc.in, tc.check)
			if calls != tc.wantCalls {
				t.Errorf("check called %d times, want %d", calls, tc.wantCalls)
			}
			if calls > 0 && seen[0] != tc.in.DestinationURL {
				t.Errorf("check saw destination %q, want %q", seen[0], tc.in.DestinationURL)
			}
			after, lerr := s.ListProxies(ctx, tid)
			if lerr != nil {
				t.Fatal(lerr)
			}
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("CreateProxy: %v", err)
				}
				if len(after) != len(before)+1 || after[len(after)-1].ID != p.ID {
					t.Errorf("the proxy is not listed")
				}
				return
			}
			v := wantFieldErrors(t, err, tc.fields...)
			if tc.check != nil && tc.wantCalls > 0 && !slices.Contains(v.Fields[tc.fields[0]], "outside the egress policy") && !slices.Contains(v.Fields[tc.fields[0]], "cannot run") {
				t.Errorf("the check's message is missing: %v", v.Fields)
			}
			if len(after) != len(before) {
				t.Errorf("a refused create wrote a proxy: %d -> %d", len(before), len(after))
			}
		})
	}
}

func TestCreateProxyDefaultsAndKey(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantProduction)
	tid := ct.Tenant.ID
	app, _ := mustCreateApp(t, s, tid, privateApp("backend"))

	for _, tc := range []struct {
		name string
		req  *bool
		want bool
	}{
		{"require_auth absent", nil, true},
		{"require_auth true", boolPtr(true), true},
		{"require_auth false", boolPtr(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := proxyInput(tc.name)
			in.RequireAuth = tc.req
			p := mustCreateProxy(t, s, tid, in)
			got, err := s.GetProxy(ctx, tid, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if p.RequireAuth != tc.want || got.RequireAuth != tc.want {
				t.Errorf("require_auth = %v (stored %v), want %v", p.RequireAuth, got.RequireAuth, tc.want)
			}
		})
	}

	t.Run("every field kept", func(t *testing.T) {
		now := clock.Peek()
		in := ProxyInput{
			Name: "Full", DestinationURL: proxyDest,
			RequestTransform:  &ProxyTransform{Code: "module.exports = async (req) => req"},
			ResponseTransform: &ProxyTransform{Code: "module.exports = async (res) => res"},
			Application:       &ApplicationRef{ID: app.ID},
			Configuration:     map[string]string{"a": "1", "b": "2"},
			RequireAuth:       boolPtr(false),
		}
		p, err := s.CreateProxy(ctx, tid, "actor-9", in, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := &Proxy{
			ID: p.ID, Key: p.Key, TenantID: tid, Name: "Full", DestinationURL: proxyDest,
			RequestTransform: in.RequestTransform, ResponseTransform: in.ResponseTransform,
			ApplicationID: app.ID, Configuration: map[string]string{"a": "1", "b": "2"}, RequireAuth: false,
			CreatedBy: "actor-9", CreatedAt: p.CreatedAt,
		}
		if !sameJSON(t, p, want) {
			t.Errorf("CreateProxy = %s, want %s", encodeJSON(t, p), encodeJSON(t, want))
		}
		if !isID(p.ID) || p.CreatedAt == nil || p.CreatedAt.Before(now) || p.ModifiedAt != nil || p.ModifiedBy != "" {
			t.Errorf("id %q, created %v (not before %v), modified %q %v", p.ID, p.CreatedAt, now, p.ModifiedBy, p.ModifiedAt)
		}
		got, err := s.GetProxy(ctx, tid, p.ID)
		if err != nil || !sameJSON(t, got, p) {
			t.Errorf("GetProxy = %s, %v; want %s", encodeJSON(t, got), err, encodeJSON(t, p))
		}
	})

	t.Run("keys", func(t *testing.T) {
		seen := map[string]bool{}
		for i := range 20 {
			p := mustCreateProxy(t, s, tid, proxyInput("k"))
			if len(p.Key) != keyPayloadLen {
				t.Errorf("key %d has %d characters, want %d", i, len(p.Key), keyPayloadLen)
			}
			for _, c := range p.Key {
				if !strings.ContainsRune(base62Digits, c) {
					t.Errorf("key %d holds %q, not a base62 digit", i, c)
				}
			}
			if seen[p.Key] {
				t.Errorf("key %d repeats an earlier key", i)
			}
			seen[p.Key] = true
			if strings.HasPrefix(p.Key, "key_") {
				t.Errorf("a proxy key looks like an API key")
			}
		}
		// no two proxies share a key, counting the earlier subtests' too
		list, err := s.ListProxies(ctx, tid)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		for _, p := range list {
			keys[p.Key] = true
		}
		if len(keys) != len(list) {
			t.Errorf("%d proxies share %d keys", len(list), len(keys))
		}
	})

	t.Run("the key is sealed", func(t *testing.T) {
		p := mustCreateProxy(t, s, tid, proxyInput("sealed"))
		err := s.kv.View(ctx, func(r Reader) error {
			return r.Scan([]byte(keyVersion), nil, func(k, v []byte) error {
				if bytes.Contains(k, []byte(p.Key)) || bytes.Contains(v, []byte(p.Key)) {
					t.Errorf("the proxy key is stored in clear under %s", k)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestCreateProxyUnknownTenant(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	if err := s.DeleteTenant(ctx, ct.Tenant.ID); err != nil {
		t.Fatal(err)
	}
	for name, tid := range map[string]string{"unknown": uuid.NewString(), "deleted": ct.Tenant.ID} {
		if p, err := s.CreateProxy(ctx, tid, "actor", proxyInput("p"), nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("CreateProxy in a %s tenant = %v, %v; want ErrNotFound", name, p, err)
		}
		if _, err := s.ListProxies(ctx, tid); !errors.Is(err, ErrNotFound) {
			t.Errorf("ListProxies of a %s tenant error = %v, want ErrNotFound", name, err)
		}
	}
	if left := kvKeys(t, s, "v1/proxykey/"); len(left) != 0 {
		t.Errorf("index entries written for a missing tenant: %v", left)
	}
}

func TestProxyTenantIsolationAndOrder(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	a := mustCreateTenant(t, s, "A", TenantTest).Tenant.ID
	b := mustCreateTenant(t, s, "B", TenantTest).Tenant.ID
	var created []string
	for _, name := range []string{"first", "second", "third", "fourth", "fifth", "sixth"} {
		created = append(created, mustCreateProxy(t, s, a, proxyInput(name)).ID)
	}
	theirs := mustCreateProxy(t, s, b, proxyInput("B's"))

	list, err := s.ListProxies(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list {
		got = append(got, p.ID)
		if p.TenantID != a {
			t.Errorf("tenant A lists a proxy of tenant %s", p.TenantID)
		}
	}
	if !slices.Equal(got, created) {
		t.Errorf("ListProxies order = %v, want oldest first %v", got, created)
	}

	for _, id := range created {
		if p, err := s.GetProxy(ctx, b, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("tenant B got A's proxy: %+v, %v", p, err)
		}
		if _, err := s.UpdateProxy(ctx, b, id, "x", proxyInput("hijack"), nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("tenant B updated A's proxy: %v", err)
		}
		if _, err := s.PatchProxy(ctx, b, id, "x", map[string]any{"name": "hijack"}, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("tenant B patched A's proxy: %v", err)
		}
		if err := s.DeleteProxy(ctx, b, id, "actor"); !errors.Is(err, ErrNotFound) {
			t.Errorf("tenant B deleted A's proxy: %v", err)
		}
	}
	listB, err := s.ListProxies(ctx, b)
	if err != nil || len(listB) != 1 || listB[0].ID != theirs.ID {
		t.Errorf("ListProxies(B) = %v, %v; want only B's proxy", listB, err)
	}
	// A's proxies are intact.
	for i, id := range created {
		if p, err := s.GetProxy(ctx, a, id); err != nil || p.Name != list[i].Name {
			t.Errorf("GetProxy(A, %s) = %+v, %v", id, p, err)
		}
	}

	c := mustCreateTenant(t, s, "C", TenantTest).Tenant.ID
	if listC, err := s.ListProxies(ctx, c); err != nil || len(listC) != 0 {
		t.Errorf("ListProxies of a tenant without proxies = %v, %v; want empty", listC, err)
	}
}

func TestProxyNonUUIDIDs(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	p := mustCreateProxy(t, s, tid, proxyInput("p"))
	for _, id := range []string{
		"",
		"x",
		p.Key,
		"../../tenant/" + tid,
		"proxy/" + p.ID,
		p.ID + "/",
		strings.ToUpper(p.ID),
		"{" + p.ID + "}",
		"urn:uuid:" + p.ID,
		strings.ReplaceAll(p.ID, "-", ""),
		p.ID[:35],
		uuid.NewString(),
	} {
		t.Run(id, func(t *testing.T) {
			checks := map[string]error{}
			_, checks["GetProxy"] = s.GetProxy(ctx, tid, id)
			_, checks["UpdateProxy"] = s.UpdateProxy(ctx, tid, id, "a", proxyInput("n"), nil)
			_, checks["PatchProxy"] = s.PatchProxy(ctx, tid, id, "a", map[string]any{"name": "n"}, nil)
			checks["DeleteProxy"] = s.DeleteProxy(ctx, tid, id, "actor")
			for op, err := range checks {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s error = %v, want ErrNotFound", op, err)
				}
			}
		})
	}
	if got, err := s.GetProxy(ctx, tid, p.ID); err != nil || !sameJSON(t, got, p) {
		t.Errorf("the proxy was harmed: %+v, %v", got, err)
	}
}

// fullProxy creates a proxy with every setting given.
func fullProxy(tb testing.TB, s *Store, tenantID, appID string) *Proxy {
	tb.Helper()
	p, err := s.CreateProxy(context.Background(), tenantID, "creator", ProxyInput{
		Name: "Checkout", DestinationURL: proxyDest,
		RequestTransform:  &ProxyTransform{Code: "request code"},
		ResponseTransform: &ProxyTransform{Code: "response code"},
		Application:       &ApplicationRef{ID: appID},
		Configuration:     map[string]string{"a": "1", "b": "2"},
		RequireAuth:       boolPtr(false),
	}, nil)
	if err != nil {
		tb.Fatalf("CreateProxy: %v", err)
	}
	return p
}

func TestUpdateProxy(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	app, _ := mustCreateApp(t, s, tid, privateApp("backend"))
	app2, _ := mustCreateApp(t, s, tid, privateApp("other"))
	other := mustCreateTenant(t, s, "Other", TenantTest)
	theirApp, _ := mustCreateApp(t, s, other.Tenant.ID, privateApp("theirs"))

	for _, tc := range []struct {
		name   string
		in     ProxyInput
		want   func(p *Proxy) // applied to a copy of the original
		fields []string
	}{
		{"only required fields clear the rest", ProxyInput{Name: "New", DestinationURL: "https://new.example.com"}, func(p *Proxy) {
			p.Name, p.DestinationURL = "New", "https://new.example.com"
			p.RequestTransform, p.ResponseTransform, p.ApplicationID, p.Configuration = nil, nil, "", nil
			p.RequireAuth = true
		}, nil},
		{"everything replaced", ProxyInput{
			Name: "New", DestinationURL: "https://new.example.com",
			RequestTransform: &ProxyTransform{Code: "new request"}, ResponseTransform: &ProxyTransform{Code: "new response"},
			Application: &ApplicationRef{ID: app2.ID}, Configuration: map[string]string{"c": "3"}, RequireAuth: boolPtr(true),
		}, func(p *Proxy) {
			p.Name, p.DestinationURL = "New", "https://new.example.com"
			p.RequestTransform, p.ResponseTransform = &ProxyTransform{Code: "new request"}, &ProxyTransform{Code: "new response"}
			p.ApplicationID, p.Configuration, p.RequireAuth = app2.ID, map[string]string{"c": "3"}, true
		}, nil},
		{"require_auth false kept", ProxyInput{Name: "Checkout", DestinationURL: proxyDest, RequireAuth: boolPtr(false)}, func(p *Proxy) {
			p.RequestTransform, p.ResponseTransform, p.ApplicationID, p.Configuration = nil, nil, "", nil
		}, nil},
		{"empty name", ProxyInput{DestinationURL: proxyDest}, nil, []string{"name"}},
		{"no destination_url", ProxyInput{Name: "x"}, nil, []string{"destination_url"}},
		{"reactor id", ProxyInput{Name: "x", DestinationURL: proxyDest, ResponseReactorID: json.RawMessage(`"r"`)}, nil, []string{"response_reactor_id"}},
		{"empty code", ProxyInput{Name: "x", DestinationURL: proxyDest, RequestTransform: &ProxyTransform{}}, nil, []string{"request_transform.code"}},
		{"application of another tenant", ProxyInput{Name: "x", DestinationURL: proxyDest, Application: &ApplicationRef{ID: theirApp.ID}}, nil, []string{"application.id"}},
		{"management application", ProxyInput{Name: "x", DestinationURL: proxyDest, Application: &ApplicationRef{ID: other.Application.ID}}, nil, []string{"application.id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := fullProxy(t, s, tid, app.ID)
			now := clock.Peek()
			auditBefore := len(allAuditRecords(t, s, tid))
			got, err := s.UpdateProxy(ctx, tid, orig.ID, "updater", tc.in, nil)
			stored, gerr := s.GetProxy(ctx, tid, orig.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tc.fields != nil {
				wantFieldErrors(t, err, tc.fields...)
				if !sameJSON(t, stored, orig) {
					t.Errorf("refused update changed the proxy: %s", encodeJSON(t, stored))
				}
				if n := len(allAuditRecords(t, s, tid)); n != auditBefore {
					t.Errorf("refused update wrote %d audit records", n-auditBefore)
				}
				return
			}
			if err != nil {
				t.Fatalf("UpdateProxy: %v", err)
			}
			want := *orig
			tc.want(&want)
			want.ModifiedBy, want.ModifiedAt = "updater", got.ModifiedAt
			if got.ModifiedAt == nil || got.ModifiedAt.Before(now) {
				t.Errorf("modified_at = %v, want at or after %v", got.ModifiedAt, now)
			}
			if !sameJSON(t, got, &want) {
				t.Errorf("UpdateProxy = %s\nwant %s", encodeJSON(t, got), encodeJSON(t, &want))
			}
			if !sameJSON(t, stored, got) {
				t.Errorf("GetProxy = %s\nwant %s", encodeJSON(t, stored), encodeJSON(t, got))
			}
			if got.ID != orig.ID || got.Key != orig.Key || got.CreatedBy != "creator" || !got.CreatedAt.Equal(orig.CreatedAt.Time) {
				t.Errorf("identity changed: %s", encodeJSON(t, got))
			}
			byKey, _, err := s.ProxyByKey(ctx, orig.Key)
			if err != nil || !sameJSON(t, byKey, got) {
				t.Errorf("ProxyByKey after update = %s, %v", encodeJSON(t, byKey), err)
			}
		})
	}
}

func TestUpdateProxyCheck(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	orig := mustCreateProxy(t, s, tid, proxyInput("p"))
	refuse := func(in *ProxyInput, v *ValidationError) {
		if strings.Contains(in.DestinationURL, "internal") {
			v.Add("destination_url", "outside the egress policy")
		}
	}
	_, err := s.UpdateProxy(ctx, tid, orig.ID, "a", ProxyInput{Name: "p", DestinationURL: "http://internal.local"}, refuse)
	wantFieldErrors(t, err, "destination_url")
	_, err = s.PatchProxy(ctx, tid, orig.ID, "a", map[string]any{"destination_url": "http://internal.local"}, refuse)
	wantFieldErrors(t, err, "destination_url")
	if got, err := s.GetProxy(ctx, tid, orig.ID); err != nil || !sameJSON(t, got, orig) {
		t.Errorf("a refused change was stored: %s, %v", encodeJSON(t, got), err)
	}
	got, err := s.PatchProxy(ctx, tid, orig.ID, "a", map[string]any{"destination_url": "https://ok.example.com"}, refuse)
	if err != nil || got.DestinationURL != "https://ok.example.com" {
		t.Errorf("PatchProxy with an accepted destination = %+v, %v", got, err)
	}
}

func TestPatchProxy(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	app, _ := mustCreateApp(t, s, tid, privateApp("backend"))
	app2, _ := mustCreateApp(t, s, tid, ApplicationInput{Name: "browser", Type: AppPublic})
	for _, tc := range []struct {
		name  string
		patch string
		want  func(p *Proxy)
	}{
		{"empty patch", `{}`, func(p *Proxy) {}},
		{"name", `{"name": "Renamed"}`, func(p *Proxy) { p.Name = "Renamed" }},
		{"destination_url", `{"destination_url": "https://other.example.com/x"}`, func(p *Proxy) { p.DestinationURL = "https://other.example.com/x" }},
		{"configuration member added", `{"configuration": {"c": "3"}}`, func(p *Proxy) { p.Configuration = map[string]string{"a": "1", "b": "2", "c": "3"} }},
		{"configuration member replaced", `{"configuration": {"a": "9"}}`, func(p *Proxy) { p.Configuration = map[string]string{"a": "9", "b": "2"} }},
		{"configuration member removed", `{"configuration": {"a": null}}`, func(p *Proxy) { p.Configuration = map[string]string{"b": "2"} }},
		{"configuration removed", `{"configuration": null}`, func(p *Proxy) { p.Configuration = nil }},
		{"application removed", `{"application": null}`, func(p *Proxy) { p.ApplicationID = "" }},
		{"application replaced", `{"application": {"id": "` + app2.ID + `"}}`, func(p *Proxy) { p.ApplicationID = app2.ID }},
		{"request transform removed", `{"request_transform": null}`, func(p *Proxy) { p.RequestTransform = nil }},
		{"response transform code", `{"response_transform": {"code": "new"}}`, func(p *Proxy) { p.ResponseTransform = &ProxyTransform{Code: "new"} }},
		{"require_auth true", `{"require_auth": true}`, func(p *Proxy) { p.RequireAuth = true }},
		{"require_auth removed takes the default", `{"require_auth": null}`, func(p *Proxy) { p.RequireAuth = true }},
		{"several", `{"name": "N", "configuration": null, "application": null, "require_auth": true}`, func(p *Proxy) {
			p.Name, p.Configuration, p.ApplicationID, p.RequireAuth = "N", nil, "", true
		}},
		{"reactor ids set to null are absent", `{"request_reactor_id": null, "response_reactor_id": null}`, func(p *Proxy) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := fullProxy(t, s, tid, app.ID)
			now := clock.Peek()
			patch := patchBody(t, tc.patch)
			before := encodeJSON(t, patch)
			got, err := s.PatchProxy(ctx, tid, orig.ID, "patcher", patch, nil)
			if err != nil {
				t.Fatalf("PatchProxy: %v", err)
			}
			want := *orig
			want.Configuration = map[string]string{"a": "1", "b": "2"}
			tc.want(&want)
			want.ModifiedBy, want.ModifiedAt = "patcher", got.ModifiedAt
			if got.ModifiedAt == nil || got.ModifiedAt.Before(now) {
				t.Errorf("modified_at = %v, want at or after %v", got.ModifiedAt, now)
			}
			if !sameJSON(t, got, &want) {
				t.Errorf("PatchProxy = %s\nwant %s", encodeJSON(t, got), encodeJSON(t, &want))
			}
			stored, err := s.GetProxy(ctx, tid, orig.ID)
			if err != nil || !sameJSON(t, stored, got) {
				t.Errorf("GetProxy = %s, %v\nwant %s", encodeJSON(t, stored), err, encodeJSON(t, got))
			}
			if encodeJSON(t, patch) != before {
				t.Errorf("the patch was modified: %s -> %s", before, encodeJSON(t, patch))
			}
		})
	}
}

func TestPatchProxyRefused(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	app, _ := mustCreateApp(t, s, tid, privateApp("backend"))
	other := mustCreateTenant(t, s, "Other", TenantTest)
	theirApp, _ := mustCreateApp(t, s, other.Tenant.ID, privateApp("theirs"))
	id := uuid.NewString()
	for _, tc := range []struct {
		name   string
		patch  string
		fields []string
	}{
		{"id", `{"id": "` + id + `"}`, []string{"id"}},
		{"key", `{"key": "abc"}`, []string{"key"}},
		{"tenant_id", `{"tenant_id": "` + other.Tenant.ID + `"}`, []string{"tenant_id"}},
		{"created_at", `{"created_at": "2020-01-01T00:00:00Z"}`, []string{"created_at"}},
		{"application_id", `{"application_id": "` + app.ID + `"}`, []string{"application_id"}},
		{"modified_by", `{"modified_by": "me"}`, []string{"modified_by"}},
		{"immutable set to null", `{"key": null}`, []string{"key"}},
		{"every immutable field at once, with a valid change", `{"id": "x", "key": "k", "tenant_id": "t", "created_at": "c", "name": "ok"}`,
			[]string{"created_at", "id", "key", "tenant_id"}},
		{"name a number", `{"name": 5}`, []string{"name"}},
		{"configuration value a number", `{"configuration": {"a": 1}}`, []string{"configuration"}},
		{"configuration a string", `{"configuration": "a=1"}`, []string{"configuration"}},
		{"require_auth a string", `{"require_auth": "yes"}`, []string{"require_auth"}},
		{"application a string", `{"application": "` + app.ID + `"}`, []string{"application"}},
		{"code a number", `{"request_transform": {"code": 5}}`, []string{"request_transform.code"}},
		{"name emptied", `{"name": ""}`, []string{"name"}},
		{"name too long", `{"name": "` + strings.Repeat("é", 201) + `"}`, []string{"name"}},
		{"destination_url removed", `{"destination_url": null}`, []string{"destination_url"}},
		{"code removed", `{"request_transform": {"code": null}}`, []string{"request_transform.code"}},
		{"code too long", `{"response_transform": {"code": "` + strings.Repeat("€", MaxTransformCode+1) + `"}}`, []string{"response_transform.code"}},
		{"application id not a uuid", `{"application": {"id": "nope"}}`, []string{"application.id"}},
		{"application of another tenant", `{"application": {"id": "` + theirApp.ID + `"}}`, []string{"application.id"}},
		{"management application", `{"application": {"id": "` + other.Application.ID + `"}}`, []string{"application.id"}},
		{"request reactor", `{"request_reactor_id": "` + id + `"}`, []string{"request_reactor_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := fullProxy(t, s, tid, app.ID)
			auditBefore := len(allAuditRecords(t, s, tid))
			got, err := s.PatchProxy(ctx, tid, orig.ID, "patcher", patchBody(t, tc.patch), nil)
			if got != nil {
				t.Errorf("PatchProxy returned a proxy with the error: %s", encodeJSON(t, got))
			}
			v := wantFieldErrors(t, err, tc.fields...)
			for f, msgs := range v.Fields {
				for _, m := range msgs {
					if strings.Contains(m, "nope") || strings.Contains(m, "yes") || strings.Contains(m, "a=1") {
						t.Errorf("message of %s quotes the input: %q", f, m)
					}
				}
			}
			stored, err := s.GetProxy(ctx, tid, orig.ID)
			if err != nil || !sameJSON(t, stored, orig) {
				t.Errorf("a refused patch changed the proxy: %s, %v", encodeJSON(t, stored), err)
			}
			if n := len(allAuditRecords(t, s, tid)); n != auditBefore {
				t.Errorf("a refused patch wrote %d audit records", n-auditBefore)
			}
		})
	}
}

func TestProxyByKey(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	a := mustCreateTenant(t, s, "Tenant A", TenantTest)
	b := mustCreateTenant(t, s, "Tenant B", TenantProduction)
	pa := mustCreateProxy(t, s, a.Tenant.ID, proxyInput("A1"))
	pa2 := mustCreateProxy(t, s, a.Tenant.ID, proxyInput("A2"))
	pb := mustCreateProxy(t, s, b.Tenant.ID, proxyInput("B1"))

	check := func(t *testing.T, p *Proxy, tenant *Tenant) {
		t.Helper()
		got, gt, err := s.ProxyByKey(ctx, p.Key)
		if err != nil {
			t.Fatalf("ProxyByKey(%s): %v", p.Name, err)
		}
		if !sameJSON(t, got, p) {
			t.Errorf("ProxyByKey proxy = %s, want %s", encodeJSON(t, got), encodeJSON(t, p))
		}
		if gt.ID != tenant.ID || gt.Name != tenant.Name || gt.Type != tenant.Type {
			t.Errorf("ProxyByKey tenant = %+v, want %+v", gt, tenant)
		}
	}
	check(t, pa, a.Tenant)
	check(t, pa2, a.Tenant)
	check(t, pb, b.Tenant)

	flipped := []byte(pa.Key)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct{ name, key string }{
		{"empty", ""},
		{"unknown", newProxyKey()},
		{"one character changed", string(flipped)},
		{"prefix", pa.Key[:32]},
		{"with a suffix", pa.Key + "0"},
		{"upper-cased", strings.ToUpper(pa.Key)},
		{"overlong", strings.Repeat("a", 129)},
		{"very long", strings.Repeat(pa.Key, 1000)},
		{"an API key", a.Key},
		{"a proxy id", pa.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.key == pa.Key || tc.key == pa2.Key || tc.key == pb.Key {
				t.Skip("collides with a real key")
			}
			p, tn, err := s.ProxyByKey(ctx, tc.key)
			if !errors.Is(err, ErrNotFound) || p != nil || tn != nil {
				t.Errorf("ProxyByKey = %v, %v, %v; want ErrNotFound", p, tn, err)
			}
		})
	}

	t.Run("after DeleteProxy", func(t *testing.T) {
		if err := s.DeleteProxy(ctx, a.Tenant.ID, pa2.ID, "actor"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ProxyByKey(ctx, pa2.Key); !errors.Is(err, ErrNotFound) {
			t.Errorf("ProxyByKey of a deleted proxy error = %v, want ErrNotFound", err)
		}
		if _, err := s.GetProxy(ctx, a.Tenant.ID, pa2.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetProxy of a deleted proxy error = %v, want ErrNotFound", err)
		}
		if err := s.DeleteProxy(ctx, a.Tenant.ID, pa2.ID, "actor"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second DeleteProxy error = %v, want ErrNotFound", err)
		}
		if left := proxyIndexKeys(t, s, pa2.Key); len(left) != 0 {
			t.Errorf("index entry left after DeleteProxy: %v", left)
		}
		if left := kvKeys(t, s, string(proxyKey(a.Tenant.ID, pa2.ID))); len(left) != 0 {
			t.Errorf("record left after DeleteProxy: %v", left)
		}
		check(t, pa, a.Tenant)
		list, err := s.ListProxies(ctx, a.Tenant.ID)
		if err != nil || len(list) != 1 || list[0].ID != pa.ID {
			t.Errorf("ListProxies after DeleteProxy = %v, %v", list, err)
		}
	})

	t.Run("after DeleteTenant", func(t *testing.T) {
		if len(proxyIndexKeys(t, s, pa.Key)) != 1 {
			t.Fatal("the index entry of a live proxy is missing")
		}
		if err := s.DeleteTenant(ctx, a.Tenant.ID); err != nil {
			t.Fatal(err)
		}
		if p, tn, err := s.ProxyByKey(ctx, pa.Key); !errors.Is(err, ErrNotFound) {
			t.Errorf("ProxyByKey of a deleted tenant's proxy = %v, %v, %v; want ErrNotFound", p, tn, err)
		}
		if left := proxyIndexKeys(t, s, pa.Key); len(left) != 0 {
			t.Errorf("proxy key index entry left after DeleteTenant: %v", left)
		}
		err := s.kv.View(ctx, func(r Reader) error {
			return r.Scan([]byte("v1/proxykey/"), nil, func(k, v []byte) error {
				var e proxyKeyEntry
				if err := json.Unmarshal(v, &e); err != nil {
					return err
				}
				if e.TenantID == a.Tenant.ID {
					t.Errorf("proxy key index %s still points at the deleted tenant", k)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, pb, b.Tenant)
	})
}

func TestProxyApplication(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	tid := mustCreateTenant(t, s, "T", TenantTest).Tenant.ID
	app, _ := mustCreateApp(t, s, tid, privateApp("backend"))
	with := fullProxy(t, s, tid, app.ID)
	without := mustCreateProxy(t, s, tid, proxyInput("no app"))

	got, err := s.ServiceApplication(ctx, with.TenantID, with.ApplicationID)
	if err != nil {
		t.Fatalf("ServiceApplication: %v", err)
	}
	if !sameJSON(t, got, app) {
		t.Errorf("ServiceApplication = %s, want %s", encodeJSON(t, got), encodeJSON(t, app))
	}
	if got, err := s.ServiceApplication(ctx, without.TenantID, without.ApplicationID); !errors.Is(err, ErrNotFound) {
		t.Errorf("ServiceApplication without an application = %v, %v; want ErrNotFound", got, err)
	}
	// The proxy as ProxyByKey resolves it, as a handler would use it.
	byKey, _, err := s.ProxyByKey(ctx, with.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.ServiceApplication(ctx, byKey.TenantID, byKey.ApplicationID); err != nil || got.ID != app.ID {
		t.Errorf("ServiceApplication of the resolved proxy = %v, %v", got, err)
	}
	if err := s.DeleteApplication(ctx, tid, app.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ServiceApplication(ctx, with.TenantID, with.ApplicationID); !errors.Is(err, ErrNotFound) {
		t.Errorf("ServiceApplication after the application was deleted = %v, %v; want ErrNotFound", got, err)
	}
	// the proxy itself survives its application
	if _, _, err := s.ProxyByKey(ctx, with.Key); err != nil {
		t.Errorf("ProxyByKey after the application was deleted: %v", err)
	}
}
