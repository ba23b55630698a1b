package query

import (
	"regexp"
	"strings"
	"time"
)

// testVisa is a card number a query may carry and no error may quote.
const testVisa = "4242424242424242"

// testDomain is the vault's rules as far as the parser's tests need
// them: three token types, the container syntax, the ISO 8601 forms of
// expires_at with offsets up to 14 hours, brands in lower case. The
// vault's own Domain is tested in vaultstore (search_domain_test.go).
type testDomain struct{}

var testContainer = regexp.MustCompile(`^/(?:[a-z0-9_-]+/)*$`)

func (testDomain) IsTokenType(name string) bool {
	return name == "token" || name == "card" || name == "bank"
}

func (testDomain) NormalizeContainer(c string) (string, bool) {
	c = strings.ToLower(c)
	return c, testContainer.MatchString(c)
}

func (testDomain) ParseDateTime(s string) (time.Time, bool, DateProblem) {
	s = strings.ToUpper(s)
	for _, l := range []struct {
		layout string
		zone   bool
	}{
		{"2006-01-02T15:04:05Z07:00", true},
		{"2006-01-02T15:04Z07:00", true},
		{"2006-01-02T15:04:05", false},
		{"2006-01-02T15:04", false},
		{"2006-01-02", false},
	} {
		t, err := time.Parse(l.layout, s)
		if err != nil {
			continue
		}
		if _, off := t.Zone(); l.zone && (off > 14*3600 || off < -14*3600) {
			return time.Time{}, false, DateBadOffset
		}
		return t, l.layout == "2006-01-02", DateOK
	}
	return time.Time{}, false, DateBadForm
}

func (testDomain) NormalizeBrand(b string) string { return strings.ToLower(strings.TrimSpace(b)) }
