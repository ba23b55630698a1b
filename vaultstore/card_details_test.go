package vaultstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestCardBrand checks the IIN table at the edges of the networks'
// published ranges, and that the most specific range wins where ranges
// overlap.
func TestCardBrand(t *testing.T) {
	for _, tc := range []struct{ digits, want string }{
		{"4242424242424242", BrandVisa},
		{"400000", BrandVisa},
		{"499999", BrandVisa},
		{"510000", BrandMastercard},
		{"559999", BrandMastercard},
		{"500000", ""},
		{"560000", ""},
		{"222100", BrandMastercard}, // 2-series, first
		{"272099", BrandMastercard}, // 2-series, last
		{"222099", ""},
		{"272100", ""},
		{"340000", BrandAmericanExpress},
		{"370000", BrandAmericanExpress},
		{"350000", ""},
		{"601100", BrandDiscover},
		{"601200", ""},
		{"644000", BrandDiscover},
		{"649999", BrandDiscover},
		{"643999", ""},
		{"650000", BrandDiscover},
		{"622126", BrandDiscover}, // Discover inside UnionPay's 62: the longer range wins
		{"622925", BrandDiscover},
		{"622125", BrandUnionPay},
		{"622926", BrandUnionPay},
		{"620000", BrandUnionPay},
		{"810000", BrandUnionPay},
		{"817199", BrandUnionPay},
		{"817200", ""},
		{"352800", BrandJCB},
		{"358999", BrandJCB},
		{"352799", ""},
		{"359000", ""},
		{"360000", BrandDinersClub},
		{"300000", BrandDinersClub},
		{"305999", BrandDinersClub},
		{"306000", ""},
		{"309500", BrandDinersClub},
		{"380000", BrandDinersClub},
		{"399999", BrandDinersClub},
		{"501800", BrandMaestro},
		{"502000", BrandMaestro},
		{"503800", BrandMaestro},
		{"589300", BrandMaestro},
		{"630400", BrandMaestro},
		{"675900", BrandMaestro},
		{"676100", BrandMaestro},
		{"676399", BrandMaestro},
		{"676400", ""},
		{"676770", BrandMaestro},
		{"676771", ""},
		{"676774", BrandMaestro},
		{"100000", ""},
		{"4", BrandVisa},
		{"", ""},
		{"5", ""}, // too short to say
	} {
		if got := CardBrand(tc.digits); got != tc.want {
			t.Errorf("CardBrand(%s) = %q, want %q", tc.digits, got, tc.want)
		}
	}
}

func TestBINOf(t *testing.T) {
	for length := 13; length <= 19; length++ {
		n := luhnNumber("4", 7, length)
		want := n[:6]
		if length >= 16 {
			want = n[:8]
		}
		if got := BINOf(n); got != want {
			t.Errorf("BINOf(%d digits) = %s, want %s", length, got, want)
		}
	}
}

// TestDeriveDetails: a card shows its BIN, last four, expiry and brand;
// a bank account its routing number and last four; nothing more of the
// number than PCI DSS allows to display, at every length.
func TestDeriveDetails(t *testing.T) {
	card, bank := deriveDetails(TokenTypeCard, cardData(testVisa, testCVC))
	if bank != nil || card == nil {
		t.Fatalf("card: details %+v %+v", card, bank)
	}
	want := CardDetails{BIN: "42424242", Last4: "4242", ExpirationMonth: 12, ExpirationYear: 2030, Brand: BrandVisa}
	if *card != want {
		t.Errorf("card details = %+v, want %+v", *card, want)
	}
	card, _ = deriveDetails(TokenTypeCard, cardData(testAmex, ""))
	if card.BIN != "378282" || card.Last4 != "0005" || card.Brand != BrandAmericanExpress {
		t.Errorf("amex details = %+v", *card)
	}
	card, _ = deriveDetails(TokenTypeCard, map[string]any{"number": testMastercard})
	if card.ExpirationMonth != 0 || card.ExpirationYear != 0 || card.Brand != BrandMastercard {
		t.Errorf("card without expiry: %+v", *card)
	}
	_, bank = deriveDetails(TokenTypeBank, bankData(testRouting, testAccount))
	if bank == nil || *bank != (BankDetails{RoutingNumber: testRouting, AccountNumberLast4: "1234"}) {
		t.Errorf("bank details = %+v", bank)
	}
	if c, b := deriveDetails(TokenTypeToken, cardData(testVisa, "")); c != nil || b != nil {
		t.Errorf("a general token got details %+v %+v", c, b)
	}
	for length := 13; length <= 19; length++ {
		n := luhnNumber("5", 123456789, length)
		c, _ := deriveDetails(TokenTypeCard, map[string]any{"number": n})
		raw, _ := json.Marshal(c)
		shown := len(c.BIN) + len(c.Last4)
		limit := 10 // first 6 and last 4
		if length >= 16 {
			limit = 12 // first 8 and last 4
		}
		if shown > limit || shown > length-3 || strings.Contains(string(raw), n[:len(c.BIN)+1]) {
			t.Errorf("%d digits: details %s show %d digits", length, raw, shown)
		}
	}
}

