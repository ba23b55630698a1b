package vaultstore

import (
	"encoding/json"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// BenchmarkRecordLexers measures what reading a stored card token's record
// costs with the codec's own decoder, against the strictjson scanner
// (validation alone, before any value is built) followed by
// encoding/json, the path strictjson's Decode takes. It is the figure
// behind the codec's own lexer (see token_codec.go).
func BenchmarkRecordLexers(b *testing.B) {
	rec, _ := codecBenchCard(b)
	plain, err := json.Marshal(rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r tokenRecord
			if err := r.decodeRecord(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strictjson_scan_only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := strictjson.Validate(plain, strictjson.DefaultLimits); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strictjson_decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r tokenRecord
			if err := strictjson.Decode(plain, &r, strictjson.DefaultLimits); err != nil {
				b.Fatal(err)
			}
		}
	})
}
