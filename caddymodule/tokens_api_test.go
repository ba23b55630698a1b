package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestTokenRoundTrip creates a token of each type and reads it back with
// each kind of key.
func TestTokenRoundTrip(t *testing.T) {
	e := newTokenEnv(t, false, true)
	cases := []struct {
		name      string
		body      string
		revealed  string // the data a revealing GET returns
		masked    string // the data a masking GET returns; "" for none
		container string
	}{
		{
			name:      "token object",
			body:      `{"type":"token","data":{"s":"` + tvSecretText + `","n":` + tvBigNumber + `,"f":1.50,"neg":-0.0e3,"b":false,"z":null,"nested":{"a":[1,"2",{"x":"<&>"}]}}}`,
			revealed:  `{"s":"` + tvSecretText + `","n":` + tvBigNumber + `,"f":1.50,"neg":-0.0e3,"b":false,"z":null,"nested":{"a":[1,"2",{"x":"<&>"}]}}`,
			container: "/general/high/",
		},
		{
			name:      "token array",
			body:      `{"type":"token","data":["` + tvSecretText + `",` + tvBigNumber + `,true,[],{}]}`,
			revealed:  `["` + tvSecretText + `",` + tvBigNumber + `,true,[],{}]`,
			container: "/general/high/",
		},
		{
			name:      "token number",
			body:      `{"type":"token","data":` + tvBigNumber + `}`,
			revealed:  tvBigNumber,
			container: "/general/high/",
		},
		{
			name:      "token unicode string",
			body:      `{"type":"token","data":"` + tvSecretText + ` 日本語 😀 \u00e9"}`,
			revealed:  `"` + tvSecretText + ` 日本語 😀 é"`,
			container: "/general/high/",
		},
		{
			name:      "token with a custom mask",
			body:      `{"type":"token","data":"abcdef123456","mask":"{{ data | reveal_last: 4 }}"}`,
			revealed:  `"abcdef123456"`,
			masked:    `"XXXXXXXX3456"`,
			container: "/general/high/",
		},
		{
			name:      "card",
			body:      tvJSON(t, tvCardBody()),
			revealed:  `{"number":"` + tvCard + `","expiration_month":12,"expiration_year":2030,"cvc":"` + tvCVC + `"}`,
			masked:    `{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`,
			container: "/pci/high/",
		},
		{
			name:      "bank",
			body:      tvJSON(t, tvBankBody()),
			revealed:  `{"routing_number":"` + tvRouting + `","account_number":"` + tvAccount + `"}`,
			masked:    `{"routing_number":"` + tvRouting + `","account_number":"XXXXX6789"}`,
			container: "/bank/high/",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			created := e.create(tvRoleReveal, tc.body)
			id := testjson.Str(created.body, "id")
			if got := testjson.Field(created.body, "containers"); !reflect.DeepEqual(got, []any{tc.container}) {
				t.Errorf("containers %v, want [%s]", got, tc.container)
			}
			if testjson.Str(created.body, "tenant_id") != e.tenantID || testjson.Str(created.body, "created_at") == "" || testjson.Str(created.body, "created_by") == "" {
				t.Errorf("create answer lacks tenant_id/created_at/created_by: %s", created.raw)
			}
			// a create reveals nothing: masked data at most
			if tc.masked != "" {
				if got := testjson.Field(created.body, "data"); !reflect.DeepEqual(got, testjson.Decode(t, tc.masked)) {
					t.Errorf("create answer data %v, want masked %s", got, tc.masked)
				}
			} else if testjson.Has(created.body, "data") {
				t.Errorf("create answer of a token without mask has data: %s", created.raw)
			}

			path := "/tokens/" + url.PathEscape(id)
			rev := e.do(tvRoleReveal, http.MethodGet, path, nil)
			tvWantStatus(t, rev, http.StatusOK, "revealing GET")
			if got, want := testjson.Field(rev.body, "data"), testjson.Decode(t, tc.revealed); !reflect.DeepEqual(got, want) {
				t.Errorf("revealed data\n got %#v\nwant %#v", got, want)
			}
			if strings.Contains(tc.revealed, tvBigNumber) && !bytes.Contains(rev.raw, []byte(tvBigNumber)) {
				t.Errorf("%s not returned byte-exactly: %s", tvBigNumber, rev.raw)
			}

			masked := e.do(tvRoleMask, http.MethodGet, path, nil)
			tvWantStatus(t, masked, http.StatusOK, "masking GET")
			if tc.masked == "" {
				if testjson.Has(masked.body, "data") {
					t.Errorf("masked read of a token without mask has data: %s", masked.raw)
				}
			} else if got := testjson.Field(masked.body, "data"); !reflect.DeepEqual(got, testjson.Decode(t, tc.masked)) {
				t.Errorf("masked data %v, want %s", got, tc.masked)
			}

			red := e.do(tvRoleRedact, http.MethodGet, path, nil)
			tvWantStatus(t, red, http.StatusOK, "redacting GET")
			if testjson.Has(red.body, "data") {
				t.Errorf("redacted read has data: %s", red.raw)
			}
			if testjson.Str(red.body, "id") != id || testjson.Str(red.body, "type") == "" {
				t.Errorf("redacted read lacks id/type: %s", red.raw)
			}

			gen := e.do(tvRoleGeneral, http.MethodGet, path, nil)
			if tc.container == "/general/high/" {
				tvWantStatus(t, gen, http.StatusOK, "general key on a general token")
			} else {
				tvWantProblem(t, gen, http.StatusForbidden, "key without a rule for "+tc.container)
			}
		})
	}
}

func tvJSON(tb testing.TB, v any) string {
	tb.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(raw)
}

// usageTotal is total_tokens of the usage report.
func (e *tokenEnv) usageTotal() string {
	e.tb.Helper()
	r := e.do(tvRoleMgmt, http.MethodGet, "/tenants/self/reports/usage", nil)
	tvWantStatus(e.tb, r, http.StatusOK, "usage report")
	return fmt.Sprint(testjson.Field(r.body, "total_tokens"))
}

