package caddymodule

import (
	"net/url"
	"strings"
)

// maxQueryName is the longest parameter name an error repeats back.
const maxQueryName = 64

// checkQuery refuses a query string that does not parse: a parameter with
// a malformed percent escape, or pairs separated by ";". net/url drops
// such a pair without a word, so "?size=%zz" would list with the default
// size instead of saying what is wrong. The error names the parameter.
func checkQuery(raw string) error {
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return errField("query", "a parameter name is not properly percent-encoded")
		}
		if len(name) > maxQueryName {
			name = "query"
		}
		if strings.Contains(pair, ";") {
			return errField(name, "separate query parameters with &, not ;")
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return errField(name, "the value is not properly percent-encoded")
		}
	}
	return nil
}
