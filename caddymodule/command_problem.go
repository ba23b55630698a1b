package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// serverProblem is a refusal of the admin API as `caddy vault` shows it:
// the problem's title and detail, then its field errors, one per line.
type serverProblem struct {
	Status int
	Title  string
	Detail string
	Errors map[string][]string
}

// Error is the problem on one line: "Bad Request: invalid name".
func (p *serverProblem) Error() string {
	title := strings.TrimSuffix(p.Title, ".")
	if title == "" {
		title = http.StatusText(p.Status)
	}
	if p.Detail == "" {
		return title
	}
	return title + ": " + p.Detail
}

// text is the problem as the CLI prints it: its Error line, then
// "  <field>: <message>" for each field error, fields in order.
func (p *serverProblem) text() string {
	var b strings.Builder
	b.WriteString(p.Error())
	b.WriteByte('\n')
	fields := make([]string, 0, len(p.Errors))
	for f := range p.Errors {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		for _, msg := range p.Errors[f] {
			fmt.Fprintf(&b, "  %s: %s\n", f, msg)
		}
	}
	return b.String()
}

// adminRefusal matches the error caddycmd.AdminAPIRequest makes of an
// answer of status 400 or above, which holds the answer's body.
var adminRefusal = regexp.MustCompile(`^caddy responded with error: HTTP (\d{3}): (?s:(.*))$`)

// maxShownBody bounds the part of a body that is not a problem the CLI
// repeats.
const maxShownBody = 500

// adminRequest sends one request to the admin API at addr, as
// caddycmd.AdminAPIRequest does (same address forms, same Origin); an
// answer of status 400 or above is a *serverProblem.
func adminRequest(addr, method, uri string, body io.Reader) (*http.Response, error) {
	resp, err := caddycmd.AdminAPIRequest(addr, method, uri, nil, body)
	if err != nil {
		if m := adminRefusal.FindStringSubmatch(err.Error()); m != nil {
			status, _ := strconv.Atoi(m[1])
			return nil, parseServerProblem(status, []byte(m[2]))
		}
		return nil, err
	}
	return resp, nil
}

// parseServerProblem reads the body of a refusal: an RFC 7807 problem
// (what the vault's admin routes answer), Caddy's own {"error": "..."}, or
// any other text.
func parseServerProblem(status int, body []byte) *serverProblem {
	p := &serverProblem{Status: status}
	var v struct {
		Title  string              `json:"title"`
		Detail string              `json:"detail"`
		Errors map[string][]string `json:"errors"`
		Error  string              `json:"error"`
	}
	switch {
	case json.Unmarshal(body, &v) == nil && (v.Title != "" || v.Detail != ""):
		p.Title, p.Detail, p.Errors = v.Title, v.Detail, v.Errors
	case v.Error != "":
		p.Detail = v.Error
	default:
		text := strings.TrimSpace(string(body))
		if len(text) > maxShownBody {
			text = truncateUTF8(text, maxShownBody) + "…"
		}
		p.Detail = text
	}
	return p
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// runVault runs a `caddy vault` command function like
// caddycmd.WrapCommandFuncForCobra, except that a refusal of the admin API
// is printed as it is, on standard error (title: detail, then the field
// errors), rather than inside a log line; the command then exits with
// status 1.
func runVault(f caddycmd.CommandFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		status, err := f(caddycmd.Flags{FlagSet: cmd.Flags()})
		var p *serverProblem
		if errors.As(err, &p) {
			fmt.Fprint(cmd.ErrOrStderr(), p.text())
			cmd.SilenceErrors, cmd.SilenceUsage = true, true // a refusal, not a usage error
			return err
		}
		return caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) { return status, err })(cmd, args)
	}
}
