package vaultstore

import (
	"time"
)

// timestampLayout is ISO 8601 with a numeric offset, as clients of this
// interface expect ("2020-09-15T15:53:00.123456+00:00").
const timestampLayout = "2006-01-02T15:04:05.999999999-07:00"

// Timestamp is a time that marshals as ISO 8601 with a numeric offset.
type Timestamp struct{ time.Time }

// MarshalJSON writes the time with a numeric offset. The layout has no
// character JSON would escape, so quoting it is enough.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(timestampLayout)+8)
	b = append(b, '"')
	b = t.AppendFormat(b, timestampLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	return t.Time.UnmarshalJSON(b)
}

// stamp returns now as a Timestamp, truncated to microseconds.
func stamp(now time.Time) *Timestamp {
	return &Timestamp{now.UTC().Truncate(time.Microsecond)}
}
