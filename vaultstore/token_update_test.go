package vaultstore

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// mustUpdate applies a patch and fails the test on error.
func (w *tokenWorld) mustUpdate(app, id string, patch map[string]any) *Token {
	w.tb.Helper()
	tok, err := w.update(app, id, patch)
	if err != nil {
		w.tb.Fatalf("UpdateToken(%s, %s, %v): %v", app, id, patch, err)
	}
	return tok
}

// patchBody decodes a JSON merge patch as the HTTP edge does.
func patchBody(tb testing.TB, s string) map[string]any {
	tb.Helper()
	m, ok := decodeJSON(tb, s).(map[string]any)
	if !ok {
		tb.Fatalf("patch %s is not an object", s)
	}
	return m
}

func TestUpdateTokenMergesData(t *testing.T) {
	w := newTokenWorld(t, nil)
	for _, tc := range []struct {
		name     string
		in       TokenInput
		patch    string
		revealed string // JSON
	}{
		{"object members merged, null removes, arrays replaced", TokenInput{Type: "token", Data: decodeJSON(t, `{"a":"1","b":{"c":"2","d":"3"},"e":["x"]}`)},
			`{"data":{"a":null,"b":{"d":"4","f":"5"},"e":["y","z"]}}`, `{"b":{"c":"2","d":"4","f":"5"},"e":["y","z"]}`},
		{"string replaced", TokenInput{Type: "token", Data: "old"}, `{"data":"new"}`, `"new"`},
		{"object replaced by a string", TokenInput{Type: "token", Data: decodeJSON(t, `{"a":"1"}`)}, `{"data":"flat"}`, `"flat"`},
		{"card month changed, number and cvc kept", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)},
			`{"data":{"expiration_month":3}}`, `{"number":"4242424242424242","expiration_month":3,"expiration_year":2030,"cvc":"9173"}`},
		{"card cvc replaced", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)},
			`{"data":{"cvc":"4821"}}`, `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"4821"}`},
		{"card cvc added", TokenInput{Type: "card", Data: cardData(testVisa, "")},
			`{"data":{"cvc":"4821"}}`, `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"4821"}`},
		{"card cvc removed", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)},
			`{"data":{"cvc":null}}`, `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030}`},
		{"card expiry removed", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)},
			`{"data":{"expiration_month":null,"expiration_year":null}}`, `{"number":"4242424242424242","cvc":"9173"}`},
		{"bank account replaced", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)},
			`{"data":{"account_number":"12345678901"}}`, `{"routing_number":"021000021","account_number":"12345678901"}`},
		{"data untouched by a metadata patch", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)},
			`{"metadata":{"a":"b"}}`, `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"9173"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			tok := w.mustCreate("admin", tc.in)
			w.mustUpdate("admin", tok.ID, patchBody(t, tc.patch))
			got := w.mustGet("admin", tok.ID)
			if !jsonEqual(t, got.Data, tc.revealed) {
				t.Errorf("data after patch = %s, want %s", encodeJSON(t, got.Data), tc.revealed)
			}
			if got.Type != tc.in.Type || got.ID != tok.ID || !got.CreatedAt.Equal(tok.CreatedAt.Time) || got.CreatedBy != tok.CreatedBy {
				t.Errorf("identity changed: %+v", got)
			}
			if got.ModifiedAt == nil || got.ModifiedAt.Before(got.CreatedAt.Time) || got.ModifiedBy != w.app("admin").ID {
				t.Errorf("modified_at %v by %q", got.ModifiedAt, got.ModifiedBy)
			}
		})
	}
}

func TestUpdateTokenMetadataAndMask(t *testing.T) {
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "token", Data: decodeJSON(t, `{"a":"alpha","b":"beta"}`),
		Metadata: map[string]string{"k1": "v1", "k2": "v2"},
		Mask:     map[string]any{"a": "{{ data.a | reveal_last: 2 }}", "b": "{{ data.b }}"}})
	if got := w.mustGet("masker", tok.ID); !jsonEqual(t, got.Data, `{"a":"XXXha","b":"beta"}`) {
		t.Fatalf("masked before = %s", encodeJSON(t, got.Data))
	}
	w.mustUpdate("admin", tok.ID, patchBody(t, `{"metadata":{"k2":null,"k3":"v3"},"mask":{"b":null,"c":"fixed"}}`))
	got := w.mustGet("masker", tok.ID)
	if want := map[string]string{"k1": "v1", "k3": "v3"}; !sameJSON(t, got.Metadata, want) {
		t.Errorf("metadata = %v, want %v", got.Metadata, want)
	}
	if !jsonEqual(t, got.Mask, `{"a":"{{ data.a | reveal_last: 2 }}","c":"fixed"}`) {
		t.Errorf("mask = %s", encodeJSON(t, got.Mask))
	}
	if !jsonEqual(t, got.Data, `{"a":"XXXha","c":"fixed"}`) {
		t.Errorf("masked after = %s", encodeJSON(t, got.Data))
	}
	// the mask is evaluated on the current data
	w.mustUpdate("admin", tok.ID, patchBody(t, `{"data":{"a":"omega"}}`))
	if got := w.mustGet("masker", tok.ID); !jsonEqual(t, got.Data, `{"a":"XXXga","c":"fixed"}`) {
		t.Errorf("masked after a data patch = %s", encodeJSON(t, got.Data))
	}
	// metadata: null clears it; mask: null leaves masked reads without data
	w.mustUpdate("admin", tok.ID, patchBody(t, `{"metadata":null,"mask":null}`))
	got = w.mustGet("masker", tok.ID)
	if len(got.Metadata) != 0 || got.Mask != nil || got.Data != nil {
		t.Errorf("after null metadata and mask: metadata %v mask %v data %v", got.Metadata, got.Mask, got.Data)
	}
}

func TestUpdateTokenReplacedFields(t *testing.T) {
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), SearchIndexes: []string{"{{ data.number | last4 }}"}})
	expires := w.clock.Peek().Add(48 * time.Hour).Truncate(time.Second)

	got := w.mustUpdate("admin", tok.ID, map[string]any{
		"containers":             []any{"/PCI/Low/"},
		"search_indexes":         []any{"{{ data.expiration_year }}", "{{ data.number | last4 }}"},
		"fingerprint_expression": "{{ data.number }}",
		"deduplicate_token":      true,
		"expires_at":             expires.Format(time.RFC3339),
	})
	if !slices.Equal(got.Containers, []string{"/pci/low/"}) {
		t.Errorf("containers = %v", got.Containers)
	}
	if !slices.Equal(got.SearchIndexes, []string{"{{ data.expiration_year }}", "{{ data.number | last4 }}"}) {
		t.Errorf("search_indexes = %v", got.SearchIndexes)
	}
	if got.FingerprintExpression != "{{ data.number }}" || got.Fingerprint != w.keys().fingerprintOf("card", testVisa) {
		t.Errorf("fingerprint_expression %q fingerprint %q", got.FingerprintExpression, got.Fingerprint)
	}
	if got.DeduplicateToken == nil || !*got.DeduplicateToken {
		t.Errorf("deduplicate_token = %v", got.DeduplicateToken)
	}
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) {
		t.Errorf("expires_at = %v, want %v", got.ExpiresAt, expires)
	}
	if entries := w.indexEntries(tok.ID); !slices.Equal(entries, []string{"exp", "fpc", "fpx", "six", "six", "tok", "tokc"}) {
		t.Errorf("entries = %v", entries)
	}
	// the list order entry carries the new container
	if toks, _ := w.mustList("pcihigh", TokenFilter{}, 0, 10); len(toks) != 0 {
		t.Errorf("a /pci/high/ reader still lists the moved token")
	}
	if toks, total := w.mustList("pci", TokenFilter{}, 0, 10); total != 1 || len(toks) != 1 {
		t.Errorf("a /pci/ reader lists %d (total %d)", len(toks), total)
	}

	// null clears the replaced fields (containers back to the default)
	got = w.mustUpdate("admin", tok.ID, map[string]any{
		"containers": nil, "search_indexes": nil, "fingerprint_expression": nil, "deduplicate_token": nil, "expires_at": nil,
	})
	if !slices.Equal(got.Containers, []string{"/pci/high/"}) || got.SearchIndexes != nil || got.FingerprintExpression != "" ||
		got.Fingerprint != "" || got.DeduplicateToken != nil || got.ExpiresAt != nil {
		t.Errorf("after clearing: %+v", got)
	}
	if entries := w.indexEntries(tok.ID); !slices.Equal(entries, []string{"tok", "tokc"}) {
		t.Errorf("entries after clearing = %v", entries)
	}
	if got := w.mustGet("admin", tok.ID); !jsonEqual(t, got.Data, encodeJSON(t, cardData(testVisa, testCVC))) {
		t.Errorf("data changed: %s", encodeJSON(t, got.Data))
	}
}

func TestUpdateTokenRejects(t *testing.T) {
	w := newTokenWorld(t, map[string]string{"fingerprint_tokens": "true"})
	card := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), Metadata: map[string]string{"k": "v"},
		ExpiresAt: w.clock.Peek().Add(72 * time.Hour).Truncate(time.Second).Format(time.RFC3339)})
	bank := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
	past := w.clock.Peek().Add(-time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		name   string
		id     string
		patch  map[string]any
		fields []string
	}{
		{"id", card.ID, map[string]any{"id": "new-id"}, []string{"id"}},
		{"type", card.ID, map[string]any{"type": "token"}, []string{"type"}},
		{"tenant_id", card.ID, map[string]any{"tenant_id": "00000000-0000-0000-0000-000000000000"}, []string{"tenant_id"}},
		{"fingerprint", card.ID, map[string]any{"fingerprint": "abc"}, []string{"fingerprint"}},
		{"created_by", card.ID, map[string]any{"created_by": "me"}, []string{"created_by"}},
		{"created_at", card.ID, map[string]any{"created_at": "2020-01-01T00:00:00Z"}, []string{"created_at"}},
		{"modified_by", card.ID, map[string]any{"modified_by": "me"}, []string{"modified_by"}},
		{"modified_at", card.ID, map[string]any{"modified_at": "2020-01-01T00:00:00Z"}, []string{"modified_at"}},
		{"immutable null", card.ID, map[string]any{"type": nil}, []string{"type"}},
		{"immutable beside a valid change", card.ID, map[string]any{"id": "x-y-z", "metadata": map[string]any{"k": "w"}}, []string{"id"}},
		{"data null", card.ID, map[string]any{"data": nil}, []string{"data"}},
		{"card Luhn failure", card.ID, patchBody(t, `{"data":{"number":"4242424242424241"}}`), []string{"data.number"}},
		{"card number removed", card.ID, patchBody(t, `{"data":{"number":null}}`), []string{"data.number"}},
		{"card month 13", card.ID, patchBody(t, `{"data":{"expiration_month":13}}`), []string{"data.expiration_month"}},
		{"card bad cvc", card.ID, patchBody(t, `{"data":{"cvc":"91735"}}`), []string{"data.cvc"}},
		{"card unknown member", card.ID, patchBody(t, `{"data":{"pin":"1234"}}`), []string{"data.pin"}},
		{"card data replaced by a string", card.ID, patchBody(t, `{"data":"4242424242424242"}`), []string{"data"}},
		{"bank checksum failure", bank.ID, patchBody(t, `{"data":{"routing_number":"021000022"}}`), []string{"data.routing_number"}},
		{"bank account too long", bank.ID, patchBody(t, `{"data":{"account_number":"123456789012345678"}}`), []string{"data.account_number"}},
		{"bad container", card.ID, patchBody(t, `{"containers":["pci"]}`), []string{"containers[0]"}},
		{"containers not an array", card.ID, patchBody(t, `{"containers":"/pci/"}`), []string{"containers"}},
		{"metadata value not a string", card.ID, patchBody(t, `{"metadata":{"n":5}}`), []string{"metadata.n"}},
		{"search_indexes not an array", card.ID, patchBody(t, `{"search_indexes":"x"}`), []string{"search_indexes"}},
		{"search index evaluating to nothing", card.ID, patchBody(t, `{"search_indexes":["{{ data.nothing }}"]}`), []string{"search_indexes[0]"}},
		{"fingerprint_expression not a string", card.ID, patchBody(t, `{"fingerprint_expression":5}`), []string{"fingerprint_expression"}},
		{"deduplicate_token not a boolean", card.ID, patchBody(t, `{"deduplicate_token":"yes"}`), []string{"deduplicate_token"}},
		{"expires_at in the past", card.ID, map[string]any{"expires_at": past}, []string{"expires_at"}},
		{"expires_at not a date", card.ID, patchBody(t, `{"expires_at":"soon"}`), []string{"expires_at"}},
		{"expires_at not a string", card.ID, patchBody(t, `{"expires_at":5}`), []string{"expires_at"}},
		{"mask that does not parse", card.ID, patchBody(t, `{"mask":{"number":"{{ data.number | no_such_filter }}"}}`), []string{"mask.number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			before, err := w.record(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			beforeEntries := w.indexEntries(tc.id)
			_, err = w.update("admin", tc.id, tc.patch)
			wantFieldErrors(t, err, tc.fields...)
			after, err := w.record(tc.id)
			if err != nil {
				t.Fatalf("token gone after a refused update: %v", err)
			}
			if !sameJSON(t, before, after) {
				t.Errorf("a refused update changed the stored token:\nbefore %s\nafter  %s", encodeJSON(t, before.Token), encodeJSON(t, after.Token))
			}
			if got := w.indexEntries(tc.id); !slices.Equal(got, beforeEntries) {
				t.Errorf("index entries %v -> %v", beforeEntries, got)
			}
		})
	}
	t.Run("unknown id", func(t *testing.T) {
		_, err := w.at(t).update("admin", "no-such-id", map[string]any{"metadata": map[string]any{"a": "b"}})
		wantErrorIs(t, err, ErrNotFound)
	})
	t.Run("without token:update", func(t *testing.T) {
		_, err := w.at(t).update("writer", card.ID, map[string]any{"metadata": map[string]any{"a": "b"}})
		wantErrorIs(t, err, ErrForbidden)
	})
}

// After a patch the fingerprint is the one a fresh token with the same
// data (and expression) would get, and the index follows it.
func TestUpdateTokenRecomputesFingerprint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		in       TokenInput
		patch    string
		fresh    TokenInput
	}{
		{"card number", map[string]string{"fingerprint_tokens": "true"},
			TokenInput{Type: "card", Data: cardData(testVisa, testCVC)}, `{"data":{"number":"4000056655665556"}}`,
			TokenInput{Type: "card", Data: cardData(testVisa2, testCVC)}},
		{"bank routing", map[string]string{"fingerprint_tokens": "true"},
			TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)}, `{"data":{"routing_number":"011000015"}}`,
			TokenInput{Type: "bank", Data: bankData(testRouting2, testAccount)}},
		{"generic object", map[string]string{"fingerprint_tokens": "true"},
			TokenInput{Type: "token", Data: decodeJSON(t, `{"a":"1","b":"2"}`)}, `{"data":{"b":"3"}}`,
			TokenInput{Type: "token", Data: decodeJSON(t, `{"b":"3","a":"1"}`)}},
		{"expression given by the patch", nil,
			TokenInput{Type: "card", Data: cardData(testVisa, "")}, `{"fingerprint_expression":"{{ data.expiration_year }}-{{ data.number | last4 }}"}`,
			TokenInput{Type: "card", Data: cardData(testVisa, ""), FingerprintExpression: "{{ data.expiration_year }}-{{ data.number | last4 }}"}},
		{"expression over data", nil,
			TokenInput{Type: "token", Data: decodeJSON(t, `{"x":"1"}`), FingerprintExpression: "{{ data.x }}"}, `{"data":{"x":"2"}}`,
			TokenInput{Type: "token", Data: "2", FingerprintExpression: "{{ data }}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTokenWorld(t, tc.settings)
			tok := w.mustCreate("admin", tc.in)
			fresh := w.mustCreate("admin", tc.fresh)
			got := w.mustUpdate("admin", tok.ID, patchBody(t, tc.patch))
			if got.Fingerprint == "" || got.Fingerprint != fresh.Fingerprint {
				t.Errorf("fingerprint after patch %q, fresh token %q", got.Fingerprint, fresh.Fingerprint)
			}
			if got.Fingerprint == tok.Fingerprint {
				t.Errorf("fingerprint unchanged by the patch")
			}
			if read := w.mustGet("admin", tok.ID); read.Fingerprint != got.Fingerprint {
				t.Errorf("fingerprint read back %q, answered %q", read.Fingerprint, got.Fingerprint)
			}
			fpx := kvKeys(t, w.s, string(tenantDataPrefix(w.tenant.ID))+"fpx/")
			if !slices.Contains(fpx, string(fingerprintIndexKey(w.tenant.ID, got.Fingerprint, tok.ID))) {
				t.Errorf("no index entry for the new fingerprint")
			}
			if tok.Fingerprint != "" && slices.Contains(fpx, string(fingerprintIndexKey(w.tenant.ID, tok.Fingerprint, tok.ID))) {
				t.Errorf("the old fingerprint's index entry is left")
			}
		})
	}
}

// A card's fingerprint does not depend on whether its CVC has been moved
// out of the data: an update that changes nothing the expression reads
// leaves the fingerprint as a fresh token with the same data has it.
func TestUpdateTokenFingerprintWithCVC(t *testing.T) {
	w := newTokenWorld(t, nil)
	in := TokenInput{Type: "card", Data: cardData(testVisa, testCVC), FingerprintExpression: "{{ data | stringify }}"}
	tok := w.mustCreate("admin", in)
	fresh := w.mustCreate("admin", in)
	if tok.Fingerprint != fresh.Fingerprint {
		t.Fatalf("two cards with the same data: fingerprints %q and %q", tok.Fingerprint, fresh.Fingerprint)
	}
	for _, patch := range []string{`{"metadata":{"k":"v"}}`, `{"data":{"expiration_month":12}}`} {
		got := w.mustUpdate("admin", tok.ID, patchBody(t, patch))
		if got.Fingerprint != fresh.Fingerprint {
			t.Errorf("after %s the fingerprint is %q; a fresh token with the same data has %q", patch, got.Fingerprint, fresh.Fingerprint)
		}
	}
}

// Moving a token needs token:update on its container and on the new one.
func TestUpdateTokenMoveContainers(t *testing.T) {
	w := newTokenWorld(t, nil)
	for _, tc := range []struct {
		name, app string
		in        TokenInput
		to        string
		ok        bool
	}{
		{"update on both", "admin", TokenInput{Type: "card", Data: cardData(testVisa, "")}, "/pci/low/", true},
		{"within the caller's containers", "pciupdater", TokenInput{Type: "card", Data: cardData(testVisa, "")}, "/pci/low/", true},
		{"no update on the destination", "pciupdater", TokenInput{Type: "card", Data: cardData(testVisa, "")}, "/general/cards/", false},
		{"no update on the source", "generalupdater", TokenInput{Type: "card", Data: cardData(testVisa, "")}, "/general/cards/", false},
		{"source allowed, destination readable only", "generalupdater", TokenInput{Type: "token", Data: "x"}, "/pci/high/", false},
		{"sub-container rule does not cover the parent", "pcihigh", TokenInput{Type: "card", Data: cardData(testVisa, "")}, "/pci/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			tok := w.mustCreate("admin", tc.in)
			before, _ := w.record(tok.ID)
			got, err := w.update(tc.app, tok.ID, map[string]any{"containers": []any{tc.to}})
			if !tc.ok {
				wantErrorIs(t, err, ErrForbidden)
				if after, _ := w.record(tok.ID); !sameJSON(t, before, after) {
					t.Errorf("a refused move changed the token")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Containers, []string{tc.to}) || !slices.Equal(w.mustGet("admin", tok.ID).Containers, []string{tc.to}) {
				t.Errorf("containers = %v, want [%s]", got.Containers, tc.to)
			}
		})
	}
}

// An update answers with data masked at most.
func TestUpdateTokenAnswer(t *testing.T) {
	w := newTokenWorld(t, nil)
	card := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	for _, tc := range []struct {
		app, patch, want string
	}{
		{"admin", `{"data":{"number":"4000056655665556"}}`, `{"number":"XXXXXXXXXXXX5556","expiration_month":12,"expiration_year":2030}`},
		{"masker", `{"metadata":{"a":"b"}}`, `{"number":"XXXXXXXXXXXX5556","expiration_month":12,"expiration_year":2030}`},
		{"redactor", `{"metadata":{"a":"c"}}`, ``},
		{"plain", `{"metadata":{"a":"d"}}`, `{"number":"XXXXXXXXXXXX5556","expiration_month":12,"expiration_year":2030}`},
	} {
		t.Run(tc.app, func(t *testing.T) {
			w := w.at(t)
			got := w.mustUpdate(tc.app, card.ID, patchBody(t, tc.patch))
			if tc.want == "" && got.Data != nil || tc.want != "" && !jsonEqual(t, got.Data, tc.want) {
				t.Errorf("answer data = %s, want %s", encodeJSON(t, got.Data), tc.want)
			}
			if raw := encodeJSON(t, got); strings.Contains(raw, testVisa2) || holdsCVC(raw) {
				t.Errorf("update answer reveals data")
			}
		})
	}
	gen := w.mustCreate("admin", TokenInput{Type: "token", Data: "secret"})
	if got := w.mustUpdate("mixed", gen.ID, map[string]any{"data": "secret2"}); got.Data != nil {
		t.Errorf("update answer of a generic token without mask = %v, want no data", got.Data)
	}
	if got := w.mustGet("mixed", gen.ID); got.Data != "secret2" {
		t.Errorf("revealed after update = %v", got.Data)
	}
}

func TestUpdateTokenSearchIndexes(t *testing.T) {
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), SearchIndexes: []string{"{{ data.number | last4 }}"}})
	tk := w.keys()
	sixKeys := func() []string { return kvKeys(t, w.s, string(tenantDataPrefix(w.tenant.ID))+"six/") }
	if got := sixKeys(); !slices.Equal(got, []string{string(searchIndexKey(w.tenant.ID, tk.searchHashOf("4242"), tok.ID))}) {
		t.Fatalf("index before = %v", got)
	}
	w.mustUpdate("admin", tok.ID, patchBody(t, `{"data":{"number":"5555555555554444"}}`))
	if got := sixKeys(); !slices.Equal(got, []string{string(searchIndexKey(w.tenant.ID, tk.searchHashOf("4444"), tok.ID))}) {
		t.Errorf("index after a data patch = %v", got)
	}
	w.mustUpdate("admin", tok.ID, patchBody(t, `{"search_indexes":["{{ data.expiration_year }}"]}`))
	if got := sixKeys(); !slices.Equal(got, []string{string(searchIndexKey(w.tenant.ID, tk.searchHashOf("2030"), tok.ID))}) {
		t.Errorf("index after a search_indexes patch = %v", got)
	}
}

// With dedupe on, an update may not turn a token into a duplicate of
// another live one.
func TestUpdateTokenDedupeConflict(t *testing.T) {
	w := newTokenWorld(t, map[string]string{"deduplicate_tokens": "true"})
	a := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
	b := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa2, "")})
	before, _ := w.record(b.ID)
	_, err := w.update("admin", b.ID, patchBody(t, `{"data":{"number":"4242424242424242"}}`))
	wantErrorIs(t, err, ErrConflict)
	if after, _ := w.record(b.ID); !sameJSON(t, before, after) {
		t.Errorf("a refused update changed the token")
	}
	// the holder itself may be updated
	if _, err := w.update("admin", a.ID, patchBody(t, `{"data":{"expiration_month":1}}`)); err != nil {
		t.Errorf("update of the holder: %v", err)
	}
}

// An update answer shows data only to a caller who may read the token.
func TestUpdateAnswerNeedsRead(t *testing.T) {
	w := newTokenWorld(t, nil)
	w.apps["updater"], _ = mustCreateApp(t, w.s, w.tenant.ID, ApplicationInput{Name: "updater", Type: AppPrivate,
		Rules: []AccessRule{testRule(1, "/", TransformReveal, "token:update")}})
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), Metadata: map[string]string{"k": "v"}})
	got, err := w.update("updater", tok.ID, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != nil || got.Metadata != nil || got.Mask != nil {
		t.Fatalf("an update answer to a caller without token:read shows %s", encodeJSON(t, got))
	}
	if got.ID != tok.ID {
		t.Fatalf("answer id %q", got.ID)
	}
}
