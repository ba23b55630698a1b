package vaultstore

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTimestampJSON(t *testing.T) {
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2020, 9, 15, 15, 53, 0, 123456000, time.UTC), `"2020-09-15T15:53:00.123456+00:00"`},
		{time.Date(2020, 9, 15, 15, 53, 0, 0, time.UTC), `"2020-09-15T15:53:00+00:00"`},
		{time.Date(2021, 1, 2, 3, 4, 5, 6, time.FixedZone("", -5*3600-30*60)), `"2021-01-02T03:04:05.000000006-05:30"`},
	} {
		got, err := json.Marshal(struct {
			At *Timestamp `json:"at"`
		}{&Timestamp{tc.in}})
		if err != nil || string(got) != `{"at":`+tc.want+`}` {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.in, got, err, tc.want)
			continue
		}
		var back Timestamp
		if err := json.Unmarshal([]byte(tc.want), &back); err != nil || !back.Equal(tc.in) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", tc.want, back.Time, err, tc.in)
		}
	}
}
