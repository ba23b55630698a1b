package vaultstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBINTable(t *testing.T) {
	const header = "bin,funding,segment,product_code,product_name,issuer_name,issuer_country,issuer_country_name,issuer_country_numeric\n"
	for _, tc := range []struct {
		name, csv string
		rows      int
		err       string // "" for success; else a part of the error
	}{
		{"full", header + "424242,credit,consumer,F,Visa Classic,Bank,US,United States,840\n", 1, ""},
		{"bin only", "bin\n424242\n42424243\n5555555\n", 3, ""},
		{"columns in any order, any case, BOM", "\ufeffIssuer_Name,BIN\nBank,424242\n", 1, ""},
		{"comments and empty cells", "# exported 2026-01-01\nbin,funding\n424242,\n# a note\n555555,debit\n", 2, ""},
		{"quoted names", "bin,issuer_name\n424242,\"Bank, N.A.\"\n", 1, ""},
		{"header only", "bin,funding\n", 0, ""},
		{"empty", "", 0, "empty"},
		{"no bin column", "funding\ncredit\n", 0, "bin column is required"},
		{"unknown column", "bin,brand\n424242,visa\n", 0, `unknown column "brand"`},
		{"column twice", "bin,bin\n424242,424242\n", 0, "given twice"},
		{"short bin", "bin\n42424\n", 0, "line 2: bin must be 6 to 8 digits"},
		{"long bin", "bin\n424242424\n", 0, "line 2: bin must be"},
		{"letters in bin", "bin\n4242a2\n", 0, "line 2: bin must be"},
		{"duplicate bin", "bin\n424242\n424242\n", 0, "line 3: bin 424242 is given twice"},
		{"bad funding", "bin,funding\n424242,Credit Card\n", 0, "line 2: funding must be"},
		{"bad country", "bin,issuer_country\n424242,USA\n", 0, "line 2: issuer_country must be"},
		{"bad numeric", "bin,issuer_country_numeric\n424242,84\n", 0, "issuer_country_numeric must be"},
		{"control in name", "bin,issuer_name\n424242,\"a\x01b\"\n", 0, "issuer_name must be"},
		{"ragged row", "bin,funding\n424242\n", 0, "wrong number of fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := ParseBINTable(strings.NewReader(tc.csv))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if table.Len() != tc.rows {
				t.Errorf("%d rows, want %d", table.Len(), tc.rows)
			}
		})
	}
}

// TestBINTableLongestMatch: a BIN takes the row of its longest prefix in
// the table; a 6-digit BIN never takes a longer row.
func TestBINTableLongestMatch(t *testing.T) {
	table, err := ParseBINTable(strings.NewReader("bin,issuer_name\n424242,Six\n4242424,Seven\n42424242,Eight\n555555,Other\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ bin, want string }{
		{"42424242", "Eight"},
		{"42424243", "Seven"},
		{"42424300", ""},
		{"42424299", "Six"},
		{"424242", "Six"},
		{"55555512", "Other"},
		{"400000", ""},
	} {
		d := &CardDetails{BIN: tc.bin}
		table.enrich(d)
		got := ""
		if d.Issuer != nil {
			got = d.Issuer.Name
		}
		if got != tc.want {
			t.Errorf("bin %s: issuer %q, want %q", tc.bin, got, tc.want)
		}
	}
	var none *BINTable
	d := &CardDetails{BIN: "424242"}
	none.enrich(d)
	if d.Issuer != nil || none.Len() != 0 {
		t.Error("a nil table enriched details")
	}
}

func TestLoadBINTable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bins.csv")
	if err := os.WriteFile(path, []byte("bin,funding\n424242,credit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	table, err := LoadBINTable(path)
	if err != nil || table.Len() != 1 {
		t.Fatalf("LoadBINTable: %v, %d rows", err, table.Len())
	}
	if _, err := LoadBINTable(filepath.Join(dir, "missing.csv")); err == nil {
		t.Error("a missing file loaded")
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("bin\n12\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBINTable(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad file: %v", err)
	}
}

// binTableCSV returns a table of n rows of 8-digit BINs.
func binTableCSV(n int) string {
	var b strings.Builder
	b.WriteString("bin,funding,segment,product_code,issuer_name,issuer_country,issuer_country_name,issuer_country_numeric\n")
	for i := range n {
		fmt.Fprintf(&b, "%08d,credit,consumer,F,Issuer %d,US,United States of America,840\n", 40000000+i, i%1000)
	}
	return b.String()
}

// BenchmarkParseBINTable reads a table of 200,000 rows (a commercial BIN
// list's size) as a start does.
func BenchmarkParseBINTable(b *testing.B) {
	csv := binTableCSV(200_000)
	b.SetBytes(int64(len(csv)))
	for b.Loop() {
		if _, err := ParseBINTable(strings.NewReader(csv)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCardDetailsRead is what a read adds for a card: the BIN
// table's lookup and the copy of the details.
func BenchmarkCardDetailsRead(b *testing.B) {
	table, err := ParseBINTable(strings.NewReader(binTableCSV(200_000)))
	if err != nil {
		b.Fatal(err)
	}
	d, _ := deriveDetails(TokenTypeCard, map[string]any{"number": "4000012345678901"})
	for b.Loop() {
		if table.withBINTable(d).Funding != "credit" {
			b.Fatal("no funding")
		}
	}
}
