package vaultstore

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// A BIN table is the operator's BIN database: the details of card
// numbers that only an issuer list can tell (funding, issuer, issuer
// country, segment, product). The vault never guesses them: without a
// table they are absent.
//
// The table is a CSV file (RFC 4180, UTF-8, comma-separated, lines
// starting with # ignored) whose first row names its columns, in any
// order:
//
//	bin                    required: a BIN prefix of 6 to 8 digits
//	funding                credit, debit, prepaid, ... (a-z, 0-9, _ and -)
//	segment                consumer, commercial, business, ... (same)
//	product_code           the network's product code (letters, digits, _ and -)
//	product_name           the product's name
//	issuer_name            the issuing bank's name
//	issuer_country         ISO 3166-1 alpha-2 code of the issuer's country (US)
//	issuer_country_name    the country's name
//	issuer_country_numeric ISO 3166-1 numeric code (840)
//
// Only bin is required; an empty cell leaves that detail out. A card's
// details come from the row with the longest bin that its BIN starts
// with. A file with an unknown column, a malformed value or a bin given
// twice is refused as a whole, naming the line.
//
//	bin,funding,segment,issuer_name,issuer_country,issuer_country_name,issuer_country_numeric
//	424242,credit,consumer,Example Bank,US,United States of America,840
//	42424243,debit,consumer,Example Bank,US,United States of America,840
type BINTable struct {
	rows map[string]binRow
}

// binRow is one row of a BIN table.
type binRow struct {
	funding, segment         string
	productCode, productName string
	issuerName               string
	country, countryName     string
	countryNumeric           string
}

// binTableColumns are the columns a BIN table may have.
var binTableColumns = []string{
	"bin", "funding", "segment", "product_code", "product_name", "issuer_name",
	"issuer_country", "issuer_country_name", "issuer_country_numeric",
}

// MaxBINTableRows bounds the rows of a BIN table (a full commercial BIN
// list has a few hundred thousand).
const MaxBINTableRows = 5_000_000

// binTableKeyword reports a funding or segment value: a-z, 0-9, _ and -,
// 1 to 40 bytes.
func binTableKeyword(v string) bool {
	return len(v) <= 40 && allBytes(v, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' })
}

// binTableCode reports a product code: letters, digits, _ and -, 1 to 40
// bytes.
func binTableCode(v string) bool {
	return len(v) <= 40 && allBytes(v, func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	})
}

// binTableAlpha2 reports an ISO 3166-1 alpha-2 code.
func binTableAlpha2(v string) bool {
	return len(v) == 2 && allBytes(v, func(c byte) bool { return c >= 'A' && c <= 'Z' })
}

// binTableNumeric reports an ISO 3166-1 numeric code.
func binTableNumeric(v string) bool { return len(v) == 3 && isASCIIDigits(v) }

// allBytes reports whether v is not empty and ok holds for each byte.
func allBytes(v string, ok func(byte) bool) bool {
	for i := 0; i < len(v); i++ {
		if !ok(v[i]) {
			return false
		}
	}
	return v != ""
}

// LoadBINTable reads a BIN table from a CSV file (format: BINTable).
func LoadBINTable(path string) (*BINTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bin table: %w", err)
	}
	defer f.Close()
	t, err := ParseBINTable(f)
	if err != nil {
		return nil, fmt.Errorf("bin table %s: %w", path, err)
	}
	return t, nil
}

