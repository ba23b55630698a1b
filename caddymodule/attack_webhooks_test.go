package caddymodule

// Adversarial review of the webhook endpoints and of every route's
// permission check, through the API.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// attackWebhookBody is a valid webhook body with change applied.
func attackWebhookBody(change func(map[string]any)) map[string]any {
	b := map[string]any{"name": "hook", "url": "https://example.com/hook", "events": []string{"token.created"}}
	if change != nil {
		change(b)
	}
	return b
}

// attackWebhookCount is the number of webhooks of the first tenant.
func attackWebhookCount(t *testing.T, e *tokenEnv) int {
	t.Helper()
	r := e.do(tvRoleMgmt, http.MethodGet, "/webhooks?size=100", nil)
	tvWantStatus(t, r, http.StatusOK, "list webhooks")
	n, err := testjson.Field(r.body, "pagination", "total_items").(json.Number).Int64()
	if err != nil {
		t.Fatalf("total_items: %v: %s", err, r.raw)
	}
	return int(n)
}

// TestAttackWebhookRefusals: each bad webhook body is a 400 naming its
// field, on POST and on PUT, stores nothing, changes nothing, and never
// echoes credentials from the URL.
func TestAttackWebhookRefusals(t *testing.T) {
	e := newTokenEnv(t, false, true)
	set := func(k string, v any) func(map[string]any) { return func(b map[string]any) { b[k] = v } }
	del := func(k string) func(map[string]any) { return func(b map[string]any) { delete(b, k) } }
	cases := []struct {
		name   string
		change func(map[string]any)
		field  string
	}{
		{"http", set("url", "http://example.com/hook"), "url"},
		{"ftp", set("url", "ftp://example.com/hook"), "url"},
		{"file", set("url", "file:///etc/passwd"), "url"},
		{"javascript", set("url", "javascript:alert(1)"), "url"},
		{"gopher", set("url", "gopher://example.com:70/_x"), "url"},
		{"credentials", set("url", "https://admin:s3cr3t-pw@example.com/hook"), "url"},
		{"user only", set("url", "https://admin@example.com/hook"), "url"},
		{"loopback", set("url", "https://127.0.0.1/hook"), "url"},
		{"loopback v6", set("url", "https://[::1]/hook"), "url"},
		{"mapped loopback", set("url", "https://[::ffff:127.0.0.1]/hook"), "url"},
		{"nat64 loopback", set("url", "https://[64:ff9b::7f00:1]/hook"), "url"},
		{"v4-compatible loopback", set("url", "https://[::127.0.0.1]/hook"), "url"},
		{"mapped private", set("url", "https://[::ffff:10.0.0.1]/hook"), "url"},
		{"6to4 loopback", set("url", "https://[2002:7f00:1::1]/hook"), "url"},
		{"teredo loopback", set("url", "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook"), "url"},
		{"unique local v6", set("url", "https://[fd00::1]/hook"), "url"},
		{"link-local v6", set("url", "https://[fe80::1]/hook"), "url"},
		{"metadata v6", set("url", "https://[fd00:ec2::254]/hook"), "url"},
		{"broadcast", set("url", "https://255.255.255.255/hook"), "url"},
		{"multicast", set("url", "https://224.0.0.1/hook"), "url"},
		{"private", set("url", "https://10.1.2.3/hook"), "url"},
		{"cgnat", set("url", "https://100.64.0.1/hook"), "url"},
		{"metadata", set("url", "https://169.254.169.254/latest/meta-data/"), "url"},
		{"zero", set("url", "https://0.0.0.0/hook"), "url"},
		{"zoned v6", set("url", "https://[fe80::1%25eth0]/hook"), "url"},
		{"hex ip", set("url", "https://0x7f.1/hook"), "url"},
		{"decimal ip", set("url", "https://2130706433/hook"), "url"},
		{"short ip", set("url", "https://127.1/hook"), "url"},
		{"octal ip", set("url", "https://0177.0.0.1/hook"), "url"},
		{"port zero", set("url", "https://example.com:0/hook"), "url"},
		{"port too big", set("url", "https://example.com:99999/hook"), "url"},
		{"space in host", set("url", "https://exa mple.com/hook"), "url"},
		{"unicode host", set("url", "https://exämple.com/hook"), "url"},
		{"fragment", set("url", "https://example.com/hook#x"), "url"},
		{"scheme-relative", set("url", "//example.com/hook"), "url"},
		{"relative", set("url", "/hook"), "url"},
		{"empty url", set("url", ""), "url"},
		{"no url", del("url"), "url"},
		{"url too long", set("url", "https://example.com/"+strings.Repeat("a", 3000)), "url"},
		{"url a number", set("url", 5), "url"},
		{"url an object", set("url", map[string]any{"href": "https://example.com"}), "url"},
		{"empty name", set("name", ""), "name"},
		{"no name", del("name"), "name"},
		{"name a number", set("name", 5), "name"},
		{"name huge", set("name", strings.Repeat("n", 10000)), "name"},
		{"no events", del("events"), "events"},
		{"empty events", set("events", []string{}), "events"},
		{"unknown event", set("events", []string{"token.created", "token.revealed"}), "events"},
		{"events a string", set("events", "token.created"), "events"},
		{"events with a number", set("events", []any{5}), "events[0]"},
		{"events with null", set("events", []any{nil}), "events"},
		{"event in other case", set("events", []string{"TOKEN.CREATED"}), "events"},
		{"bad email", set("notify_email", "not-an-email"), "notify_email"},
		{"email with a name", set("notify_email", "Bob <bob@example.com>"), "notify_email"},
		{"email a number", set("notify_email", 5), "notify_email"},
		{"email huge", set("notify_email", strings.Repeat("a", 300)+"@example.com"), "notify_email"},
	}
	for _, tc := range cases {
		r := e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(tc.change))
		tvWantProblem(t, r, http.StatusBadRequest, "POST "+tc.name, tc.field)
		if strings.Contains(string(r.raw), "s3cr3t-pw") {
			t.Errorf("POST %s: the refusal shows the URL's password: %s", tc.name, r.raw)
		}
	}
	for _, raw := range []string{
		`{"name":"a","name":"b","url":"https://example.com/hook","events":["token.created"]}`,
		`{"name":"a","url":"https://example.com/hook","events":["token.created"]`,
		`[]`, `"hook"`, `5`,
	} {
		tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/webhooks", raw), http.StatusBadRequest, "POST "+raw)
	}
	if n := attackWebhookCount(t, e); n != 0 {
		t.Fatalf("%d webhooks after refused creates", n)
	}

	// PUT: the same refusals leave the webhook as it was
	r := e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil))
	tvWantStatus(t, r, http.StatusCreated, "create a webhook")
	id := testjson.Str(r.body, "id")
	before := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/"+id, nil)
	for _, tc := range cases {
		r := e.do(tvRoleMgmt, http.MethodPut, "/webhooks/"+id, attackWebhookBody(tc.change))
		tvWantProblem(t, r, http.StatusBadRequest, "PUT "+tc.name, tc.field)
	}
	after := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/"+id, nil)
	if string(after.raw) != string(before.raw) {
		t.Errorf("refused PUTs changed the webhook:\n%s\n%s", before.raw, after.raw)
	}
	if strings.Contains(string(e.logs.String()), "s3cr3t-pw") {
		t.Error("the URL's password is in the log")
	}
}