// TestTokenCreateValidation sends one invalid create per rule: each is a
// 400 problem naming the field, and nothing is written.
func TestTokenCreateValidation(t *testing.T) {
	e := newTokenEnv(t, false, true)
	e.create(tvRoleReveal, tvCardBody()) // something to count
	card := func(data string) string { return `{"type":"card","data":` + data + `}` }
	cases := []struct {
		name, body, field string
	}{
		{"type unknown", `{"type":"cheque","data":"x"}`, "type"},
		{"type missing", `{"data":"x"}`, "type"},
		{"data missing", `{"type":"token"}`, "data"},
		{"data null", `{"type":"token","data":null}`, "data"},
		{"card number not Luhn", card(`{"number":"` + tvCardBadLuhn + `"}`), "data.number"},
		{"card number 12 digits", card(`{"number":"` + tvCard12 + `"}`), "data.number"},
		{"card number as JSON number", card(`{"number":` + tvCard + `}`), "data.number"},
		{"card number full-width digits", card(`{"number":"` + tvCardFullWidth + `"}`), "data.number"},
		{"card number with spaces", card(`{"number":"4242 4242 4242 4242"}`), "data.number"},
		{"card number missing", card(`{"expiration_month":1}`), "data.number"},
		{"card data not an object", card(`"` + tvCard + `"`), "data"},
		{"card month 13", card(`{"number":"` + tvCard + `","expiration_month":13}`), "data.expiration_month"},
		{"card month 0", card(`{"number":"` + tvCard + `","expiration_month":0}`), "data.expiration_month"},
		{"card month as string", card(`{"number":"` + tvCard + `","expiration_month":"12"}`), "data.expiration_month"},
		{"card year 999", card(`{"number":"` + tvCard + `","expiration_year":999}`), "data.expiration_year"},
		{"card year 20300", card(`{"number":"` + tvCard + `","expiration_year":20300}`), "data.expiration_year"},
		{"card cvc 12", card(`{"number":"` + tvCard + `","cvc":"12"}`), "data.cvc"},
		{"card cvc as number", card(`{"number":"` + tvCard + `","cvc":737}`), "data.cvc"},
		{"card unknown member", card(`{"number":"` + tvCard + `","holder":"J Doe"}`), "data.holder"},
		{"bank routing checksum", `{"type":"bank","data":{"routing_number":"` + tvRoutingBad + `","account_number":"` + tvAccount + `"}}`, "data.routing_number"},
		{"bank routing 8 digits", `{"type":"bank","data":{"routing_number":"11000000","account_number":"` + tvAccount + `"}}`, "data.routing_number"},
		{"bank account 18 digits", `{"type":"bank","data":{"routing_number":"` + tvRouting + `","account_number":"` + tvAccount18 + `"}}`, "data.account_number"},
		{"bank account missing", `{"type":"bank","data":{"routing_number":"` + tvRouting + `"}}`, "data.account_number"},
		{"id too short", `{"type":"token","data":"x","id":"ab"}`, "id"},
		{"id too long", `{"type":"token","data":"x","id":"` + strings.Repeat("a", 401) + `"}`, "id"},
		{"id only spaces", `{"type":"token","data":"x","id":"    "}`, "id"},
		{"id control character", `{"type":"token","data":"x","id":"abc\u0007def"}`, "id"},
		{"container without leading slash", `{"type":"token","data":"x","containers":["general/"]}`, "containers[0]"},
		{"container with space", `{"type":"token","data":"x","containers":["/general high/"]}`, "containers[0]"},
		{"container with dot segment", `{"type":"token","data":"x","containers":["/general/../pci/"]}`, "containers[0]"},
		{"metadata non-string value", `{"type":"token","data":"x","metadata":{"k":5}}`, "metadata.k"},
		{"metadata card number as value", `{"type":"token","data":"x","metadata":{"k":` + tvCard + `}}`, "metadata.k"},
		{"metadata null value", `{"type":"token","data":"x","metadata":{"a":"1","k":null}}`, "metadata.k"},
		{"metadata object value", `{"type":"token","data":"x","metadata":{"k":{"nested":"v"}}}`, "metadata.k"},
		{"metadata not an object", `{"type":"token","data":"x","metadata":"k=v"}`, "metadata"},
		{"metadata an array", `{"type":"token","data":"x","metadata":["k"]}`, "metadata"},
		{"mask that does not parse", `{"type":"token","data":"x","mask":"{{ data | no_such_filter }}"}`, "mask"},
		{"mask unterminated", `{"type":"card","data":{"number":"` + tvCard + `"},"mask":{"number":"{{ data.number | reveal_last: 4"}}`, "mask.number"},
		{"expires_at in the past", `{"type":"token","data":"x","expires_at":"1/1/2000"}`, "expires_at"},
		{"expires_at past ISO", `{"type":"token","data":"x","expires_at":"2001-01-01T00:00:00Z"}`, "expires_at"},
		{"expires_at garbage", `{"type":"token","data":"x","expires_at":"next tuesday"}`, "expires_at"},
		{"search index evaluating to empty", `{"type":"token","data":{"a":"b"},"search_indexes":["{{ data.nothing }}"]}`, "search_indexes[0]"},
		{"fingerprint expression evaluating to empty", `{"type":"token","data":{"a":"b"},"fingerprint_expression":"{{ data.nothing }}"}`, "fingerprint_expression"},
	}
	t.Run("metadata null is no metadata", func(t *testing.T) {
		r := e.create(tvRoleReveal, `{"type":"token","data":"x","metadata":null}`)
		if m := testjson.Field(r.body, "metadata"); m != nil {
			t.Fatalf("metadata %v, want none: %s", m, r.raw)
		}
	})
	for _, c := range tvIDForbiddenChars() {
		cases = append(cases, struct{ name, body, field string }{
			"id with " + c, tvJSON(t, map[string]any{"type": "token", "data": "x", "id": "abc" + c + "def"}), "id",
		})
	}
	before, usageBefore := e.count(), e.usageTotal()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tvRoleReveal, http.MethodPost, "/tokens", tc.body)
			tvWantProblem(t, r, http.StatusBadRequest, tc.name, tc.field)
			if n := e.count(); n != before {
				t.Errorf("total_items %d after a refused create, want %d", n, before)
			}
		})
	}
	if u := e.usageTotal(); u != usageBefore {
		t.Errorf("usage total_tokens %s after refused creates, want %s", u, usageBefore)
	}
}

