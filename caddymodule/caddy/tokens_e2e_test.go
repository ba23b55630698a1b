package main

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// The sensitive values the token tests use; none may appear anywhere but
// in answers to a revealing key.
const (
	e2ePAN     = "4242424242424242"
	e2eCVC     = "9173"
	e2eAccount = "000123456789"
)

// TestTokensEndToEnd drives the token API through the binary and checks
// that card data is revealed only to a revealing key: never in other
// answers, error bodies, the server log, the access log or the files.
func TestTokensEndToEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Tokens Co")
	allPerms := []string{"token:create", "token:read", "token:update", "token:delete"}
	_, revealKey, _ := s.createApp(ct.Key, map[string]any{"name": "reveal", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/", "transform": "reveal", "permissions": allPerms}}})
	_, maskKey, _ := s.createApp(ct.Key, map[string]any{"name": "mask", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/", "transform": "mask", "permissions": allPerms}}})
	_, generalKey, _ := s.createApp(ct.Key, map[string]any{"name": "general only", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/general/", "transform": "reveal", "permissions": allPerms}}})

	var guarded []string // bodies that must not carry the card data
	keep := func(r apiResponse) apiResponse { guarded = append(guarded, string(r.Raw)); return r }

	card := map[string]any{"type": "card", "data": map[string]any{
		"number": e2ePAN, "expiration_month": 12, "expiration_year": 2031, "cvc": e2eCVC}}
	created := keep(s.expect(http.StatusCreated, http.MethodPost, "/tokens", maskKey, card))
	id := testjson.Str(created.Body, "id")
	if got := testjson.Str(created.Body, "data", "number"); got != "XXXXXXXXXXXX4242" {
		t.Errorf("create answer: data.number %q, want the mask", got)
	}
	revealed := s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil)
	if testjson.Str(revealed.Body, "data", "number") != e2ePAN || testjson.Str(revealed.Body, "data", "cvc") != e2eCVC {
		t.Errorf("revealing read: %s", revealed.Raw)
	}
	masked := keep(s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, maskKey, nil))
	if got := testjson.Str(masked.Body, "data", "number"); got != "XXXXXXXXXXXX4242" {
		t.Errorf("masked read: data.number %q", got)
	}
	keep(s.expect(http.StatusForbidden, http.MethodGet, "/tokens/"+id, generalKey, nil))
	keep(s.expect(http.StatusOK, http.MethodGet, "/tokens", maskKey, nil))

	bank := map[string]any{"type": "bank", "data": map[string]any{"routing_number": "021000021", "account_number": e2eAccount}}
	keep(s.expect(http.StatusCreated, http.MethodPost, "/tokens", maskKey, bank))

	tokenized := keep(s.expect(http.StatusOK, http.MethodPost, "/tokenize", maskKey, map[string]any{
		"first_name": "Ada", "card": card, "list": []any{1, true}}))
	if !strings.HasPrefix(testjson.Str(tokenized.Body, "card", "mask", "number"), "XXXXXXXXXXXX") {
		t.Errorf("tokenize answer: %s", tokenized.Raw)
	}
	keep(s.expect(http.StatusBadRequest, http.MethodPost, "/tokens", maskKey, map[string]any{
		"type": "card", "data": map[string]any{"number": e2ePAN[:15] + "1", "cvc": e2eCVC}}))
	keep(s.expect(http.StatusBadRequest, http.MethodPost, "/tokens", maskKey, map[string]any{
		"type": "bank", "data": map[string]any{"routing_number": "021000022", "account_number": e2eAccount}}))

	// A secret counts where it stands alone: the 4-digit CVC also turns
	// up inside a random id's hex about once in 200 runs.
	for _, secret := range []string{e2ePAN, e2eCVC, e2eAccount} {
		alone := regexp.MustCompile(`(^|[^0-9a-fA-F])` + secret + `([^0-9a-fA-F]|$)`)
		for _, body := range guarded {
			if alone.MatchString(body) {
				t.Errorf("an answer to a non-revealing key carries sensitive data: %s", body)
			}
		}
	}

	// The token survives a restart.
	s.stopClean()
	logs := serverLogs(s)
	s = startServer(t, serverOpts{Storage: s.opts.Storage})
	again := s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil)
	if testjson.Str(again.Body, "data", "number") != e2ePAN {
		t.Errorf("after a restart: %s", again.Raw)
	}
	s.stopClean()
	logs += serverLogs(s)
	for _, secret := range []string{e2ePAN, e2eCVC, e2eAccount} {
		if containsNumber(logs, secret) {
			t.Errorf("the server or access log carries sensitive data %q", secret)
		}
	}
	found := scanTree(t, s.opts.Storage, map[string][]byte{"card number": []byte(e2ePAN), "account number": []byte(e2eAccount)})
	if len(found) > 0 {
		t.Errorf("sensitive data in clear in the data directory: %v", found)
	}
}

// serverLogs is everything a server wrote to its log and access log.
func serverLogs(s *server) string {
	logs := s.stderr()
	if raw, err := os.ReadFile(s.accessLog); err == nil {
		logs += string(raw)
	}
	return logs
}

// containsNumber reports whether text holds the digits of secret as a
// number of its own: not inside a longer run of digits, nor after a colon
// or a dot, so that a 4-digit CVC is not found in a random port
// (127.0.0.1:39173 or :9173) or a timestamp's fraction.
func containsNumber(text, secret string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], secret)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(secret)
		before := byte(' ')
		if start > 0 {
			before = text[start-1]
		}
		after := byte(' ')
		if end < len(text) {
			after = text[end]
		}
		isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
		if !isDigit(before) && before != ':' && before != '.' && !isDigit(after) {
			return true
		}
		i = start + 1
	}
}

func TestContainsNumber(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{`{"cvc":"9173"}`, true},
		{`cvc=9173&x`, true},
		{`9173`, true},
		{`"addr":"127.0.0.1:39173"`, false},
		{`"addr":":9173"`, false},
		{`"ts":1795800169.173`, false},
		{`id 191735`, false},
		{`port 19173 and later "9173"`, true},
	} {
		if got := containsNumber(tc.text, "9173"); got != tc.want {
			t.Errorf("containsNumber(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
