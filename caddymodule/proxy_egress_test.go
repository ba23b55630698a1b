package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/internal/testjson"
)

// mapResolver resolves names from a fixed table.
type mapResolver map[string]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// setEgress replaces the app's egress policy and transport, as a vault
// provisioned with that policy would have them.
func setEgress(t *testing.T, e *tokenEnv, p *egress.Policy) {
	t.Helper()
	e.h.app.egress, e.h.app.transport = p, p.Transport()
	t.Cleanup(e.h.app.transport.CloseIdleConnections)
}

// wantEgressRefusal checks a proxy call refused by the egress policy: 403
// with a proxy_error naming the policy.
func wantEgressRefusal(t *testing.T, r tvResp, what string) {
	t.Helper()
	if r.status != http.StatusForbidden || fmt.Sprint(testjson.Field(r.body, "proxy_error", "status")) != "403" ||
		!strings.Contains(testjson.Str(r.body, "proxy_error", "detail"), "egress policy") {
		t.Errorf("%s: %s, want 403 with an egress policy proxy_error", what, r)
	}
}

// TestProxyRefusesEmbeddedIPv4 (issue 20): IPv6 spellings of 127.0.0.1
// are refused when a proxy is saved, when an ephemeral proxy is called
// through the PROXY-URL header, and at connect time when a destination's
// name resolves to one of them. The destination listening on 127.0.0.1
// sees no connection.
func TestProxyRefusesEmbeddedIPv4(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	dest := newDestination(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(dest.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]string{ // name → an IPv6 spelling of 127.0.0.1
		"compatible.example":  "::127.0.0.1",
		"translated.example":  "::ffff:0:7f00:1",
		"mapped.example":      "::ffff:127.0.0.1",
		"nat64.example":       "64:ff9b::7f00:1",
		"nat64-local.example": "64:ff9b:1:7f00:0:100::",
		"6to4.example":        "2002:7f00:1::1",
		"teredo.example":      "2001:0:808:808::80ff:fffe",
	}
	body := map[string]any{"n": "{{ " + cardID + " }}"}

	t.Run("default policy", func(t *testing.T) {
		setEgress(t, e, &egress.Policy{})
		for _, raw := range []string{"https://[::127.0.0.1]/", "https://[::ffff:0:7f00:1]/"} {
			r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": "v6", "destination_url": raw})
			tvWantProblem(t, r, http.StatusBadRequest, "save "+raw, "destination_url")
			r = e.do("user", http.MethodPost, "/proxy", body, "SVC-PROXY-URL", raw)
			wantEgressRefusal(t, r, "ephemeral "+raw)
		}
	})

	t.Run("every IPv6 prefix allowed", func(t *testing.T) {
		// Only the IPv4 rules can refuse: loopback is not allowed.
		resolver := mapResolver{}
		for name, a := range forms {
			resolver[name] = netip.MustParseAddr(a)
		}
		setEgress(t, e, &egress.Policy{
			AllowHTTP:     true,
			AllowNetworks: []netip.Prefix{netip.MustParsePrefix("::/0")},
			Resolver:      resolver,
		})
		for name, a := range forms {
			literal := (&url.URL{Scheme: "http", Host: net.JoinHostPort(a, port), Path: "/"}).String()
			r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": "v6", "destination_url": literal})
			tvWantProblem(t, r, http.StatusBadRequest, "save "+literal, "destination_url")
			r = e.do("user", http.MethodPost, "/proxy", body, "SVC-PROXY-URL", literal)
			wantEgressRefusal(t, r, "ephemeral "+literal)

			// A name passes the save-time check; the dialer refuses
			// what it resolves to.
			byName := "http://" + net.JoinHostPort(name, port) + "/"
			_, key := createTestProxy(t, e, name, byName)
			r = e.do("user", http.MethodPost, "/proxy", body, "SVC-PROXY-KEY", key)
			wantEgressRefusal(t, r, "saved proxy to "+name+" ("+a+")")
			r = e.do("user", http.MethodPost, "/proxy", body, "SVC-PROXY-URL", byName)
			wantEgressRefusal(t, r, "ephemeral proxy to "+name+" ("+a+")")
		}
	})

	if n := dest.conns.Load(); n != 0 {
		t.Errorf("the destination on 127.0.0.1 accepted %d connections, want 0", n)
	}
	if got := dest.received(); len(got) != 0 {
		t.Errorf("the destination received %d requests, want 0", len(got))
	}
}