// ParseBINTable reads a BIN table in CSV (format: BINTable).
func ParseBINTable(r io.Reader) (*BINTable, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 0 // every row as long as the header
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the file is empty: the first row must name the columns")
	}
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(name, "\ufeff")))
		if !slices.Contains(binTableColumns, name) {
			return nil, fmt.Errorf("line 1: unknown column %q; columns are %s", name, strings.Join(binTableColumns, ", "))
		}
		if _, dup := col[name]; dup {
			return nil, fmt.Errorf("line 1: column %q is given twice", name)
		}
		col[name] = i
	}
	if _, ok := col["bin"]; !ok {
		return nil, errors.New("line 1: the bin column is required")
	}
	t := &BINTable{rows: map[string]binRow{}}
	// the same funding, segment, product, issuer and country recur on
	// many rows: each distinct value is kept once
	interned := map[string]string{}
	intern := func(v string) string {
		if w, ok := interned[v]; ok {
			return w
		}
		interned[v] = v
		return v
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		cell := func(name string) string {
			if i, ok := col[name]; ok {
				return intern(strings.TrimSpace(rec[i]))
			}
			return ""
		}
		bin := strings.TrimSpace(rec[col["bin"]]) // unique per row: not interned
		if len(bin) < 6 || len(bin) > 8 || !isASCIIDigits(bin) {
			return nil, fmt.Errorf("line %d: bin must be 6 to 8 digits", line)
		}
		if _, dup := t.rows[bin]; dup {
			return nil, fmt.Errorf("line %d: bin %s is given twice", line, bin)
		}
		row := binRow{
			funding: cell("funding"), segment: cell("segment"),
			productCode: cell("product_code"), productName: cell("product_name"),
			issuerName: cell("issuer_name"), country: cell("issuer_country"),
			countryName: cell("issuer_country_name"), countryNumeric: cell("issuer_country_numeric"),
		}
		if err := row.check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if len(t.rows) >= MaxBINTableRows {
			return nil, fmt.Errorf("line %d: a BIN table holds at most %d rows", line, MaxBINTableRows)
		}
		t.rows[bin] = row
	}
}

// check validates a row's cells.
func (r binRow) check() error {
	checks := []struct {
		name, value string
		ok          func(string) bool
		want        string
	}{
		{"funding", r.funding, binTableKeyword, "a-z, 0-9, _ and -, at most 40"},
		{"segment", r.segment, binTableKeyword, "a-z, 0-9, _ and -, at most 40"},
		{"product_code", r.productCode, binTableCode, "letters, digits, _ and -, at most 40"},
		{"product_name", r.productName, plainName, "printable text of at most 200 characters"},
		{"issuer_name", r.issuerName, plainName, "printable text of at most 200 characters"},
		{"issuer_country", r.country, binTableAlpha2, "an ISO 3166-1 alpha-2 code such as US"},
		{"issuer_country_name", r.countryName, plainName, "printable text of at most 200 characters"},
		{"issuer_country_numeric", r.countryNumeric, binTableNumeric, "an ISO 3166-1 numeric code of 3 digits"},
	}
	for _, c := range checks {
		if c.value != "" && !c.ok(c.value) {
			return fmt.Errorf("%s must be %s", c.name, c.want)
		}
	}
	return nil
}

// plainName reports whether s is printable UTF-8 text of at most 200
// characters.
func plainName(s string) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > 200 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Len returns how many rows the table holds; 0 for a nil table.
func (t *BINTable) Len() int {
	if t == nil {
		return 0
	}
	return len(t.rows)
}

// lookup returns the row with the longest bin that bin starts with.
func (t *BINTable) lookup(bin string) (binRow, bool) {
	if t == nil {
		return binRow{}, false
	}
	for n := min(8, len(bin)); n >= 6; n-- {
		if row, ok := t.rows[bin[:n]]; ok {
			return row, true
		}
	}
	return binRow{}, false
}

// enrich sets d's BIN-database fields from the table's row for d.BIN;
// a nil table, or a BIN it does not hold, leaves them absent.
func (t *BINTable) enrich(d *CardDetails) {
	row, ok := t.lookup(d.BIN)
	if !ok {
		return
	}
	d.Funding, d.Segment = row.funding, row.segment
	if row.productCode != "" || row.productName != "" {
		d.Product = &CardProduct{Code: row.productCode, Name: row.productName}
	}
	if row.issuerName != "" || row.country != "" {
		d.Issuer = &CardIssuer{Country: row.country, Name: row.issuerName}
	}
	if row.country != "" || row.countryName != "" || row.countryNumeric != "" {
		d.IssuerCountry = &CardIssuerCountry{Alpha2: row.country, Name: row.countryName, Numeric: row.countryNumeric}
	}
}

// binTableHolder holds the table in use; see Store.SetBINTable.
type binTableHolder struct {
	p atomic.Pointer[BINTable]
}

// SetBINTable puts a BIN table in use for every read and lookup from now
// on (nil: none). The vault app sets it at each start, so a reload with a
// new table file, or without one, takes effect at once.
func (s *Store) SetBINTable(t *BINTable) { s.binTable.p.Store(t) }

// BINTable returns the BIN table in use; nil when there is none.
func (s *Store) BINTable() *BINTable { return s.binTable.p.Load() }