// tvIDForbiddenChars are the characters a caller id may not contain.
func tvIDForbiddenChars() []string {
	return strings.Split(`#/\+?[]|&=%<>{}^`, "")
}

// TestTokenIDs covers caller ids: accepted, duplicate, expression.
func TestTokenIDs(t *testing.T) {
	e := newTokenEnv(t, false, true)
	t.Run("caller id kept", func(t *testing.T) {
		r := e.create(tvRoleReveal, `{"id":"order-123 ü","type":"token","data":"x"}`)
		if id := testjson.Str(r.body, "id"); id != "order-123 ü" {
			t.Fatalf("id %q", id)
		}
		g := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+url.PathEscape("order-123 ü"), nil)
		tvWantStatus(t, g, http.StatusOK, "GET by caller id")
	})
	t.Run("duplicate caller id is 409", func(t *testing.T) {
		before := e.count()
		r := e.do(tvRoleReveal, http.MethodPost, "/tokens", `{"id":"order-123 ü","type":"card","data":{"number":"`+tvCard+`"}}`)
		tvWantProblem(t, r, http.StatusConflict, "duplicate id")
		if n := e.count(); n != before {
			t.Errorf("total_items %d after a conflict, want %d", n, before)
		}
		g := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+url.PathEscape("order-123 ü"), nil)
		if testjson.Str(g.body, "type") != "token" || testjson.Field(g.body, "data") != "x" {
			t.Errorf("the conflict changed the first token: %s", g.raw)
		}
	})
	t.Run("id expression alias_preserve_format", func(t *testing.T) {
		const data = "9876543210123456"
		r := e.create(tvRoleReveal, `{"id":"{{ data | alias_preserve_format: 0, 4 }}","type":"token","data":"`+data+`"}`)
		id := testjson.Str(r.body, "id")
		if len(id) != len(data) || !strings.HasSuffix(id, data[len(data)-4:]) || id == data || strings.Trim(id, "0123456789") != "" {
			t.Fatalf("id %q: want %d digits ending in %s", id, len(data), data[len(data)-4:])
		}
		g := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+id, nil)
		tvWantStatus(t, g, http.StatusOK, "GET by aliased id")
		if testjson.Field(g.body, "data") != data {
			t.Errorf("data %v", testjson.Field(g.body, "data"))
		}
	})
	t.Run("assigned ids are UUIDs, not data", func(t *testing.T) {
		r := e.create(tvRoleReveal, tvCardBody())
		if id := testjson.Str(r.body, "id"); len(id) != 36 || strings.Contains(id, "42424242") {
			t.Errorf("assigned id %q", id)
		}
	})
}

// TestTokenList covers GET /tokens: order, filters, pagination.
func TestTokenList(t *testing.T) {
	e := newTokenEnv(t, false, true)
	type tok struct{ id, color, size string }
	specs := []tok{
		{"", "Blue", "s"}, {"", "red", "m"}, {"", "blue", "m"}, {"", "BLUE", "l"}, {"", "green", "s"},
	}
	var ids []string
	for i, s := range specs {
		body := map[string]any{"type": "token", "data": fmt.Sprintf("v%d", i), "metadata": map[string]string{"color": s.color, "size": s.size}}
		if i == 1 {
			body = tvCardBody()
			body["metadata"] = map[string]string{"color": s.color, "size": s.size}
		}
		ids = append(ids, testjson.Str(e.create(tvRoleReveal, body).body, "id"))
	}
	listIDs := func(t *testing.T, role, query string) ([]string, tvResp) {
		t.Helper()
		r := e.do(role, http.MethodGet, "/tokens"+query, nil)
		tvWantStatus(t, r, http.StatusOK, "list "+query)
		data, ok := testjson.Field(r.body, "data").([]any)
		if !ok {
			t.Fatalf("list %s: data is not an array: %s", query, r.raw)
		}
		out := []string{}
		for _, d := range data {
			out = append(out, testjson.Str(d, "id"))
		}
		return out, r
	}
	cases := []struct {
		name, role, query string
		want              []string
	}{
		{"all in created_at order", tvRoleReveal, "", ids},
		{"trailing slash", tvRoleReveal, "/", ids},
		{"id repeated", tvRoleReveal, "?id=" + ids[3] + "&id=" + ids[0], []string{ids[0], ids[3]}},
		{"id unknown", tvRoleReveal, "?id=nope-nope", []string{}},
		{"metadata exact case-insensitive", tvRoleReveal, "?metadata.color=blue", []string{ids[0], ids[2], ids[3]}},
		{"metadata is not a prefix match", tvRoleReveal, "?metadata.color=blu", []string{}},
		{"metadata ANDed", tvRoleReveal, "?metadata.color=BLUE&metadata.size=m", []string{ids[2]}},
		{"metadata bracket form", tvRoleReveal, "?metadata%5Bcolor%5D=red", []string{ids[1]}},
		{"metadata bracket form unescaped", tvRoleReveal, "?metadata[size]=s", []string{ids[0], ids[4]}},
		{"metadata repeated key uses the first", tvRoleReveal, "?metadata.color=green&metadata.color=red", []string{ids[4]}},
		{"metadata and id", tvRoleReveal, "?metadata.color=blue&id=" + ids[1] + "&id=" + ids[2], []string{ids[2]}},
		{"page 2 size 2", tvRoleReveal, "?page=2&size=2", ids[2:4]},
		{"page 3 size 2", tvRoleReveal, "?page=3&size=2", ids[4:]},
		{"page past the end", tvRoleReveal, "?page=9&size=2", []string{}},
		{"general key sees general tokens only", tvRoleGeneral, "", []string{ids[0], ids[2], ids[3], ids[4]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, r := listIDs(t, tc.role, tc.query)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
			if bytes.Contains(r.raw, []byte(`"data":null`)) {
				t.Errorf("data is null: %s", r.raw)
			}
		})
	}
	t.Run("pagination object", func(t *testing.T) {
		_, r := listIDs(t, tvRoleReveal, "?page=2&size=2")
		want := map[string]any{"total_items": json.Number("5"), "page_number": json.Number("2"), "page_size": json.Number("2"), "total_pages": json.Number("3")}
		if got := testjson.Field(r.body, "pagination"); !reflect.DeepEqual(got, want) {
			t.Errorf("pagination %v, want %v", got, want)
		}
		_, r = listIDs(t, tvRoleReveal, "?metadata.color=blue&size=1")
		if n := testjson.Field(r.body, "pagination", "total_items"); fmt.Sprint(n) != "3" {
			t.Errorf("filtered total_items %v, want 3", n)
		}
	})
	t.Run("list shapes data per key", func(t *testing.T) {
		_, r := listIDs(t, tvRoleMask, "?id="+ids[1])
		if got := testjson.Str(r.body, "data", 0, "data", "number"); got != "XXXXXXXXXXXX4242" {
			t.Errorf("masked list number %q: %s", got, r.raw)
		}
		_, r = listIDs(t, tvRoleRedact, "?id="+ids[1])
		if testjson.Has(testjson.Field(r.body, "data", 0), "data") {
			t.Errorf("redacted list has data: %s", r.raw)
		}
		_, r = listIDs(t, tvRoleReveal, "?id="+ids[1])
		if got := testjson.Str(r.body, "data", 0, "data", "number"); got != tvCard {
			t.Errorf("revealed list number %q", got)
		}
	})
	for _, q := range []string{"?size=101", "?size=0", "?size=abc", "?page=0", "?page=-1"} {
		t.Run("bad "+q, func(t *testing.T) {
			name := "size"
			if strings.HasPrefix(q, "?page") {
				name = "page"
			}
			tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/tokens"+q, nil), http.StatusBadRequest, q, name)
		})
	}
}

