package vaultstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// TestAuditExportMatchesRecord: an exported line has exactly the
// record's JSON members with the same values, plus seq, prev and mac,
// for a record with every member set (each found by reflection, so a
// member added to AuditRecord and not to auditFields fails here) and for
// one with only the members that are always there.
func TestAuditExportMatchesRecord(t *testing.T) {
	full := AuditRecord{}
	v := reflect.ValueOf(&full).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(fmt.Sprintf("v%d \"quoted\" \u00e9", i))
		case []string:
			f.Set(reflect.ValueOf([]string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)}))
		case *Timestamp:
			f.Set(reflect.ValueOf(&Timestamp{time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.FixedZone("", 3600))}))
		default:
			t.Fatalf("AuditRecord.%s has a type this test does not fill: %T", v.Type().Field(i).Name, f.Interface())
		}
	}
	sparse := AuditRecord{ID: "i", TenantID: "t", EntityType: "token", Operation: "read"}
	for _, rec := range []AuditRecord{full, sparse} {
		chained := &ChainedAuditRecord{AuditRecord: rec, Seq: 7, Prev: "p", MAC: "m"}
		canonical, err := rec.appendRecord(nil)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(canonical, &want); err != nil {
			t.Fatal(err)
		}
		if want["created_at"] == nil {
			want["created_at"] = "" // null in the record, an empty string in the line, as before
		}
		want["seq"], want["prev"], want["mac"] = uint64(7), "p", "m"
		enc := zapcore.NewMapObjectEncoder()
		for _, f := range auditFields(chained) {
			f.AddTo(enc)
		}
		for name, w := range want {
			got, ok := enc.Fields[name]
			if !ok {
				t.Errorf("the export leaves out %s", name)
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s: exported %v, the record holds %v", name, got, w)
			}
		}
		if len(enc.Fields) != len(want) {
			t.Errorf("export fields %v, want %v", enc.Fields, want)
		}
	}
}

// BenchmarkAuditFields: the fields of one exported record, made for
// every audited read and proxied call.
func BenchmarkAuditFields(b *testing.B) {
	ts := Timestamp{time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC)}
	rec := &ChainedAuditRecord{AuditRecord: AuditRecord{ID: "6f1c2a44-8d0e-4b7a-9d7e-2f7b1c0a9e11", TenantID: "0b8f4f3e-2d7c-4f0a-8d5e-6a1b2c3d4e5f",
		ActorID: "3c2b1a09-8f7e-4d6c-b5a4-938271605f4e", ActorType: "application", EntityType: "proxy", EntityID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
		Operation: "detokenize", Message: "proxy request detokenized for api.example.com", CreatedAt: &ts,
		TokenIDs: []string{"71852e71-ffc2-47f1-8025-04b5b0ac9075"}, Destination: "api.example.com"}, Seq: 30900, Prev: "8530238ec93f5201", MAC: "517e439d12bb4d93"}
	b.ReportAllocs()
	for b.Loop() {
		if len(auditFields(rec)) == 0 {
			b.Fatal("no fields")
		}
	}
}
