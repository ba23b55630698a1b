package caddymodule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// Issue 20 at the HTTP edge: an application that may create or update
// tokens cannot make a mask or a token id show a card number to masked
// readers. The environment records every answer and log line and fails
// the test if the card number shows up where data may not be revealed.

// tvPublicApp creates a public application (token:create and
// token:update, the keys that ship in browsers) and returns its role.
func (e *tokenEnv) tvPublicApp() string {
	e.tb.Helper()
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{
		"name": "browser", "type": "public", "permissions": []string{"token:create", "token:update"}})
	tvWantStatus(e.tb, r, http.StatusCreated, "create public application")
	e.keys["public"] = testjson.Str(r.body, "key")
	return "public"
}

// tvCardWithMask is a card create body with mask.
func tvCardWithMask(mask any) map[string]any {
	b := tvCardBody()
	b["mask"] = mask
	return b
}

// TestTokenMaskCannotRevealCardNumber: the attack of issue 20, item 1,
// through the API: a writer sets a mask that copies the card number, on
// create, tokenize and update.
func TestTokenMaskCannotRevealCardNumber(t *testing.T) {
	e := newTokenEnv(t, false, true)
	public := e.tvPublicApp()
	hostile := []struct {
		name string
		mask any
	}{
		{"number", map[string]any{"number": "{{ data.number }}"}},
		{"reveal_last 16", map[string]any{"number": "{{ data.number | reveal_last: 16 }}"}},
		{"json path", "{{ data | json: '$.number' }}"},
		{"whole data", "{{ data }}"},
		{"slice of the middle", "{{ data.number | slice: 8, 4 }}"},
		{"spaced out", "{{ data.number | split: '' | join: ' ' }}"},
		{"reversed", "{{ data.number | split: '' | reverse | join: '' }}"},
		{"digits as letters", "{{ data.number | replace: '4', 'four' | replace: '2', 'two' }}"},
		{"split over members", map[string]any{"a": "{{ data.number | slice: 0, 8 }}", "b": "{{ data.number | slice: 8, 8 }}"}},
		{"written in the mask", map[string]any{"n": tvCard}},
	}
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			for _, role := range []string{public, tvRoleMask, tvRoleReveal} {
				r := e.do(role, http.MethodPost, "/tokens", tvCardWithMask(tc.mask))
				tvWantProblem(t, r, http.StatusBadRequest, "POST /tokens by "+role, "mask")
			}
			r := e.do(public, http.MethodPost, "/tokenize", map[string]any{"card": tvCardWithMask(tc.mask)})
			tvWantProblem(t, r, http.StatusBadRequest, "POST /tokenize", "card.mask")

			id := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
			// a writer without the right to read the token revealed may
			// not change its mask at all
			for _, role := range []string{public, tvRoleMask} {
				r := e.do(role, http.MethodPatch, "/tokens/"+id, map[string]any{"mask": tc.mask})
				tvWantProblem(t, r, http.StatusForbidden, "PATCH by "+role)
			}
			// one who may is held to the cap
			r = e.do(tvRoleReveal, http.MethodPatch, "/tokens/"+id, map[string]any{"mask": tc.mask})
			tvWantProblem(t, r, http.StatusBadRequest, "PATCH by the revealing key", "mask")

			g := e.do(tvRoleMask, http.MethodGet, "/tokens/"+id, nil)
			tvWantStatus(t, g, http.StatusOK, "masked read")
			if got := testjson.Str(g.body, "data", "number"); got != "XXXXXXXXXXXX4242" {
				t.Errorf("masked read shows number %q", got)
			}
		})
	}
	t.Run("allowed masks", func(t *testing.T) {
		for _, mask := range []any{
			"{{ data.number | reveal: 6, 4 }}",
			map[string]any{"bin": "{{ data.number | slice: 0, 8 }}", "last4": "{{ data.number | last4 }}",
				"expiry": "{{ data.expiration_month }}/{{ data.expiration_year }}"},
		} {
			r := e.create(public, tvCardWithMask(mask))
			id := testjson.Str(r.body, "id")
			g := e.do(tvRoleMask, http.MethodGet, "/tokens/"+id, nil)
			tvWantStatus(t, g, http.StatusOK, "masked read")
			if testjson.Field(g.body, "data") == nil {
				t.Errorf("an allowed mask shows nothing: %s", g.raw)
			}
			p := e.do(tvRoleReveal, http.MethodPatch, "/tokens/"+id, map[string]any{"mask": mask})
			tvWantStatus(t, p, http.StatusOK, "PATCH an allowed mask")
		}
	})
}

// TestTokenIDCannotBeCardNumber: the attack of issue 20, item 2: a card
// or bank token whose id is its number, on every path that creates
// tokens with ids.
func TestTokenIDCannotBeCardNumber(t *testing.T) {
	e := newTokenEnv(t, false, true)
	public := e.tvPublicApp()
	withID := func(body map[string]any, id string) map[string]any {
		body["id"] = id
		return body
	}
	tests := []struct {
		name string
		body map[string]any
	}{
		{"number expression", withID(tvCardBody(), "{{ data.number }}")},
		{"number expression with a prefix", withID(tvCardBody(), "card_{{ data | json: '$.number' }}")},
		{"number literal", withID(tvCardBody(), tvCard)},
		{"number spaced", withID(tvCardBody(), "4242 4242 4242 4242")},
		{"another Luhn-valid number", withID(tvCardBody(), "4000056655665556")},
		{"first twelve digits", withID(tvCardBody(), "{{ data.number | slice: 0, 12 }}")},
		{"account expression", withID(tvBankBody(), "{{ data.account_number }}")},
		{"account literal", withID(tvBankBody(), "acct-"+tvAccount)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count()
			r := e.do(public, http.MethodPost, "/tokens", tc.body)
			tvWantProblem(t, r, http.StatusBadRequest, "POST /tokens", "id")
			dedupe := map[string]any{}
			for k, v := range tc.body {
				dedupe[k] = v
			}
			dedupe["deduplicate_token"] = true
			r = e.do(public, http.MethodPost, "/tokens", dedupe)
			tvWantProblem(t, r, http.StatusBadRequest, "POST /tokens with deduplication", "id")
			r = e.do(public, http.MethodPost, "/tokenize", map[string]any{"order": map[string]any{"payment": tc.body}})
			tvWantProblem(t, r, http.StatusBadRequest, "POST /tokenize, nested", "order.payment.id")
			r = e.do(public, http.MethodPost, "/tokenize", []any{"x", tc.body})
			tvWantProblem(t, r, http.StatusBadRequest, "POST /tokenize, array", "[1].id")
			if n := e.count(); n != before {
				t.Fatalf("%d tokens created", n-before)
			}
		})
	}
	t.Run("aliases keep working", func(t *testing.T) {
		for range 20 {
			r := e.create(public, withID(tvCardBody(), "{{ data.number | alias_preserve_format: 0, 4 }}"))
			if id := testjson.Str(r.body, "id"); len(id) != 16 || !strings.HasSuffix(id, "4242") || id == tvCard {
				t.Fatalf("alias id %q", id)
			}
		}
	})
}