// TestTokenPatch covers PATCH /tokens/{id}.
func TestTokenPatch(t *testing.T) {
	e := newTokenEnv(t, false, true)
	obj := e.create(tvRoleReveal, `{"type":"token","data":{"a":1,"b":{"c":2,"keep":"`+tvSecretText+`"}},"metadata":{"k1":"v1","k2":"v2"}}`)
	objPath := "/tokens/" + testjson.Str(obj.body, "id")
	card := e.create(tvRoleReveal, tvCardBody())
	cardPath := "/tokens/" + testjson.Str(card.body, "id")
	gen := e.create(tvRoleGeneral, `{"type":"token","data":"general data"}`)
	genPath := "/tokens/" + testjson.Str(gen.body, "id")

	get := func(t *testing.T, path string) tvResp {
		t.Helper()
		r := e.do(tvRoleReveal, http.MethodGet, path, nil)
		tvWantStatus(t, r, http.StatusOK, "GET "+path)
		return r
	}

	t.Run("content type application/json is 415", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodPatch, objPath, `{"metadata":{"k1":"changed"}}`, "Content-Type", "application/json")
		tvWantProblem(t, r, http.StatusUnsupportedMediaType, "PATCH application/json")
		if got := testjson.Str(get(t, objPath).body, "metadata", "k1"); got != "v1" {
			t.Errorf("415 PATCH changed metadata: %q", got)
		}
	})
	t.Run("no content type is 415", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodPatch, objPath, `{"metadata":{"k1":"changed"}}`, "Content-Type", "")
		tvWantProblem(t, r, http.StatusUnsupportedMediaType, "PATCH without Content-Type")
	})
	t.Run("merge patch on data and metadata", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodPatch, objPath, `{"data":{"b":{"c":null,"d":3}},"metadata":{"k1":null,"k3":"v3"}}`,
			"Content-Type", "application/merge-patch+json; charset=utf-8")
		tvWantStatus(t, r, http.StatusOK, "merge patch")
		if testjson.Str(r.body, "modified_at") == "" || testjson.Str(r.body, "modified_by") == "" {
			t.Errorf("patched token without modified_at/modified_by: %s", r.raw)
		}
		g := get(t, objPath)
		if got, want := testjson.Field(g.body, "data"), testjson.Decode(t, `{"a":1,"b":{"keep":"`+tvSecretText+`","d":3}}`); !reflect.DeepEqual(got, want) {
			t.Errorf("data %v, want %v", got, want)
		}
		if got, want := testjson.Field(g.body, "metadata"), testjson.Decode(t, `{"k2":"v2","k3":"v3"}`); !reflect.DeepEqual(got, want) {
			t.Errorf("metadata %v, want %v", got, want)
		}
	})
	t.Run("containers replaced", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodPatch, objPath, `{"containers":["/General/Low/"]}`)
		tvWantStatus(t, r, http.StatusOK, "move container")
		if got := testjson.Field(get(t, objPath).body, "containers"); !reflect.DeepEqual(got, []any{"/general/low/"}) {
			t.Errorf("containers %v", got)
		}
	})
	t.Run("moving into a container the key may not update is 403", func(t *testing.T) {
		r := e.do(tvRoleGeneral, http.MethodPatch, genPath, `{"containers":["/pci/high/"],"metadata":{"moved":"yes"}}`)
		tvWantProblem(t, r, http.StatusForbidden, "move out of reach")
		g := get(t, genPath)
		if got := testjson.Field(g.body, "containers"); !reflect.DeepEqual(got, []any{"/general/high/"}) {
			t.Errorf("containers %v after a refused move", got)
		}
		if testjson.Has(testjson.Field(g.body, "metadata"), "moved") {
			t.Errorf("refused move changed metadata: %s", g.raw)
		}
	})
	t.Run("key without a rule on the token is 403", func(t *testing.T) {
		r := e.do(tvRoleGeneral, http.MethodPatch, cardPath, `{"metadata":{"x":"y"}}`)
		tvWantProblem(t, r, http.StatusForbidden, "patch a card with the general key")
	})
	refusals := []struct {
		name, path, body, field string
	}{
		{"id cannot change", objPath, `{"id":"x"}`, "id"},
		{"type cannot change", objPath, `{"type":"card"}`, "type"},
		{"data null", objPath, `{"data":null}`, "data"},
		{"metadata non-string", objPath, `{"metadata":{"k":5}}`, "metadata.k"},
		{"bad container", objPath, `{"containers":["nope"]}`, "containers[0]"},
		{"mask that does not parse", objPath, `{"mask":"{{ data | nope_filter }}"}`, "mask"},
		{"expires_at in the past", objPath, `{"expires_at":"1/1/2000"}`, "expires_at"},
		{"expires_at not a string", objPath, `{"expires_at":5}`, "expires_at"},
		{"search index evaluating to empty", objPath, `{"search_indexes":["{{ data.nothing }}"]}`, "search_indexes[0]"},
		{"card made invalid", cardPath, `{"data":{"number":"` + tvCardBadLuhn + `"}}`, "data.number"},
		{"card month 13", cardPath, `{"data":{"expiration_month":13}}`, "data.expiration_month"},
		{"card number removed", cardPath, `{"data":{"number":null}}`, "data.number"},
		{"body not an object", objPath, `["x"]`, "body"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := get(t, tc.path)
			r := e.do(tvRoleReveal, http.MethodPatch, tc.path, tc.body)
			tvWantProblem(t, r, http.StatusBadRequest, tc.name, tc.field)
			after := get(t, tc.path)
			for _, f := range []string{"data", "metadata", "containers", "expires_at", "modified_at", "search_indexes", "mask"} {
				if !reflect.DeepEqual(testjson.Field(before.body, f), testjson.Field(after.body, f)) {
					t.Errorf("refused patch changed %s: %v -> %v", f, testjson.Field(before.body, f), testjson.Field(after.body, f))
				}
			}
		})
	}
	t.Run("metadata not an object is 400", func(t *testing.T) {
		for _, body := range []string{`{"metadata":"x"}`, `{"metadata":5}`, `{"metadata":["a"]}`} {
			before := get(t, objPath)
			r := e.do(tvRoleReveal, http.MethodPatch, objPath, body)
			tvWantProblem(t, r, http.StatusBadRequest, "PATCH "+body, "metadata")
			if after := get(t, objPath); !reflect.DeepEqual(testjson.Field(before.body, "metadata"), testjson.Field(after.body, "metadata")) {
				t.Errorf("PATCH %s changed metadata: %v -> %v", body, testjson.Field(before.body, "metadata"), testjson.Field(after.body, "metadata"))
			}
		}
	})
	t.Run("expires_at not a string keeps the expiry", func(t *testing.T) {
		r := e.create(tvRoleReveal, `{"type":"token","data":"x","expires_at":"12/31/2099 11:00:00 PM -07:00"}`)
		path := "/tokens/" + testjson.Str(r.body, "id")
		if got := testjson.Str(r.body, "expires_at"); got != "2099-12-31T23:00:00-07:00" {
			t.Errorf("expires_at %q, want 2099-12-31T23:00:00-07:00", got)
		}
		for _, body := range []string{`{"expires_at":5}`, `{"expires_at":true}`, `{"expires_at":{}}`} {
			p := e.do(tvRoleReveal, http.MethodPatch, path, body)
			tvWantProblem(t, p, http.StatusBadRequest, "PATCH "+body, "expires_at")
			if got := testjson.Str(get(t, path).body, "expires_at"); got != "2099-12-31T23:00:00-07:00" {
				t.Errorf("after PATCH %s expires_at is %q", body, got)
			}
		}
	})
	t.Run("card patch keeps cvc and answers masked", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodPatch, cardPath, `{"data":{"expiration_month":11}}`)
		tvWantStatus(t, r, http.StatusOK, "patch card")
		if got := testjson.Str(r.body, "data", "number"); got != "XXXXXXXXXXXX4242" {
			t.Errorf("patch answer number %q, want masked", got)
		}
		g := get(t, cardPath)
		want := testjson.Decode(t, `{"number":"`+tvCard+`","expiration_month":11,"expiration_year":2030,"cvc":"`+tvCVC+`"}`)
		if got := testjson.Field(g.body, "data"); !reflect.DeepEqual(got, want) {
			t.Errorf("card data %v, want %v", got, want)
		}
	})
	t.Run("unknown token is 404", func(t *testing.T) {
		tvWantProblem(t, e.do(tvRoleReveal, http.MethodPatch, "/tokens/no-such-token", `{"metadata":{"a":"b"}}`), http.StatusNotFound, "patch unknown")
	})
}

