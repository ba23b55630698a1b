package vaultstore

import (
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// Counts by type stay exact under concurrent creates and deletes.
func TestUsageCountsConcurrentCreatesAndDeletes(t *testing.T) {
	w := newTokenWorld(t, nil)
	req := w.req("admin")
	var inputs []TokenInput
	for i := range 10 {
		inputs = append(inputs, TokenInput{Type: "card", Data: cardData(asSecret(luhnNumber("4", 1000+i, 16)), testCVC)})
	}
	for i := range 6 {
		inputs = append(inputs, TokenInput{Type: "token", Data: map[string]any{"n": json.Number(string(rune('0' + i)))}})
	}
	for i := range 4 {
		inputs = append(inputs, TokenInput{Type: "bank", Data: bankData(testRouting, asSecret(luhnNumber("7", 100+i, 12)))})
	}
	toks := make([]*Token, len(inputs))
	errs := make([]error, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], errs[i] = w.s.CreateToken(w.ctx, req, in)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if noSecretIn(t, err) != nil {
			t.Fatalf("concurrent create %d: %v", i, err)
		}
	}
	check := func(when string, want map[string]int64) {
		t.Helper()
		rep := w.usage()
		var total int64
		for typ, n := range want {
			total += n
			if got := rep.TokenReport.MetricsByType[typ].Count; got != n {
				t.Errorf("%s: %s count = %d, want %d", when, typ, got, n)
			}
		}
		if rep.TotalTokens != total || rep.TokenReport.TotalTokens != total {
			t.Errorf("%s: total %d / %d, want %d", when, rep.TotalTokens, rep.TokenReport.TotalTokens, total)
		}
		if listed := w.total(); int64(listed) != total {
			t.Errorf("%s: %d tokens listed, usage says %d", when, listed, total)
		}
	}
	check("after 20 concurrent creates", map[string]int64{"card": 10, "token": 6, "bank": 4})

	// last_created_at is the newest creation of the type
	rep := w.usage()
	for _, typ := range []string{"card", "token", "bank"} {
		var newest time.Time
		for _, tok := range toks {
			if tok.Type == typ && tok.CreatedAt.After(newest) {
				newest = tok.CreatedAt.Time
			}
		}
		if got := rep.TokenReport.MetricsByType[typ].LastCreatedAt; got == nil || !got.Equal(newest) {
			t.Errorf("%s last_created_at = %v, want %v", typ, got, newest)
		}
	}

	var victims []*Token
	for _, typ := range []string{"card", "token"} {
		n := 0
		for _, tok := range toks {
			if tok.Type == typ && n < 5 {
				victims = append(victims, tok)
				n++
			}
		}
	}
	errs = make([]error, len(victims))
	for i, tok := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.s.DeleteToken(w.ctx, req, tok.ID)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if noSecretIn(t, err) != nil {
			t.Fatalf("concurrent delete %d: %v", i, err)
		}
	}
	check("after 10 concurrent deletes", map[string]int64{"card": 5, "token": 1, "bank": 4})

	// another tenant's report is its own
	other := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
	if rep := other.usage(); rep.TotalTokens != 0 || len(rep.TokenReport.MetricsByType) != 0 {
		t.Errorf("another tenant's usage = %+v", rep.TokenReport)
	}
}

