package vaultstore

import (
	"fmt"
	"strings"
	"time"
)

// expiresAtLayout renders expires_at as ISO 8601 with the caller's
// numeric offset; fractional seconds appear only when nonzero.
const expiresAtLayout = "2006-01-02T15:04:05.999999999-07:00"

// maxExpiresAtOffset bounds the offset an expires_at may carry (the range
// of real time zones, and of .NET's DateTimeOffset whose format the
// interface's example uses).
const maxExpiresAtOffset = 14 * 60 * 60

// expiresAtFormats describes, for error messages, what ParseExpiresAt
// accepts.
const expiresAtFormats = "must be an ISO 8601 date-time (2030-04-23T13:24:28Z, 2030-04-23T17:24:28-04:00, " +
	"2030-04-23T13:24:28 taken as UTC), a date 2030-04-23, M/D/YYYY h:mm:ss AM -07:00, " +
	"M/D/YYYY h:mm:ss AM (UTC) or M/D/YYYY (12 AM UTC)"

// expiresAtLayouts are tried in order. hasZone tells whether the layout
// carries an offset; without one the time is UTC. Go's parser accepts
// fractional seconds after the seconds field of any layout, one- or
// two-digit months, days and 12-hour clock hours for "1", "2" and "3",
// and "Z" wherever the layout says Z07:00.
var expiresAtLayouts = []struct {
	layout  string
	hasZone bool
}{
	{"2006-01-02T15:04:05Z07:00", true},
	{"2006-01-02T15:04:05Z0700", true},
	{"2006-01-02T15:04Z07:00", true},
	{"2006-01-02T15:04:05", false},
	{"2006-01-02T15:04", false},
	{"2006-01-02", false},
	{"1/2/2006 3:04:05 PM Z07:00", true},
	{"1/2/2006 3:04:05 PM Z0700", true},
	{"1/2/2006 3:04:05 PM", false},
	{"1/2/2006", false},
}

// ParseExpiresAt parses an expires_at value and checks it is after now.
// The result keeps the caller's offset as a fixed zone (UTC when the
// offset is zero or absent), so FormatExpiresAt gives it back as written.
// Failures are *ValidationError on "expires_at" and never quote s.
func ParseExpiresAt(s string, now time.Time) (time.Time, error) {
	t, err := ParseDateTime("expires_at", s)
	if err != nil {
		return time.Time{}, err
	}
	if !t.After(now) {
		return time.Time{}, invalid("expires_at", "must be in the future")
	}
	if t.After(now.AddDate(MaxExpiresAtYears, 0, 0)) {
		return time.Time{}, invalid("expires_at", fmt.Sprintf("must be within %d years", MaxExpiresAtYears))
	}
	return t, nil
}

// ParseDateTime parses a date-time in any of the forms expires_at takes
// (ISO 8601 with or without offset, a date, the M/D/YYYY forms). The
// result keeps the caller's offset as a fixed zone (UTC when the offset is
// zero or absent). Failures are *ValidationError on field and never quote s.
func ParseDateTime(field, s string) (time.Time, error) {
	t, _, problem := parseDateTime(s)
	switch problem {
	case dateTimeBadForm:
		return time.Time{}, invalid(field, expiresAtFormats)
	case dateTimeBadOffset:
		return time.Time{}, invalid(field, "offset must be between -14:00 and +14:00")
	}
	return t, nil
}

// dateTimeProblem says why parseDateTime refused a value.
type dateTimeProblem int

const (
	dateTimeOK dateTimeProblem = iota
	dateTimeBadForm
	dateTimeBadOffset
)

// parseDateTime is ParseDateTime without the error wording, shared with
// the search query's date terms; dateOnly reports a form without a time
// of day.
func parseDateTime(s string) (t time.Time, dateOnly bool, problem dateTimeProblem) {
	s = strings.ToUpper(strings.TrimSpace(s)) // "t", "z", "am", "pm"
	if len(s) > 64 {
		return time.Time{}, false, dateTimeBadForm
	}
	for _, f := range expiresAtLayouts {
		t, err := time.Parse(f.layout, s)
		if err != nil {
			continue
		}
		if f.hasZone {
			_, off := t.Zone()
			if off > maxExpiresAtOffset || off < -maxExpiresAtOffset {
				return time.Time{}, false, dateTimeBadOffset
			}
			if off == 0 {
				t = t.UTC()
			} else {
				// time.Parse may attach time.Local when the offset
				// matches it; pin the offset itself.
				t = t.In(time.FixedZone("", off))
			}
		}
		dateOnly = !strings.Contains(f.layout, "15") && !strings.Contains(f.layout, "3:04")
		return t, dateOnly, dateTimeOK
	}
	return time.Time{}, false, dateTimeBadForm
}

// MaxExpiresAtYears bounds how far ahead a token may expire; a token
// that should live longer has no expiry. (It also keeps expiry times
// within the range of Unix nanoseconds the expiry queue is keyed by.)
const MaxExpiresAtYears = 100

// FormatExpiresAt renders t as ISO 8601 with its numeric offset,
// "2030-08-26T19:23:57-07:00", with fractional seconds only when nonzero.
func FormatExpiresAt(t time.Time) string {
	return t.Format(expiresAtLayout)
}