// TestTokenDelete covers DELETE /tokens/{id}.
func TestTokenDelete(t *testing.T) {
	e := newTokenEnv(t, false, true)
	a := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	b := testjson.Str(e.create(tvRoleReveal, `{"id":"shared-name","type":"token","data":"x"}`).body, "id")
	t.Run("another tenant's token is 404", func(t *testing.T) {
		for _, id := range []string{a, b} {
			tvWantProblem(t, e.do(tvRoleOther, http.MethodDelete, "/tokens/"+url.PathEscape(id), nil), http.StatusNotFound, "delete across tenants")
			tvWantProblem(t, e.do(tvRoleOther, http.MethodGet, "/tokens/"+url.PathEscape(id), nil), http.StatusNotFound, "get across tenants")
			tvWantStatus(t, e.do(tvRoleReveal, http.MethodGet, "/tokens/"+url.PathEscape(id), nil), http.StatusOK, "token still there")
		}
	})
	t.Run("key without a rule on the token is 403", func(t *testing.T) {
		tvWantProblem(t, e.do(tvRoleGeneral, http.MethodDelete, "/tokens/"+a, nil), http.StatusForbidden, "general key deletes a card")
	})
	t.Run("delete then get", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodDelete, "/tokens/"+a, nil)
		tvWantStatus(t, r, http.StatusNoContent, "delete")
		if len(r.raw) != 0 {
			t.Errorf("204 with a body: %s", r.raw)
		}
		tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/tokens/"+a, nil), http.StatusNotFound, "get deleted")
		tvWantProblem(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/"+a, nil), http.StatusNotFound, "delete twice")
		tvWantProblem(t, e.do(tvRoleReveal, http.MethodPatch, "/tokens/"+a, `{"metadata":{"a":"b"}}`), http.StatusNotFound, "patch deleted")
		if n := e.count(); n != 1 {
			t.Errorf("total_items %d after delete, want 1", n)
		}
	})
	t.Run("deleted caller id can be reused", func(t *testing.T) {
		tvWantStatus(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/shared-name", nil), http.StatusNoContent, "delete")
		e.create(tvRoleReveal, `{"id":"shared-name","type":"token","data":"y"}`)
	})
}