// TestAttackWebhookURLMessagesNameTheField: a refused webhook URL's
// message speaks of url, the field the caller sent, not of a proxy's
// destination_url.
func TestAttackWebhookURLMessagesNameTheField(t *testing.T) {
	e := newTokenEnv(t, false, true)
	for _, u := range []string{"http://example.com/hook", "https://a:b@example.com/", "https://127.0.0.1/", "ftp://example.com/", "https://example.com/#x"} {
		r := e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(func(b map[string]any) { b["url"] = u }))
		tvWantProblem(t, r, http.StatusBadRequest, u, "url")
		if strings.Contains(string(r.raw), "destination_url") {
			t.Errorf("%s: the refusal speaks of destination_url: %s", u, r.raw)
		}
	}
}

// TestAttackWebhookTenantsAndIDs: another tenant's webhook and odd ids are
// 404 on every verb, a private key is 403 naming the permission, and a
// tenant's 21st webhook is refused without being stored.
func TestAttackWebhookTenantsAndIDs(t *testing.T) {
	e := newTokenEnv(t, false, true)
	r := e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil))
	tvWantStatus(t, r, http.StatusCreated, "create a webhook")
	id := testjson.Str(r.body, "id")
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		var body any
		if m == http.MethodPut {
			body = attackWebhookBody(func(b map[string]any) { b["url"] = "https://attacker.example/steal" })
		}
		tvWantProblem(t, e.do("other-management", m, "/webhooks/"+id, body), http.StatusNotFound, "another tenant's webhook, "+m)
		for _, bad := range []string{"..", "%2e%2e", "not-a-uuid", strings.Repeat("a", 5000), "00000000-0000-0000-0000-000000000000", strings.ToUpper(id)} {
			r := e.do(tvRoleMgmt, m, "/webhooks/"+bad, body)
			if r.status != http.StatusNotFound && r.status != http.StatusMethodNotAllowed {
				t.Errorf("%s /webhooks/%.20s: %s", m, bad, r)
			}
		}
	}
	got := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/"+id, nil)
	if testjson.Str(got.body, "url") != "https://example.com/hook" {
		t.Errorf("the webhook after another tenant's attempts: %s", got.raw)
	}
	other := e.do("other-management", http.MethodGet, "/webhooks", nil)
	if strings.Contains(string(other.raw), id) {
		t.Errorf("another tenant lists the webhook: %s", other.raw)
	}
	sk1 := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/signing-key", nil)
	tvWantStatus(t, sk1, http.StatusOK, "signing key")
	sk2 := e.do("other-management", http.MethodGet, "/webhooks/signing-key", nil)
	if sk2.status == http.StatusOK && (testjson.Str(sk2.body, "id") == testjson.Str(sk1.body, "id") || testjson.Str(sk2.body, "public_key") == testjson.Str(sk1.body, "public_key")) {
		t.Errorf("two tenants share a signing key: %s / %s", sk1.raw, sk2.raw)
	}
	if strings.Contains(string(sk1.raw), "PRIVATE") {
		t.Errorf("the signing key answer holds a private key: %s", sk1.raw)
	}

	for _, tc := range []struct{ method, path, perm string }{
		{http.MethodPost, "/webhooks", "webhooks:create"},
		{http.MethodGet, "/webhooks", "webhooks:read"},
		{http.MethodGet, "/webhooks/" + id, "webhooks:read"},
		{http.MethodPut, "/webhooks/" + id, "webhooks:update"},
		{http.MethodDelete, "/webhooks/" + id, "webhooks:delete"},
		{http.MethodGet, "/webhooks/signing-key", "webhooks:read"},
		{http.MethodGet, "/webhooks/event-types", "webhooks:read"},
	} {
		r := e.do(tvRoleReveal, tc.method, tc.path, attackWebhookBody(nil))
		tvWantProblem(t, r, http.StatusForbidden, tc.method+" "+tc.path)
		if !strings.Contains(testjson.Str(r.body, "detail"), tc.perm) {
			t.Errorf("%s %s: the 403 does not name %s: %s", tc.method, tc.path, tc.perm, r.raw)
		}
	}

	for i := 1; i < 20; i++ {
		tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil)), http.StatusCreated, "webhook up to 20")
	}
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil)), http.StatusBadRequest, "the 21st webhook")
	if n := attackWebhookCount(t, e); n != 20 {
		t.Errorf("%d webhooks, want 20", n)
	}
}

