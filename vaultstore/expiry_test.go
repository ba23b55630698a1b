package vaultstore

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var expiryNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestExpiresAtFormats(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		// ISO 8601 / RFC 3339 with an offset
		{"2030-04-23T13:24:28Z", "2030-04-23T13:24:28+00:00"},
		{"2030-04-23T17:24:28-04:00", "2030-04-23T17:24:28-04:00"},
		{"2030-04-23T17:24:28+05:30", "2030-04-23T17:24:28+05:30"},
		{"2030-04-23T17:24:28+00:00", "2030-04-23T17:24:28+00:00"},
		{"2030-04-23T17:24:28.5-04:00", "2030-04-23T17:24:28.5-04:00"},
		{"2030-04-23T17:24:28.123456789Z", "2030-04-23T17:24:28.123456789+00:00"},
		{"2030-04-23T17:24:28.000Z", "2030-04-23T17:24:28+00:00"},
		{"2030-04-23T17:24:28-0400", "2030-04-23T17:24:28-04:00"},
		{"2030-04-23T17:24-04:00", "2030-04-23T17:24:00-04:00"},
		{"2030-04-23t13:24:28z", "2030-04-23T13:24:28+00:00"},
		{"2030-04-23T17:24:28+14:00", "2030-04-23T17:24:28+14:00"},
		{"2030-04-23T17:24:28-14:00", "2030-04-23T17:24:28-14:00"},
		// ISO without an offset: UTC
		{"2030-04-23T13:24:28", "2030-04-23T13:24:28+00:00"},
		{"2030-04-23T13:24:28.25", "2030-04-23T13:24:28.25+00:00"},
		{"2030-04-23T13:24", "2030-04-23T13:24:00+00:00"},
		// date only: midnight UTC
		{"2030-04-23", "2030-04-23T00:00:00+00:00"},
		// M/D/YYYY h:mm:ss AM offset
		{"8/26/2030 7:23:57 PM -07:00", "2030-08-26T19:23:57-07:00"},
		{"08/26/2030 07:23:57 PM -07:00", "2030-08-26T19:23:57-07:00"},
		{"8/6/2030 7:23:57 AM +05:30", "2030-08-06T07:23:57+05:30"},
		{"8/26/2030 12:00:00 AM -07:00", "2030-08-26T00:00:00-07:00"},
		{"8/26/2030 12:00:00 PM -07:00", "2030-08-26T12:00:00-07:00"},
		{"8/26/2030 11:59:59 PM +00:00", "2030-08-26T23:59:59+00:00"},
		{"8/26/2030 7:23:57 PM Z", "2030-08-26T19:23:57+00:00"},
		{"8/26/2030 7:23:57 PM -0700", "2030-08-26T19:23:57-07:00"},
		{"8/26/2030 7:23:57 pm -07:00", "2030-08-26T19:23:57-07:00"},
		// M/D/YYYY h:mm:ss AM: UTC
		{"8/26/2030 7:23:57 PM", "2030-08-26T19:23:57+00:00"},
		{"12/31/2030 12:00:00 AM", "2030-12-31T00:00:00+00:00"},
		// M/D/YYYY: 12 AM UTC
		{"8/26/2030", "2030-08-26T00:00:00+00:00"},
		{"08/06/2030", "2030-08-06T00:00:00+00:00"},
		{"2/29/2028", "2028-02-29T00:00:00+00:00"},
		// surrounding whitespace
		{"  2030-04-23T13:24:28Z\n", "2030-04-23T13:24:28+00:00"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseExpiresAt(tc.in, expiryNow)
			if err != nil {
				t.Fatalf("ParseExpiresAt: %v", err)
			}
			if s := FormatExpiresAt(got); s != tc.want {
				t.Errorf("FormatExpiresAt = %q, want %q", s, tc.want)
			}
		})
	}
}

func TestExpiresAtInvalid(t *testing.T) {
	for _, tc := range []struct {
		in, msg string
	}{
		{"", "ISO 8601"},
		{"   ", "ISO 8601"},
		{"tomorrow", "ISO 8601"},
		{"1893456000", "ISO 8601"},
		{"2030-13-01", "ISO 8601"},
		{"2030-02-30", "ISO 8601"},
		{"2/30/2030", "ISO 8601"},
		{"26/8/2030", "ISO 8601"},
		{"8/26/30", "ISO 8601"},
		{"8-26-2030", "ISO 8601"},
		{"2030/04/23", "ISO 8601"},
		{"2030-4-23", "ISO 8601"},
		{"2030-04-23T25:00:00Z", "ISO 8601"},
		{"2030-04-23T13:60:00Z", "ISO 8601"},
		{"8/26/2030 13:00:00 PM -07:00", "ISO 8601"},
		{"8/26/2030 7:23:57 -07:00", "ISO 8601"},
		{"8/26/2030 7:23 PM -07:00", "ISO 8601"},
		{"8/26/2030 19:23:57", "ISO 8601"},
		{"2030-04-23T13:24:28 +00:00", "ISO 8601"},
		{"2030-04-23T13:24:28+00:00 extra", "ISO 8601"},
		{"2030-04-23T13:24:28Z" + strings.Repeat(" ", 100) + "x", "ISO 8601"},
		{strings.Repeat("9", 100), "ISO 8601"},
		{"2030-04-23T13:24:28+15:00", "offset"},
		{"8/26/2030 7:23:57 PM -14:30", "offset"},
		// not in the future
		{"2020-01-01", "future"},
		{"2025-12-31T23:59:59Z", "future"},
		{"2026-01-01T00:00:00Z", "future"},
		{"2026-01-01T01:00:00+01:00", "future"},
		{"1/1/2026", "future"},
		{"12/31/2025 11:59:59 PM", "future"},
		{"1/1/2026 12:00:00 AM +00:00", "future"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseExpiresAt(tc.in, expiryNow)
			var v *ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("ParseExpiresAt = %v, %v; want a ValidationError", got, err)
			}
			if len(v.Fields) != 1 || len(v.Fields["expires_at"]) != 1 {
				t.Fatalf("fields = %v", v.Fields)
			}
			m := v.Fields["expires_at"][0]
			if !strings.Contains(m, tc.msg) {
				t.Errorf("message %q does not mention %q", m, tc.msg)
			}
			if in := strings.TrimSpace(tc.in); len(in) > 4 && strings.Contains(m, in) {
				t.Errorf("message quotes the input: %q", m)
			}
			if !got.IsZero() {
				t.Errorf("time = %v, want zero", got)
			}
		})
	}
}

