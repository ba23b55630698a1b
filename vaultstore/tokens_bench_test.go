package vaultstore

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchCard returns distinct card data for benchmarks (not registered as
// a test secret: benchmarks check no error texts).
func benchCard(i int) map[string]any {
	return map[string]any{
		"number":           luhnNumber("4", i, 16),
		"expiration_month": json.Number("12"),
		"expiration_year":  json.Number("2030"),
		"cvc":              "123",
	}
}

func newTokenBenchWorld(b *testing.B, sync bool) *tokenWorld {
	b.Helper()
	clock := newFakeClock()
	dir := b.TempDir()
	s := openTestStore(b, Options{Dir: dir, Now: clock.Now, SyncWrites: sync})
	return newTokenWorldOn(b, s, clock, dir, nil)
}

// BenchmarkCreateCardToken measures creating a card token with a CVC,
// with and without synchronous writes.
func BenchmarkCreateCardToken(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("SyncWrites=%v", sync), func(b *testing.B) {
			w := newTokenBenchWorld(b, sync)
			req := w.req("admin")
			in := TokenInput{Type: "card", Data: benchCard(1)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := w.s.CreateToken(w.ctx, req, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchGetToken(b *testing.B, app string, check func(*Token) bool) {
	w := newTokenBenchWorld(b, false)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: benchCard(7)})
	req := w.req(app)
	b.ReportAllocs()
	for b.Loop() {
		got, err := w.s.GetToken(w.ctx, req, tok.ID)
		if err != nil || !check(got) {
			b.Fatalf("GetToken = %+v, %v", got, err)
		}
	}
}

// BenchmarkGetTokenRevealed reads a card with its CVC.
func BenchmarkGetTokenRevealed(b *testing.B) {
	benchGetToken(b, "admin", func(t *Token) bool { return cvcOf(t) == "123" })
}

// BenchmarkGetTokenMasked reads a card through its default mask.
func BenchmarkGetTokenMasked(b *testing.B) {
	benchGetToken(b, "masker", func(t *Token) bool {
		m, _ := t.Data.(map[string]any)
		return m != nil && m["cvc"] == nil && m["number"] != nil
	})
}

// BenchmarkTokenize5 tokenizes a body of five tokens: two cards, a bank
// account and two primitives.
func BenchmarkTokenize5(b *testing.B) {
	w := newTokenBenchWorld(b, false)
	req := w.req("admin")
	body := decodeJSON(b, `{"cards":[{"type":"card","data":{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"123"}},
		{"type":"card","data":{"number":"5555555555554444","expiration_month":1,"expiration_year":2031}}],
		"bank":{"type":"bank","data":{"routing_number":"021000021","account_number":"98765432101234"}},
		"name":"Jo Doe","ssn":"123-45-6789"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.s.Tokenize(w.ctx, req, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListTokensPage20 lists a page of 20 in a tenant of 10,000
// tokens, as a reader who may read all of them (first and last page) and
// as one who may read only the cards (nine in ten). A metadata filter
// opens every record and is left out: it costs about 200 ms a page here.
func BenchmarkListTokensPage20(b *testing.B) {
	w := newTokenBenchWorld(b, false)
	admin := w.req("admin")
	for i := range 10000 {
		in := TokenInput{Type: "card", Data: benchCard(i), Metadata: map[string]string{"batch": fmt.Sprint(i % 10)}}
		if i%10 == 0 {
			in = TokenInput{Type: "token", Data: fmt.Sprintf("value-%d", i)}
		}
		if _, err := w.s.CreateToken(w.ctx, admin, in); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		app    string
		f      TokenFilter
		offset int
		total  int
	}{
		{"first", "admin", TokenFilter{}, 0, 10000},
		{"last", "admin", TokenFilter{}, 9980, 10000},
		{"pci-only/first", "pci", TokenFilter{}, 0, 9000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := w.req(tc.app)
			b.ReportAllocs()
			for b.Loop() {
				toks, total, err := w.s.ListTokens(w.ctx, req, tc.f, tc.offset, 20)
				if err != nil || len(toks) != 20 || total != tc.total {
					b.Fatalf("ListTokens = %d tokens, total %d, %v", len(toks), total, err)
				}
			}
		})
	}
}