// TestTokenize covers POST /tokenize.
func TestTokenize(t *testing.T) {
	e := newTokenEnv(t, false, true)
	t.Run("spec shape", func(t *testing.T) {
		body := `{"a":"x","b":[1,{"type":"card","data":{"number":"` + tvCard + `","expiration_month":12,"expiration_year":2030,"cvc":"` + tvCVC + `"},"metadata":{"m":"n"}}],"c":{"d":true},"e":null}`
		r := e.do(tvRoleReveal, http.MethodPost, "/tokenize", body)
		tvWantStatus(t, r, http.StatusOK, "tokenize")
		prims := map[string]any{
			"a":   "x",
			"b0":  json.Number("1"),
			"c.d": true,
		}
		ids := map[string]string{"a": testjson.Str(r.body, "a"), "b0": testjson.Str(r.body, "b", 0), "c.d": testjson.Str(r.body, "c", "d")}
		for where, id := range ids {
			if id == "" {
				t.Fatalf("no id at %s: %s", where, r.raw)
			}
			g := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+id, nil)
			tvWantStatus(t, g, http.StatusOK, "GET tokenized "+where)
			if got := testjson.Field(g.body, "data"); got != prims[where] || testjson.Str(g.body, "type") != "token" {
				t.Errorf("%s: token %s has data %#v type %q, want %#v", where, id, got, testjson.Str(g.body, "type"), prims[where])
			}
		}
		if b, ok := testjson.Field(r.body, "b").([]any); !ok || len(b) != 2 {
			t.Errorf("b is not a two-element array: %s", r.raw)
		}
		if v, ok := r.body.(map[string]any)["e"]; !ok || v != nil {
			t.Errorf("null member not kept as null: %s", r.raw)
		}
		cardTok := testjson.Field(r.body, "b", 1)
		if testjson.Str(cardTok, "type") != "card" || testjson.Str(cardTok, "id") == "" || testjson.Str(cardTok, "tenant_id") != e.tenantID ||
			testjson.Str(cardTok, "created_at") == "" || testjson.Str(cardTok, "created_by") == "" || testjson.Str(cardTok, "metadata", "m") != "n" {
			t.Errorf("card token object incomplete: %v", cardTok)
		}
		if testjson.Has(cardTok, "data") {
			t.Errorf("tokenized card carries data: %v", cardTok)
		}
		if got := testjson.Str(cardTok, "mask", "number"); got != "XXXXXXXXXXXX4242" {
			t.Errorf("card mask number %q, want XXXXXXXXXXXX4242", got)
		}
		if testjson.Has(testjson.Field(cardTok, "mask"), "cvc") {
			t.Errorf("card mask carries cvc: %v", cardTok)
		}
		g := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(cardTok, "id"), nil)
		if got := testjson.Str(g.body, "data", "number"); got != tvCard {
			t.Errorf("tokenized card reads back %q", got)
		}
	})
	t.Run("top-level primitive and array", func(t *testing.T) {
		r := e.do(tvRoleReveal, http.MethodPost, "/tokenize", `"`+tvSecretText+`"`)
		tvWantStatus(t, r, http.StatusOK, "tokenize primitive")
		if id, ok := r.body.(string); !ok || id == "" {
			t.Errorf("answer %s, want an id string", r.raw)
		}
		r = e.do(tvRoleReveal, http.MethodPost, "/tokenize", `[{"type":"bank","data":{"routing_number":"`+tvRouting+`","account_number":"`+tvAccount+`"}}]`)
		tvWantStatus(t, r, http.StatusOK, "tokenize bank")
		if got := testjson.Str(r.body, 0, "mask", "account_number"); got != "XXXXX6789" {
			t.Errorf("bank mask account %q: %s", got, r.raw)
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		before, usage := e.count(), e.usageTotal()
		r := e.do(tvRoleReveal, http.MethodPost, "/tokenize", `["a","b","c","d","e","`+tvSecretText+`"]`)
		tvWantProblem(t, r, http.StatusBadRequest, "six primitives")
		if !bytes.Contains(r.raw, []byte("limit")) || !bytes.Contains(r.raw, []byte("5")) {
			t.Errorf("answer does not mention the limit of 5: %s", r.raw)
		}
		if n := e.count(); n != before {
			t.Errorf("total_items %d after a refused tokenize, want %d", n, before)
		}
		if u := e.usageTotal(); u != usage {
			t.Errorf("usage %s after a refused tokenize, want %s", u, usage)
		}
	})
	t.Run("exactly the limit", func(t *testing.T) {
		before := e.count()
		r := e.do(tvRoleReveal, http.MethodPost, "/tokenize", `{"a":["1","2"],"b":{"c":3,"d":[4,{"e":5}]}}`)
		tvWantStatus(t, r, http.StatusOK, "five primitives")
		if n := e.count(); n != before+5 {
			t.Errorf("total_items %d, want %d", n, before+5)
		}
	})
	errCases := []struct {
		name, body, field string
	}{
		{"bad Luhn at position 4", `["a","b","c",{"type":"card","data":{"number":"` + tvCardBadLuhn + `"}}]`, "[3].data.number"},
		{"bad card inside an object", `{"x":"a","pay":{"card":{"type":"card","data":{"number":"` + tvCard + `","cvc":"12"}}}}`, "pay.card.data.cvc"},
		{"unknown type", `["a",{"type":"cheque","data":"x"}]`, "[1].type"},
		{"metadata not strings", `["a",{"type":"token","data":"x","metadata":{"k":1}}]`, "[1].metadata.k"},
		{"metadata null value", `["a",{"type":"token","data":"x","metadata":{"k":null}}]`, "[1].metadata.k"},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count()
			r := e.do(tvRoleReveal, http.MethodPost, "/tokenize", tc.body)
			tvWantProblem(t, r, http.StatusBadRequest, tc.name, tc.field)
			if n := e.count(); n != before {
				t.Errorf("total_items %d after a refused tokenize, want %d: some tokens were created", n, before)
			}
		})
	}
	t.Run("destination container not allowed is 403 and atomic", func(t *testing.T) {
		before := e.count()
		r := e.do(tvRoleGeneral, http.MethodPost, "/tokenize", `["a","b",{"type":"card","data":{"number":"`+tvCard+`"}}]`)
		tvWantProblem(t, r, http.StatusForbidden, "tokenize a card with the general key")
		if n := e.count(); n != before {
			t.Errorf("total_items %d, want %d", n, before)
		}
	})
	t.Run("masking key", func(t *testing.T) {
		r := e.do(tvRoleMask, http.MethodPost, "/tokenize", tvJSON(t, map[string]any{"card": tvCardBody()}))
		tvWantStatus(t, r, http.StatusOK, "tokenize with masking key")
		if got := testjson.Str(r.body, "card", "mask", "number"); got != "XXXXXXXXXXXX4242" {
			t.Errorf("mask number %q: %s", got, r.raw)
		}
	})
}