func TestExpiresAtFutureBoundary(t *testing.T) {
	now := time.Date(2030, 4, 23, 13, 24, 28, 0, time.UTC)
	if _, err := ParseExpiresAt("2030-04-23T13:24:28Z", now); err == nil {
		t.Error("a time equal to now was accepted")
	}
	if _, err := ParseExpiresAt("2030-04-23T13:24:28.000000001Z", now); err != nil {
		t.Errorf("a time 1ns after now was rejected: %v", err)
	}
	if _, err := ParseExpiresAt("2030-04-23T09:24:29-04:00", now); err != nil {
		t.Errorf("a time 1s after now in another offset was rejected: %v", err)
	}
	// now with a monotonic reading compares by wall clock.
	if _, err := ParseExpiresAt("2000-01-01", time.Now()); err == nil {
		t.Error("a past time was accepted against time.Now()")
	}
}

func TestExpiresAtKeepsOffset(t *testing.T) {
	for _, tc := range []struct {
		in     string
		offset int
	}{
		{"8/26/2030 7:23:57 PM -07:00", -7 * 3600},
		{"2030-04-23T17:24:28-04:00", -4 * 3600},
		{"2030-04-23T17:24:28+05:45", 5*3600 + 45*60},
		{"2030-04-23T17:24:28Z", 0},
		{"2030-04-23T17:24:28", 0},
		{"8/26/2030", 0},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseExpiresAt(tc.in, expiryNow)
			if err != nil {
				t.Fatal(err)
			}
			if _, off := got.Zone(); off != tc.offset {
				t.Errorf("offset = %d, want %d", off, tc.offset)
			}
			if got.Location() == time.Local && time.Local != time.UTC {
				t.Error("time carries the process's local zone, not a fixed offset")
			}
			// Round trip: the formatted value parses back to the same
			// instant with the same offset and the same rendering.
			s := FormatExpiresAt(got)
			back, err := ParseExpiresAt(s, expiryNow)
			if err != nil {
				t.Fatalf("re-parsing %q: %v", s, err)
			}
			if !back.Equal(got) {
				t.Errorf("round trip %q: %v != %v", s, back, got)
			}
			if _, off := back.Zone(); off != tc.offset {
				t.Errorf("round trip offset = %d, want %d", off, tc.offset)
			}
			if s2 := FormatExpiresAt(back); s2 != s {
				t.Errorf("round trip renders %q, then %q", s, s2)
			}
			// It is also plain RFC 3339.
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				t.Errorf("%q is not RFC 3339: %v", s, err)
			}
		})
	}
}

func TestExpiresAtFormat(t *testing.T) {
	la := time.FixedZone("", -7*3600)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2030, 8, 26, 19, 23, 57, 0, la), "2030-08-26T19:23:57-07:00"},
		{time.Date(2030, 8, 26, 19, 23, 57, 500_000_000, la), "2030-08-26T19:23:57.5-07:00"},
		{time.Date(2030, 8, 26, 19, 23, 57, 1, time.UTC), "2030-08-26T19:23:57.000000001+00:00"},
		{time.Date(2030, 8, 26, 19, 23, 57, 0, time.UTC), "2030-08-26T19:23:57+00:00"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := FormatExpiresAt(tc.t); got != tc.want {
				t.Errorf("got %q", got)
			}
		})
	}
}

// An unreadable entry in the expiry queue does not stop the purge.
func TestSweepSkipsUnreadableExpiryEntry(t *testing.T) {
	w := newTokenWorld(t, nil)
	if err := w.s.kv.Update(w.ctx, func(wr Writer) error {
		return wr.Put(append(expiryPrefix(), []byte("-garbage/x/y")...), []byte("token"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	tok := w.mustCreate("admin", TokenInput{Type: "token", Data: "short-lived", ExpiresAt: w.expiresIn(time.Minute)})
	w.clock.Advance(2 * time.Minute)
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.record(tok.ID); err == nil {
		t.Fatal("the expired token survived a sweep behind an unreadable queue entry")
	}
}