// Monthly active tokens are the distinct tokens created or read this
// calendar month.
func TestUsageMonthlyActiveTokens(t *testing.T) {
	w := newTokenWorld(t, nil)
	mat := func() int64 { w.tb.Helper(); return w.usage().TokenReport.MonthlyActiveTokens }
	if rep := w.usage(); rep.TokenReport.IncludedMonthlyActiveTokens != 1000 || rep.TokenReport.MonthlyActiveTokens != 0 {
		t.Errorf("empty tenant report = %+v", rep.TokenReport)
	}
	a := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), DeduplicateToken: boolPtr(true)})
	b := w.mustCreate("admin", TokenInput{Type: "token", Data: "b"})
	c := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount), ExpiresAt: w.expiresIn(24 * time.Hour)})
	if n := mat(); n != 3 {
		t.Errorf("after 3 creates: %d active, want 3", n)
	}
	w.mustGet("admin", a.ID)
	w.mustGet("masker", a.ID)
	w.mustGet("admin", b.ID)
	w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), DeduplicateToken: boolPtr(true)})
	if _, err := w.create("admin", TokenInput{Type: "card", Data: cardData(testBadLuhn, "")}); err == nil {
		t.Fatal("invalid card accepted")
	}
	if n := mat(); n != 3 {
		t.Errorf("after reads of the same tokens: %d active, want 3", n)
	}

	// a new month starts from zero
	now := w.clock.Peek()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 1, 0, time.UTC)
	w.clock.Advance(next.Sub(now))
	if n := mat(); n != 0 {
		t.Errorf("first of the next month: %d active, want 0", n)
	}
	if rep := w.usage(); rep.TotalTokens != 3 {
		t.Errorf("total tokens in the next month = %d, want 3", rep.TotalTokens)
	}
	if _, err := w.get("pci", b.ID); err == nil {
		t.Fatal("pci application read a generic token")
	}
	if _, err := w.get("admin", c.ID); err == nil {
		t.Fatal("expired token read")
	}
	if n := mat(); n != 0 {
		t.Errorf("after refused reads: %d active, want 0", n)
	}
	w.mustGet("admin", a.ID)
	w.mustGet("redactor", a.ID)
	w.mustGet("admin", b.ID)
	if n := mat(); n != 2 {
		t.Errorf("after reading 2 tokens: %d active, want 2", n)
	}
	w.mustCreate("admin", TokenInput{Type: "token", Data: "d"})
	if _, err := w.tokenize("admin", []any{"e", "f"}); err != nil {
		t.Fatal(err)
	}
	if n := mat(); n != 5 {
		t.Errorf("after a create and a tokenize of two: %d active, want 5", n)
	}
}

// Counts stay exact when the report folds many count changes into
// totals, also while creates and deletes run.
func TestUsageCountsSurviveFolding(t *testing.T) {
	w := newTokenWorld(t, nil)
	req := w.req("admin")
	var ids []string
	for i := range foldThreshold + 20 {
		in := TokenInput{Type: "token", Data: "x"}
		if i%4 == 0 {
			in = TokenInput{Type: "card", Data: cardData(testVisa, "")}
		}
		tok, err := w.s.CreateToken(w.ctx, req, in)
		if err != nil {
			t.Fatal(noSecretIn(t, err))
		}
		ids = append(ids, tok.ID)
	}
	wantCard, wantToken := int64((foldThreshold+20+3)/4), int64(foldThreshold+20-(foldThreshold+20+3)/4)
	check := func(when string) {
		t.Helper()
		rep := w.usage().TokenReport
		if rep.MetricsByType["card"].Count != wantCard || rep.MetricsByType["token"].Count != wantToken || rep.TotalTokens != wantCard+wantToken {
			t.Errorf("%s: counts %+v, want card %d token %d", when, rep.MetricsByType, wantCard, wantToken)
		}
	}
	check("before folding")
	if err := w.s.foldUsage(w.ctx, w.tenant.ID); err != nil {
		t.Fatal(err)
	}
	waitForFolds(t, w.s)
	if n := len(kvKeys(t, w.s, string(usageTotalPrefix(w.tenant.ID)))); n != 2 {
		t.Errorf("%d usage totals after folding, want one per type", n)
	}
	if n := len(kvKeys(t, w.s, string(usageChangesPrefix(w.tenant.ID)))); n != 0 {
		t.Errorf("%d changes left after folding", n)
	}
	check("after folding")

	// folds racing creates and deletes
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, err := w.s.CreateToken(w.ctx, req, TokenInput{Type: "token", Data: "y"})
				errs <- err
			} else {
				errs <- w.s.DeleteToken(w.ctx, req, ids[i])
			}
		}()
	}
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.s.Usage(w.ctx, w.tenant)
			errs <- err
			errs <- w.s.foldUsage(w.ctx, w.tenant.ID)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if noSecretIn(t, err) != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 40; i += 2 {
		if i%4 == 0 {
			wantCard--
		} else {
			wantToken--
		}
	}
	wantToken += 20
	waitForFolds(t, w.s)
	check("after concurrent folds, creates and deletes")
	if got := w.total(); int64(got) != wantCard+wantToken {
		t.Errorf("%d tokens listed, want %d", got, wantCard+wantToken)
	}
}