// TestTokenUsageReport checks the usage report's counts.
func TestTokenUsageReport(t *testing.T) {
	e := newTokenEnv(t, false, true)
	e.create(tvRoleReveal, `{"type":"token","data":"a"}`)
	e.create(tvRoleReveal, `{"type":"token","data":"b"}`)
	e.create(tvRoleReveal, tvCardBody())
	e.create(tvRoleReveal, tvCardBody())
	bank := testjson.Str(e.create(tvRoleReveal, tvBankBody()).body, "id")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/tokenize", `["x","y",{"type":"card","data":{"number":"`+tvCard+`"}}]`), http.StatusOK, "tokenize")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/"+bank, nil), http.StatusNoContent, "delete bank")
	// refused writes count nothing
	e.do(tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"`+tvCardBadLuhn+`"}}`)
	e.do(tvRoleReveal, http.MethodPost, "/tokenize", `["1","2","3","4","5","6"]`)

	r := e.do(tvRoleMgmt, http.MethodGet, "/tenants/self/reports/usage", nil)
	tvWantStatus(t, r, http.StatusOK, "usage")
	want := map[string]string{"token": "4", "card": "3", "bank": "0"}
	for typ, n := range want {
		if got := fmt.Sprint(testjson.Field(r.body, "token_report", "metrics_by_type", typ, "count")); got != n && !(n == "0" && got == "<nil>") {
			t.Errorf("%s count %s, want %s: %s", typ, got, n, r.raw)
		}
	}
	if got := testjson.Str(r.body, "token_report", "metrics_by_type", "card", "last_created_at"); got == "" {
		t.Errorf("card last_created_at missing: %s", r.raw)
	}
	if got := fmt.Sprint(testjson.Field(r.body, "total_tokens")); got != "7" {
		t.Errorf("total_tokens %s, want 7: %s", got, r.raw)
	}
	if got := fmt.Sprint(testjson.Field(r.body, "token_report", "total_tokens")); got != "7" {
		t.Errorf("token_report.total_tokens %s, want 7: %s", got, r.raw)
	}
	if got := fmt.Sprint(testjson.Field(r.body, "token_report", "monthly_active_tokens")); got != "8" {
		t.Errorf("monthly_active_tokens %s, want 8 (every token created this month): %s", got, r.raw)
	}
	if n := e.count(); n != 7 {
		t.Errorf("GET /tokens total_items %d, want 7", n)
	}
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/tenants/self/reports/usage", nil), http.StatusForbidden, "usage with a private key")
	other := e.do("other-management", http.MethodGet, "/tenants/self/reports/usage", nil)
	if got := fmt.Sprint(testjson.Field(other.body, "total_tokens")); got != "0" {
		t.Errorf("other tenant total_tokens %s, want 0", got)
	}
}

// TestTokenSecretsInRefusals sends sensitive values where they do not
// belong; the recorded answers and logs are checked when the test ends.
func TestTokenSecretsInRefusals(t *testing.T) {
	e := newTokenEnv(t, false, true)
	id := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	cases := []struct {
		name, role, method, path, body string
	}{
		{"card number as id", tvRoleReveal, http.MethodPost, "/tokens", `{"id":"` + tvCard + `#","type":"token","data":"x"}`},
		{"card number as container", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"token","data":"x","containers":["/` + tvCard + `"]}`},
		{"card number as unknown member", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `","` + tvCard + `":"` + tvCVC + `"}}`},
		{"card number as type", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"` + tvCard + `","data":"x"}`},
		{"bad mask over a card", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `"},"mask":"{{ data.number | nope }}"}`},
		{"mask failing at evaluation", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `","cvc":"` + tvCVC + `"},"mask":"{{ data | json: '$.nope' }}"}`},
		{"cvc under the wrong type", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"bank","data":{"routing_number":"` + tvRouting + `","account_number":"` + tvAccount + `","cvc":"` + tvCVC + `"}}`},
		{"id expression failing over data", tvRoleReveal, http.MethodPost, "/tokens", `{"id":"{{ data | to_number }}","type":"token","data":"` + tvSecretText + `"}`},
		{"id expression yielding data with a forbidden char", tvRoleReveal, http.MethodPost, "/tokens", `{"id":"{{ data }}/","type":"token","data":"` + tvSecretText + `"}`},
		{"search index over data failing", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `"},"search_indexes":["{{ data.number | to_boolean }}"]}`},
		{"fingerprint over data failing", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `"},"fingerprint_expression":"{{ data | json: '$.nope' }}"}`},
		{"bad JSON after a card number", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `"}`},
		{"duplicate member", tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","data":{"number":"` + tvCard + `","number":"` + tvCardBadLuhn + `"}}`},
		{"create by general key", tvRoleGeneral, http.MethodPost, "/tokens", tvJSON(t, tvCardBody())},
		{"create by redacting key", tvRoleRedact, http.MethodPost, "/tokens", tvJSON(t, tvCardBody())},
		{"create by masking key", tvRoleMask, http.MethodPost, "/tokens", tvJSON(t, tvBankBody())},
		{"patch by revealing key", tvRoleReveal, http.MethodPatch, "/tokens/" + id, `{"metadata":{"x":"y"}}`},
		{"patch with invalid cvc", tvRoleReveal, http.MethodPatch, "/tokens/" + id, `{"data":{"cvc":"` + tvCVC + `1"}}`},
		{"list by masking key", tvRoleMask, http.MethodGet, "/tokens", ""},
		{"list by redacting key", tvRoleRedact, http.MethodGet, "/tokens", ""},
		{"tokenize by revealing key", tvRoleReveal, http.MethodPost, "/tokenize", `{"c":` + tvJSON(t, tvCardBody()) + `,"b":` + tvJSON(t, tvBankBody()) + `}`},
		{"tokenize with bad member after card", tvRoleReveal, http.MethodPost, "/tokenize", `[` + tvJSON(t, tvCardBody()) + `,{"type":"card","data":{"number":"` + tvCard + `","cvc":"1"}}]`},
		{"no key", "", http.MethodPost, "/tokens", tvJSON(t, tvCardBody())},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := e.do(tc.role, tc.method, tc.path, body)
			if r.status >= 500 {
				t.Errorf("status %d: %s", r.status, r.raw)
			}
		})
	}
	// the secrets check reads real log lines: the refusals were logged
	if logs := e.logs.String(); strings.Count(logs, "request refused") < 10 {
		t.Errorf("expected the refusals in the debug log, got:\n%s", logs)
	}
}