// TestDetailsShownToEveryReader: card and bank details appear whatever
// the transform, on create, get, list and search, and never to a caller
// who may not read the token.
func TestDetailsShownToEveryReader(t *testing.T) {
	w := newTokenWorld(t, nil)
	card := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	bank := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
	general := w.mustCreate("admin", TokenInput{Type: "token", Data: "x"})
	wantCard := `{"bin":"42424242","last4":"4242","expiration_month":12,"expiration_year":2030,"brand":"visa"}`
	wantBank := `{"routing_number":"021000021","account_number_last4":"1234"}`
	check := func(t *testing.T, what string, tok *Token) {
		t.Helper()
		switch tok.ID {
		case card.ID:
			if got := encodeJSON(t, tok.Card); got != wantCard || tok.Bank != nil {
				t.Errorf("%s: card = %s, bank = %v", what, got, tok.Bank)
			}
		case bank.ID:
			if got := encodeJSON(t, tok.Bank); got != wantBank || tok.Card != nil {
				t.Errorf("%s: bank = %s, card = %v", what, got, tok.Card)
			}
		case general.ID:
			if tok.Card != nil || tok.Bank != nil {
				t.Errorf("%s: a general token shows details", what)
			}
		}
	}
	check(t, "create", card)
	check(t, "create", bank)
	for _, app := range []string{"admin", "masker", "redactor", "plain"} {
		for _, id := range []string{card.ID, bank.ID, general.ID} {
			check(t, app+" get", w.mustGet(app, id))
		}
		toks, _ := w.mustList(app, TokenFilter{}, 0, 100)
		for _, tok := range toks {
			check(t, app+" list", tok)
		}
	}
	// a caller who may update but not read sees no details
	writer, _ := mustCreateApp(t, w.s, w.tenant.ID, ApplicationInput{Name: "updater", Type: AppPrivate,
		Rules: []AccessRule{testRule(1, "/", TransformReveal, "token:update")}})
	tok, err := w.s.UpdateToken(w.ctx, TokenRequest{Tenant: w.tenant, Application: writer}, card.ID, map[string]any{"metadata": map[string]any{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Card != nil || tok.Bank != nil {
		t.Errorf("an update by a non-reader shows details: %s", encodeJSON(t, tok))
	}
	// a change of number changes the details
	upd := w.mustUpdate("admin", card.ID, map[string]any{"data": map[string]any{"number": testMastercard}})
	if upd.Card == nil || upd.Card.Last4 != "4444" || upd.Card.Brand != BrandMastercard || upd.Card.BIN != "55555555" {
		t.Errorf("after a number change: %s", encodeJSON(t, upd.Card))
	}
}

// TestDetailsStoredSealed: the details are part of the sealed record,
// and a record written before they existed gets them derived on read.
func TestDetailsStoredSealed(t *testing.T) {
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
	raw := kvValues(t, w.s, "v1/t/"+w.tenant.ID+"/tok/")
	for _, v := range raw {
		if strings.Contains(v, "42424242") || strings.Contains(v, "visa") {
			t.Fatalf("a token record holds its details in clear")
		}
	}
	var rec *tokenRecord
	err := w.s.kv.Update(context.Background(), func(wr Writer) error {
		tk, err := w.s.tenantKeysFor(wr, w.tenant.ID)
		if err != nil {
			return err
		}
		if rec, err = w.s.loadToken(wr, tk, w.tenant.ID, tok.ID); err != nil {
			return err
		}
		if rec.Card == nil || rec.Card.BIN != "42424242" {
			t.Errorf("stored card details = %+v", rec.Card)
		}
		// as a record written before details were stored
		rec.Card = nil
		return putSealed(wr, tk, "token", w.tenant.ID, tok.ID, tokenKey(w.tenant.ID, tok.ID), rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.mustGet("masker", tok.ID); got.Card == nil || got.Card.BIN != "42424242" || got.Card.Brand != BrandVisa {
		t.Errorf("a record without stored details reads as %s", encodeJSON(t, got.Card))
	}
	toks, _, err := w.s.SearchTokens(w.ctx, w.req("admin"), "card.bin:42424242", 0, 10)
	if err != nil || len(toks) != 1 {
		t.Errorf("search on a record without stored details: %d, %v", len(toks), err)
	}
}

// kvValues returns every KV value under prefix.
func kvValues(tb testing.TB, s *Store, prefix string) []string {
	tb.Helper()
	var out []string
	err := s.kv.View(context.Background(), func(r Reader) error {
		return r.Scan([]byte(prefix), nil, func(_, v []byte) error {
			out = append(out, string(v))
			return nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestSearchCardDetails: card.bin, card.last4 and card.brand find cards.
func TestSearchCardDetails(t *testing.T) {
	w := newTokenWorld(t, nil)
	visa := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
	master := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testMastercard, "")})
	amex := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testAmex, "")})
	w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
	w.mustCreate("admin", TokenInput{Type: "token", Data: map[string]any{"bin": "42424242"}})
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"card.bin:42424242", []string{visa.ID}},
		{"card.bin:378282", []string{amex.ID}},
		{"card.bin:424242", nil}, // a 16-digit card's BIN is 8 digits
		{"card.last4:4444", []string{master.ID}},
		{"card.brand:visa", []string{visa.ID}},
		{"card.brand:MasterCard", []string{master.ID}},
		{"card.brand:american-express", []string{amex.ID}},
		{"card.brand:visa OR card.last4:0005", []string{visa.ID, amex.ID}},
		{"type:card AND NOT card.brand:visa", []string{master.ID, amex.ID}},
	} {
		toks, total, err := w.s.SearchTokens(w.ctx, w.req("admin"), tc.query, 0, 10)
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		var got []string
		for _, tok := range toks {
			got = append(got, tok.ID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || total != len(tc.want) {
			t.Errorf("%s: got %v (total %d), want %v", tc.query, got, total, tc.want)
		}
	}
	_, _, err := w.s.SearchTokens(w.ctx, w.req("admin"), "card.number:4242", 0, 10)
	wantFieldErrors(t, err, "query")
}

// TestBINTableEnrichesDetails: with a BIN table the details carry its
// fields, from the longest matching bin; the stored record does not, so
// a new table applies at once, and no table leaves them out.
func TestBINTableEnrichesDetails(t *testing.T) {
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
	table, err := ParseBINTable(strings.NewReader(
		"bin,funding,segment,product_code,issuer_name,issuer_country,issuer_country_name,issuer_country_numeric\n" +
			"424242,credit,consumer,F,Short Bank,US,United States of America,840\n" +
			"42424242,debit,commercial,,Long Bank,GB,United Kingdom,826\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeJSON(t, w.mustGet("masker", tok.ID).Card); strings.Contains(got, "funding") || strings.Contains(got, "issuer") {
		t.Errorf("without a table: %s", got)
	}
	w.s.SetBINTable(table)
	got := w.mustGet("masker", tok.ID).Card
	want := `{"bin":"42424242","last4":"4242","expiration_month":12,"expiration_year":2030,"brand":"visa","funding":"debit",` +
		`"issuer":{"country":"GB","name":"Long Bank"},"issuer_country":{"alpha2":"GB","name":"United Kingdom","numeric":"826"},"segment":"commercial"}`
	if encodeJSON(t, got) != want {
		t.Errorf("with a table:\n got %s\nwant %s", encodeJSON(t, got), want)
	}
	d, err := w.s.CardDetailsForBIN("424242")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"brand":"visa","funding":"credit","issuer":{"country":"US","name":"Short Bank"},"issuer_country":{"alpha2":"US","name":"United States of America","numeric":"840"},"segment":"consumer","product":{"code":"F"}}`; encodeJSON(t, d) != want {
		t.Errorf("CardDetailsForBIN(424242) = %s, want %s", encodeJSON(t, d), want)
	}
	w.s.SetBINTable(nil)
	if got := encodeJSON(t, w.mustGet("masker", tok.ID).Card); strings.Contains(got, "funding") {
		t.Errorf("table removed: %s", got)
	}
}

func TestCardDetailsForBIN(t *testing.T) {
	s, _ := newTestStore(t)
	for _, tc := range []struct {
		bin, want string // want "" means a ValidationError on bin
	}{
		{"424242", `{"brand":"visa"}`},
		{"42424242", `{"brand":"visa"}`},
		{"2221000", `{"brand":"mastercard"}`},
		{"100000", `{}`},
		{"", ""},
		{"42424", ""},
		{"424242424", ""},
		{"42424a", ""},
		{"４２４２４２", ""}, // full-width digits
		{"-42424", ""},
	} {
		d, err := s.CardDetailsForBIN(tc.bin)
		if tc.want == "" {
			if got := validationFields(t, err); len(got) != 1 || got[0] != "bin" {
				t.Errorf("bin %q: fields %v", tc.bin, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("bin %q: %v", tc.bin, err)
		} else if encodeJSON(t, d) != tc.want {
			t.Errorf("bin %q: %s, want %s", tc.bin, encodeJSON(t, d), tc.want)
		}
	}
}