// TestAttackEveryRoutePermission: every route that needs a permission
// answers 403 naming it to a key that lacks it, before reading the body,
// whatever the ids in the path.
func TestAttackEveryRoutePermission(t *testing.T) {
	e := newTokenEnv(t, false, true)
	docApp(t, e, "docs-reader", "documents:read")
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "log-reader", "type": "management", "permissions": []string{"log:read"}})
	tvWantStatus(t, r, http.StatusCreated, "a management application")
	e.keys["log-reader"] = testjson.Str(r.body, "key")
	pub := e.tvPublicApp()
	for _, rt := range e.h.apiRoutes() {
		if rt.perm == "" {
			continue
		}
		path := strings.NewReplacer("{id}", "6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b", "{key_id}", "6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0c",
			"{request_id}", "6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0d").Replace(rt.pattern)
		var body any
		if rt.method != http.MethodGet && rt.method != http.MethodDelete {
			body = `{"type":"token","data":"` + tvSecretText + `"}`
		}
		roles := []string{"docs-reader", pub}
		if rt.perm == "documents:read" {
			roles = []string{"log-reader", pub}
		}
		for _, role := range roles {
			if role == pub && (rt.perm == "token:create" || rt.perm == "token:update" || rt.perm == "token-intent:create") {
				continue
			}
			r := e.do(role, rt.method, path, body)
			tvWantProblem(t, r, http.StatusForbidden, role+": "+rt.method+" "+rt.pattern)
			if !strings.Contains(testjson.Str(r.body, "detail"), rt.perm) {
				t.Errorf("%s: %s %s: the 403 does not name %s: %s", role, rt.method, rt.pattern, rt.perm, r.raw)
			}
		}
	}
}

// TestAttackWebhookListParams: bad page parameters are 400s naming them.
func TestAttackWebhookListParams(t *testing.T) {
	e := newTokenEnv(t, false, true)
	for _, tc := range []struct{ query, field string }{
		{"page=0", "page"}, {"page=-1", "page"}, {"page=x", "page"}, {"page=99999999999999999999", "page"},
		{"size=0", "size"}, {"size=101", "size"}, {"size=1e2", "size"},
	} {
		tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/webhooks?"+tc.query, nil), http.StatusBadRequest, tc.query, tc.field)
	}
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodGet, "/webhooks?page=500&size=100", nil), http.StatusOK, "a page past the end")
	// (an empty size is the default and a repeated one takes the first, as
	// on every list: pageParams, not the webhooks' own)
}