// TestTokenExpiry checks that an expired token is gone to every reader at
// once, before the sweep purges it, and that a CVC outlives its retention
// in no read.
func TestTokenExpiry(t *testing.T) {
	clock := &testclock.Clock{}
	e := newTokenEnvClock(t, clock)
	first := testjson.Str(e.create(tvRoleReveal, `{"type":"token","data":"first"}`).body, "id")
	clock.Advance(time.Millisecond)
	soon := e.create(tvRoleReveal, `{"id":"expiring","type":"token","data":"x","expires_at":"`+clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	clock.Advance(time.Millisecond)
	last := testjson.Str(e.create(tvRoleReveal, `{"type":"token","data":"last"}`).body, "id")
	if testjson.Str(soon.body, "expires_at") == "" {
		t.Fatalf("no expires_at: %s", soon.raw)
	}
	clock.Advance(time.Millisecond)
	card := "/tokens/" + testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	if got := testjson.Str(e.do(tvRoleReveal, http.MethodGet, card, nil).body, "data", "cvc"); got != tvCVC {
		t.Errorf("cvc %q within retention, want %s", got, tvCVC)
	}
	clock.Advance(2 * time.Hour) // the sweep has not run: it ticks on real time

	// past the one-hour CVC retention the cvc is gone, the card stays
	g := e.do(tvRoleReveal, http.MethodGet, card, nil)
	if got := testjson.Field(g.body, "data"); !reflect.DeepEqual(got, testjson.Decode(t, `{"number":"`+tvCard+`","expiration_month":12,"expiration_year":2030}`)) {
		t.Errorf("card past CVC retention: %s", g.raw)
	}

	tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/tokens/expiring", nil), http.StatusNotFound, "GET expired")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPatch, "/tokens/expiring", `{"metadata":{"a":"b"}}`), http.StatusNotFound, "PATCH expired")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/expiring", nil), http.StatusNotFound, "DELETE expired")
	r := e.do(tvRoleReveal, http.MethodGet, "/tokens?id=expiring", nil)
	if n := fmt.Sprint(testjson.Field(r.body, "pagination", "total_items")); n != "0" {
		t.Errorf("list by id: total_items %s, want 0: %s", n, r.raw)
	}

	// paging through the list must see each live token once, and the same
	// total on every page
	var seen []string
	totals := map[string]bool{}
	for page := 1; page <= 4; page++ {
		r := e.do(tvRoleReveal, http.MethodGet, fmt.Sprintf("/tokens?size=1&page=%d", page), nil)
		tvWantStatus(t, r, http.StatusOK, "list page")
		totals[fmt.Sprint(testjson.Field(r.body, "pagination", "total_items"))] = true
		for _, d := range testjson.Field(r.body, "data").([]any) {
			seen = append(seen, testjson.Str(d, "id"))
		}
	}
	if want := []string{first, last, strings.TrimPrefix(card, "/tokens/")}; !slices.Equal(seen, want) {
		t.Errorf("paged ids %v, want %v", seen, want)
	}
	if len(totals) != 1 || !totals["3"] {
		t.Errorf("total_items across pages %v, want always 3", totals)
	}
	// the id is free again
	e.create(tvRoleReveal, `{"id":"expiring","type":"token","data":"again"}`)
}

// TestTokenConcurrentWrites sends creates and tokenizes from several
// clients at once: every one must succeed (a write conflict between
// independent tokens is the vault's to resolve, not a 500), and the counts
// must add up.
func TestTokenConcurrentWrites(t *testing.T) {
	cases := []struct {
		name       string
		path, body string
		clients    int
		perClient  int
		tokens     int // tokens per request
		wantStatus int
	}{
		{"create card", "/tokens", tvJSON(t, tvCardBody()), 16, 100, 1, http.StatusCreated},
		{"tokenize 5", "/tokenize", `{"a":"x","b":[1,` + tvJSON(t, tvCardBody()) + `],"c":{"d":true,"e":` + tvJSON(t, tvBankBody()) + `}}`, 4, 250, 5, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTokenEnv(t, false, false)
			key := e.keys[tvRoleReveal]
			var (
				wg     sync.WaitGroup
				ok     atomic.Int64
				mu     sync.Mutex
				failed = map[string]int{}
			)
			for c := 0; c < tc.clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < tc.perClient; i++ {
						req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
						req.Header.Set("SVC-API-KEY", key)
						req.Header.Set("Content-Type", "application/json")
						w := httptest.NewRecorder()
						_ = e.h.ServeHTTP(w, req, nil)
						if w.Code == tc.wantStatus {
							ok.Add(1)
							continue
						}
						mu.Lock()
						failed[fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String()))]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			for answer, n := range failed {
				t.Errorf("%d of %d requests answered %s", n, tc.clients*tc.perClient, answer)
			}
			if len(failed) > 0 {
				t.Logf("handler log:\n%s", tvTail(e.logs.String(), 5))
			}
			want := int(ok.Load()) * tc.tokens
			if n := e.count(); n != want {
				t.Errorf("total_items %d, want %d", n, want)
			}
			if u := e.usageTotal(); u != fmt.Sprint(want) {
				t.Errorf("usage total_tokens %s, want %d", u, want)
			}
		})
	}
}

// tvTail returns the last n lines of s.
func tvTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
