package vaultstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// codecJSONDecode decodes b into a zero tokenRecord as openRecord did
// before the fast path.
func codecJSONDecode(b []byte) (tokenRecord, error) {
	var r tokenRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := dec.Decode(&r)
	return r, err
}

// codecCheckDecode checks that decodeRecord fails exactly when
// encoding/json does and otherwise gives the same value.
func codecCheckDecode(t testing.TB, b []byte) {
	t.Helper()
	want, wantErr := codecJSONDecode(b)
	var got tokenRecord
	gotErr := got.decodeRecord(b)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("decoding %q: error %v, encoding/json's %v", b, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decoding %q:\n got %#v\nwant %#v", b, got, want)
	}
}

// codecCheckEncode checks that AppendJSON and appendRecord give exactly
// json.Marshal's bytes (or both fail), appended to a prefix, and that the
// record decodes back as encoding/json decodes it.
func codecCheckEncode(t testing.TB, rec *tokenRecord) {
	t.Helper()
	prefix := []byte("prefix")
	want, wantErr := json.Marshal(&rec.Token)
	got, gotErr := rec.Token.AppendJSON(bytes.Clone(prefix))
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("AppendJSON error %v, json.Marshal's %v", gotErr, wantErr)
	}
	if wantErr == nil && !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
		t.Fatalf("AppendJSON:\n got %s\nwant prefix%s", got, want)
	}
	want, wantErr = json.Marshal(rec)
	got, gotErr = rec.appendRecord(bytes.Clone(prefix))
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("appendRecord error %v, json.Marshal's %v", gotErr, wantErr)
	}
	if wantErr != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("appendRecord failed but changed dst to %q", got)
		}
		return
	}
	if !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
		t.Fatalf("appendRecord:\n got %s\nwant prefix%s", got, want)
	}
	codecCheckDecode(t, want)
}

func codecTime(s string) *Timestamp {
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &Timestamp{tm}
}

func codecBool(b bool) *bool { return &b }

// codecTrickyStrings are strings encoding/json escapes or repairs.
var codecTrickyStrings = []string{
	"", "plain", "<script>&amp;</script>", `"quoted"`, `back\slash`, "line\nbreak\r\ttab",
	"\x00\x01\x1f\x7f", "\b\f", "sep\u2028para\u2029", "caf\u00e9 \u20ac \U0001F600",
	"bad\xffutf8", "\xed\xa0\x80surrogate", "trunc\xe2\x80", "/slash/", "\u2027\u202a",
}

// TestTokenCodecTable covers the encodings and decodings that differ
// between fields: omitempty, nil against empty, escapes, numbers,
// timestamps, extras and the CVC.
func TestTokenCodecTable(t *testing.T) {
	card := map[string]any{
		"number": "4242424242424242", "expiration_month": json.Number("12"),
		"expiration_year": json.Number("2030"),
	}
	base := Token{ID: "a1b2", TenantID: "t1", Type: "card"}
	cases := map[string]tokenRecord{
		"zero":                {},
		"minimal":             {Token: base},
		"nil containers":      {Token: Token{ID: "x", Containers: nil}},
		"empty containers":    {Token: Token{ID: "x", Containers: []string{}}},
		"containers":          {Token: Token{ID: "x", Containers: []string{"/pci/", "/a&b/"}}},
		"empty metadata":      {Token: Token{ID: "x", Metadata: map[string]string{}}},
		"metadata sorted":     {Token: Token{ID: "x", Metadata: map[string]string{"z": "1", "a": "2", "M": "<3>", "é": "", "": "empty"}}},
		"empty indexes":       {Token: Token{SearchIndexes: []string{}}, IndexHashes: []string{}},
		"indexes":             {Token: Token{SearchIndexes: []string{"{{ data.number | last4 }}"}}, IndexHashes: []string{"h1", "h2"}},
		"deduplicate false":   {Token: Token{DeduplicateToken: codecBool(false)}},
		"deduplicate true":    {Token: Token{DeduplicateToken: codecBool(true)}},
		"extras false":        {Token: Token{Extras: &TokenExtras{}}},
		"extras true":         {Token: Token{Extras: &TokenExtras{Deduplicated: true}}},
		"nil data":            {Token: Token{Data: nil, Mask: nil}},
		"string data":         {Token: Token{Data: "4242424242424242", Mask: "{{ data | reveal_last: 4 }}"}},
		"card":                {Token: Token{ID: "c", Type: "card", Data: card, Mask: map[string]any{"number": "{{ data.number | reveal_last: 4 }}"}}},
		"empty map data":      {Token: Token{Data: map[string]any{}, Mask: []any{}}},
		"nil map data":        {Token: Token{Data: map[string]any(nil), Mask: []any(nil)}},
		"null inside data":    {Token: Token{Data: map[string]any{"a": nil, "b": []any{nil, false, true}}}},
		"nested data":         {Token: Token{Data: map[string]any{"a": map[string]any{"b": []any{map[string]any{"c": []any{json.Number("1"), "x"}}}}}}},
		"bool data":           {Token: Token{Data: false}},
		"fingerprints":        {Token: Token{Fingerprint: "fp", FingerprintExpression: "{{ data }}"}},
		"actors":              {Token: Token{CreatedBy: "app-1", ModifiedBy: "app-2"}},
		"all timestamps":      {Token: Token{ExpiresAt: codecTime("2030-01-02T03:04:05.123456789Z"), CreatedAt: codecTime("2020-09-15T15:53:00.123456+00:00"), ModifiedAt: codecTime("2021-01-01T00:00:00+05:30")}, CVCExpiresAt: codecTime("1999-12-31T23:59:59-08:00")},
		"zero timestamp":      {Token: Token{CreatedAt: &Timestamp{}}},
		"cvc":                 {Token: base, CVC: []byte{0, 1, 2, 0xfe, 0xff}, CVCExpiresAt: codecTime("2030-01-01T00:00:00Z")},
		"cvc one byte":        {CVC: []byte{7}},
		"cvc empty":           {CVC: []byte{}},
		"numbers":             {Token: Token{Data: []any{json.Number("0"), json.Number("-0"), json.Number("123456789012345678901234567890"), json.Number("-1.5e-300"), json.Number("1E+400"), json.Number("2.50"), json.Number("")}}},
		"invalid number":      {Token: Token{Data: map[string]any{"n": json.Number("12a")}}},
		"invalid number mask": {Token: Token{Mask: json.Number("+1")}},
		"float data":          {Token: Token{Data: map[string]any{"f": 1.5, "i": 7, "big": 1e21, "s": []string{"<"}, "m": map[string]string{"k": "v"}}}},
		"unsupported data":    {Token: Token{Data: map[string]any{"c": make(chan int)}}},
		"nan data":            {Token: Token{Mask: []any{1.0, float64Inf()}}},
		"struct data":         {Token: Token{Data: struct{ A string }{"<b>"}}},
		"timestamp in data":   {Token: Token{Data: map[string]any{"t": Timestamp{time.Unix(0, 0).UTC()}, "p": &Timestamp{}}}},
		"raw message data":    {Token: Token{Data: json.RawMessage(`{"b":1, "a":"<"}`)}},
		"bytes data":          {Token: Token{Data: []byte("hi")}},
	}
	for i, s := range codecTrickyStrings {
		cases[fmt.Sprintf("tricky %d", i)] = tokenRecord{
			Token: Token{
				ID: s, TenantID: s, Type: s, Data: map[string]any{s: s, "k": []any{s}}, Mask: s,
				Fingerprint: s, FingerprintExpression: s, Containers: []string{s},
				Metadata: map[string]string{s: s, s + "x": "y"}, SearchIndexes: []string{s},
				CreatedBy: s, ModifiedBy: s,
			},
			IndexHashes: []string{s},
		}
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			codecCheckEncode(t, &rec)
		})
	}
}

func float64Inf() float64 { return 1 / zeroFloat }

var zeroFloat float64

// TestTokenCodecEncodeDeep checks data nested past the inline depth and
// data that refers to itself.
func TestTokenCodecEncodeDeep(t *testing.T) {
	var deep any = "leaf"
	for i := range 3 * maxInlineDepth {
		if i%2 == 0 {
			deep = []any{deep, json.Number("1")}
		} else {
			deep = map[string]any{"<k>": deep}
		}
	}
	codecCheckEncode(t, &tokenRecord{Token: Token{Data: deep}})

	cyclic := map[string]any{"a": "b"}
	cyclic["self"] = cyclic
	rec := &tokenRecord{Token: Token{Data: cyclic}}
	if _, err := rec.appendRecord(nil); err == nil {
		t.Fatal("appendRecord encoded a cyclic value")
	}
	if _, err := rec.Token.AppendJSON(nil); err == nil {
		t.Fatal("AppendJSON encoded a cyclic value")
	}
	var nilToken *Token
	if got, err := nilToken.AppendJSON(nil); err != nil || string(got) != "null" {
		t.Fatalf("nil token: %q, %v", got, err)
	}
}

// TestTokenCodecDecodeInputs compares decodeRecord with encoding/json on
// inputs json.Marshal does not write: other spacing, member names in
// other cases or escaped, unknown and repeated members, nulls, and
// malformed JSON.
func TestTokenCodecDecodeInputs(t *testing.T) {
	inputs := []string{
		``, ` `, `null`, ` null `, `null x`, `nullx`, `nul`, `{}`, ` {} `, `{}garbage`, `{} {"id":"x"}`,
		`[]`, `"x"`, `1`, `true`, `{`, `{"id"`, `{"id":`, `{"id":"x"`, `{"id":"x",}`, `{,}`, `{"id" "x"}`,
		`{"id":"x"}`, "{\n\t\"id\" : \"x\" ,\r\n\"type\":\"card\"\n}",
		`{"ID":"x","Tenant_Id":"t","TYPE":"card","DATA":{"a":1},"_EXTRAS":{"DEDUPLICATED":true}}`,
		`{"\u0069d":"x","t\u0065nant_id":"y"}`, `{"ſearch_indexes":["a"],"Kontainers":["b"],"contaİners":["c"]}`,
		`{"unknown":{"a":[1,2,{"b":null}],"c":"\u00e9"},"id":"x","other":[true,false,null,-1.5e3]}`,
		`{"id":null,"tenant_id":null,"data":null,"mask":null,"containers":null,"metadata":null,"search_indexes":null,"deduplicate_token":null,"expires_at":null,"_extras":null,"cvc_sealed":null,"cvc_expires_at":null,"index_hashes":null}`,
		`{"id":"a","id":"b"}`, `{"id":"a","id":null}`, `{"data":{"a":1},"data":[1]}`, `{"data":{"a":1,"a":2}}`,
		`{"containers":["a","b","c"],"containers":["x"]}`, `{"containers":["a","b"],"containers":[null,"y",null]}`,
		`{"containers":["a","b","c","d","e"],"containers":["x"],"containers":[null,null,null,null]}`,
		`{"containers":[]}`, `{"containers":["a"],"containers":[]}`, `{"containers":[null]}`, `{"containers":[1]}`,
		`{"containers":"a"}`, `{"containers":{}}`, `{"containers":[["a"]]}`,
		`{"metadata":{"a":"1"},"metadata":{"b":"2"}}`, `{"metadata":{}}`, `{"metadata":{"a":null}}`,
		`{"metadata":{"a":1}}`, `{"metadata":[]}`, `{"metadata":{"a":"1","a":"2"}}`, `{"metadata":{"\u00e9\n":"\u2028"}}`,
		`{"deduplicate_token":true}`, `{"deduplicate_token":false}`, `{"deduplicate_token":"true"}`, `{"deduplicate_token":1}`,
		`{"_extras":{}}`, `{"_extras":{"deduplicated":true},"_extras":{"other":1}}`, `{"_extras":{"deduplicated":null}}`,
		`{"_extras":{"deduplicated":"yes"}}`, `{"_extras":[]}`, `{"_extras":"x"}`, `{"_extras":{"deduplicated":true,"deduplicated":false}}`,
		`{"expires_at":"2030-01-01T00:00:00Z"}`, `{"expires_at":"2030-01-01T00:00:00.123456789+05:30"}`,
		`{"expires_at":"2030-01-01"}`, `{"expires_at":"2030-01-01T00:00:00\u005a"}`, `{"expires_at":1}`,
		`{"expires_at":{"a":1}}`, `{"expires_at":["2030-01-01T00:00:00Z"]}`, `{"expires_at":true}`,
		`{"created_at":"0000-01-01T00:00:00Z","modified_at":"9999-12-31T23:59:59.999999999-23:59"}`,
		`{"cvc_expires_at":"2030-01-01T00:00:00+24:00"}`,
		`{"cvc_sealed":"AAEC/v8="}`, `{"cvc_sealed":""}`, `{"cvc_sealed":"AAEC\n/v8="}`, `{"cvc_sealed":"AAEC\/v8="}`,
		`{"cvc_sealed":"!!!"}`, `{"cvc_sealed":"AAE"}`, `{"cvc_sealed":[1,2,3]}`, `{"cvc_sealed":[256]}`, `{"cvc_sealed":1}`,
		`{"data":"\ud83d\ude00 \ud800 \u0000 \"\\\/\b\f\n\r\t"}`, "{\"data\":\"bad\xffutf8\"}", "{\"id\":\"bad\xffutf8\"}",
		"{\"data\":\"ctl\x01\"}", `{"data":"\x"}`, `{"data":"\u12"}`, `{"data":"\u12G4"}`, `{"data":"unterminated}`,
		"{\"bad\xffkey\":1}", `{"data":{"\u0000":1}}`,
		`{"data":[0,-0,1.5,-1.5e10,1E+2,1e-2,123456789012345678901234567890]}`,
		`{"data":01}`, `{"data":-}`, `{"data":1.}`, `{"data":.5}`, `{"data":1e}`, `{"data":1e+}`, `{"data":+1}`, `{"data":0x1}`,
		`{"data":tru}`, `{"data":truex}`, `{"data":nulll}`, `{"data":[1,]}`, `{"data":[,1]}`, `{"data":{"a"}}`, `{"data":{"a":}}`,
		`{"data":{1:2}}`, `{"data":[}`, `{"data":{]}`, `{"id":"x"]`, `{"id":"x"}}`,
		`{"index_hashes":["a","b"],"search_indexes":[],"fingerprint":"f","fingerprint_expression":"e","created_by":"c","modified_by":"m"}`,
		`{"id":5}`, `{"id":true}`, `{"id":{}}`, `{"id":[]}`, `{"type":"\u003c"}`,
	}
	for _, in := range inputs {
		codecCheckDecode(t, []byte(in))
	}
	// nesting up to encoding/json's limit and one past it, in data and in
	// an unknown member
	for _, depth := range []int{maxNestingDepth - 1, maxNestingDepth} {
		for _, member := range []string{"data", "unknown"} {
			in := `{"` + member + `":` + strings.Repeat(`[`, depth) + strings.Repeat(`]`, depth) + `}`
			codecCheckDecode(t, []byte(in))
			in = `{"` + member + `":` + strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`
			codecCheckDecode(t, []byte(in))
		}
	}
}

// TestTokenCodecDecodeCopies checks that a decoded record keeps nothing
// of the input buffer, which openRecord's caller may clear.
func TestTokenCodecDecodeCopies(t *testing.T) {
	rec := codecRandomRecord(rand.New(rand.NewPCG(1, 2)))
	rec.ID, rec.Data = "id", map[string]any{"k": "v", "n": json.Number("42"), "l": []any{"x"}}
	rec.Metadata = map[string]string{"mk": "mv"}
	plain, err := json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	var got tokenRecord
	if err := got.decodeRecord(plain); err != nil {
		t.Fatal(err)
	}
	want, err := codecJSONDecode(plain)
	if err != nil {
		t.Fatal(err)
	}
	for i := range plain {
		plain[i] = 'X'
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("clearing the input changed the decoded record:\n got %#v\nwant %#v", got, want)
	}
}

// codecPieces are what random strings are made of.
var codecPieces = []string{
	"a", "Z", "0", " ", "_", "-", "/", ".", "<", ">", "&", `"`, `\`, "\n", "\t", "\x00", "\x1f", "\x7f",
	"\u00e9", "\u20ac", "\u2028", "\u2029", "\U0001F600", "\xff", "\xe2\x80", "\xed\xa0\x80", "{{", "}}", "null",
}

func codecRandomString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return fmt.Sprintf("tok_%x", r.Uint64()) // the common, plain case
	}
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(codecPieces[r.IntN(len(codecPieces))])
	}
	return b.String()
}

func codecRandomStrings(r *rand.Rand) []string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+r.IntN(3))
	for i := range out {
		out[i] = codecRandomString(r)
	}
	return out
}

var codecNumbers = []string{"0", "-0", "7", "-12", "2030", "1.5", "-0.001", "1e10", "1E-7", "-2.5e+300", "123456789012345678901234567890", "1.0"}

func codecRandomValue(r *rand.Rand, depth int) any {
	n := 6
	if depth < 4 {
		n = 8
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return json.Number(codecNumbers[r.IntN(len(codecNumbers))])
	case 3, 4, 5:
		return codecRandomString(r)
	case 6:
		m := make(map[string]any)
		for range r.IntN(5) {
			m[codecRandomString(r)] = codecRandomValue(r, depth+1)
		}
		return m
	default:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = codecRandomValue(r, depth+1)
		}
		return a
	}
}

var codecZones = []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("EST", -5*3600), time.FixedZone("", 5*3600+1800), time.Local}

func codecRandomTime(r *rand.Rand) *Timestamp {
	if r.IntN(3) == 0 {
		return nil
	}
	sec := r.Int64N(5_000_000_000) // 1970 to 2128
	nsec := int64(0)
	switch r.IntN(3) {
	case 1:
		nsec = r.Int64N(1e9)
	case 2:
		nsec = r.Int64N(1e6) * 1000
	}
	return &Timestamp{time.Unix(sec, nsec).In(codecZones[r.IntN(len(codecZones))])}
}

func codecRandomRecord(r *rand.Rand) tokenRecord {
	opt := func(s string) string {
		if r.IntN(2) == 0 {
			return ""
		}
		return s
	}
	rec := tokenRecord{Token: Token{
		ID: codecRandomString(r), TenantID: codecRandomString(r), Type: codecRandomString(r),
		Fingerprint: opt(codecRandomString(r)), FingerprintExpression: opt(codecRandomString(r)),
		Containers: codecRandomStrings(r), SearchIndexes: codecRandomStrings(r),
		ExpiresAt: codecRandomTime(r), CreatedAt: codecRandomTime(r), ModifiedAt: codecRandomTime(r),
		CreatedBy: opt(codecRandomString(r)), ModifiedBy: opt(codecRandomString(r)),
	}, CVCExpiresAt: codecRandomTime(r), IndexHashes: codecRandomStrings(r)}
	if r.IntN(4) > 0 {
		rec.Data = codecRandomValue(r, 0)
	}
	if r.IntN(2) == 0 {
		rec.Mask = codecRandomValue(r, 0)
	}
	if r.IntN(2) == 0 {
		rec.Metadata = make(map[string]string)
		for range r.IntN(4) {
			rec.Metadata[codecRandomString(r)] = codecRandomString(r)
		}
	}
	if r.IntN(3) == 0 {
		rec.DeduplicateToken = codecBool(r.IntN(2) == 0)
	}
	if r.IntN(3) == 0 {
		rec.Extras = &TokenExtras{Deduplicated: r.IntN(2) == 0}
	}
	if r.IntN(3) == 0 {
		rec.Card = &CardDetails{BIN: opt(codecRandomString(r)), Last4: opt(codecRandomString(r)),
			ExpirationMonth: r.IntN(13), ExpirationYear: r.IntN(3000), Brand: opt(codecRandomString(r))}
		if r.IntN(2) == 0 {
			rec.Card.Issuer = &CardIssuer{Country: opt(codecRandomString(r)), Name: opt(codecRandomString(r))}
		}
	}
	if r.IntN(3) == 0 {
		rec.Bank = &BankDetails{RoutingNumber: opt(codecRandomString(r)), AccountNumberLast4: opt(codecRandomString(r))}
	}
	if r.IntN(2) == 0 {
		rec.CVC = make([]byte, r.IntN(40))
		for i := range rec.CVC {
			rec.CVC[i] = byte(r.Uint32())
		}
	}
	return rec
}

// TestTokenCodecRandom compares the codec with encoding/json on random
// records, both ways.
func TestTokenCodecRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(20260401, 7))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		rec := codecRandomRecord(r)
		codecCheckEncode(t, &rec)
	}
}

// codecMutate changes b in a few random places, favouring the bytes that
// matter to JSON.
func codecMutate(r *rand.Rand, b []byte) []byte {
	const special = "{}[]\",:\\ntfu0-.eE+ \t\x00\xff"
	b = bytes.Clone(b)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			return []byte{special[r.IntN(len(special))]}
		}
		i := r.IntN(len(b))
		switch r.IntN(5) {
		case 0:
			b = append(b[:i], b[i+1:]...)
		case 1:
			b = slices.Insert(b, i, special[r.IntN(len(special))])
		case 2:
			b[i] = special[r.IntN(len(special))]
		case 3:
			b[i] ^= 0x20 // flips the case of a letter
		default:
			j := i + r.IntN(len(b)-i)
			b = slices.Insert(b, j, b[i:j]...) // repeats a stretch, members included
		}
	}
	return b
}

// TestTokenCodecMutations compares decodeRecord with encoding/json on
// random records changed in random places: both must refuse the same
// inputs and give the same value for the rest.
func TestTokenCodecMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		rec := codecRandomRecord(r)
		b, err := json.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		codecCheckDecode(t, codecMutate(r, b))
	}
}

// codecSeedRecords are canonical records for the fuzz corpora.
func codecSeedRecords() []tokenRecord {
	r := rand.New(rand.NewPCG(3, 4))
	seeds := []tokenRecord{
		{},
		{Token: Token{ID: "a", TenantID: "t", Type: "card", Containers: []string{"/pci/"},
			Data:     map[string]any{"number": "4242424242424242", "expiration_month": json.Number("12"), "expiration_year": json.Number("2030")},
			Mask:     map[string]any{"number": "{{ data.number | reveal_last: 4 }}"},
			Metadata: map[string]string{"k": "v"}, CreatedBy: "app", CreatedAt: codecTime("2024-01-02T03:04:05.123456Z"),
			Extras: &TokenExtras{Deduplicated: true}, DeduplicateToken: codecBool(false)},
			CVC: []byte{1, 2, 3, 4, 5}, CVCExpiresAt: codecTime("2024-01-02T04:04:05.123456Z"), IndexHashes: []string{"h"}},
	}
	for range 6 {
		seeds = append(seeds, codecRandomRecord(r))
	}
	return seeds
}

// FuzzTokenCodecDecode feeds decodeRecord arbitrary bytes: it must never
// panic, must fail exactly when encoding/json fails, and must otherwise
// give encoding/json's value.
func FuzzTokenCodecDecode(f *testing.F) {
	for _, rec := range codecSeedRecords() {
		b, err := json.Marshal(&rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`null`, `{"ID":"x","data":[1,{"a":null}],"unknown":{"b":"\u00e9"}}`,
		`{"containers":["a","b"],"containers":[null]}`, `{"cvc_sealed":"AA==","expires_at":"2030-01-01T00:00:00+01:00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got tokenRecord
		gotErr := got.decodeRecord(b)
		want, wantErr := codecJSONDecode(b)
		if wantErr != nil {
			if gotErr == nil {
				t.Fatalf("decodeRecord accepted %q, which encoding/json refuses: %v", b, wantErr)
			}
			return
		}
		// json.Marshal's own output in particular; any other input
		// encoding/json accepts must give the same value too
		if gotErr != nil {
			t.Fatalf("decodeRecord refused %q, which encoding/json accepts: %v", b, gotErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoding %q:\n got %#v\nwant %#v", b, got, want)
		}
	})
}

// FuzzTokenCodecEncode builds a token from fuzzed strings, a number
// literal and times, and checks AppendJSON and appendRecord against
// json.Marshal, and the round trip against encoding/json.
func FuzzTokenCodecEncode(f *testing.F) {
	f.Add("id", "tenant", "card", "<b>&amp;</b>", "12", true, int64(1700000000), int64(123456789), int32(3600), uint16(0xffff))
	f.Add("", "\u2028", "\xff", "\"\\\n", "-1.5e-7", false, int64(0), int64(0), int32(0), uint16(0))
	f.Add("\x00", "caf\u00e9", "\U0001F600", "\xed\xa0\x80", "1e", false, int64(-62135596800), int64(1), int32(-45000), uint16(0x5555))
	f.Add("a", "b", "c", "d", "", true, int64(253402300799), int64(999999999), int32(86399), uint16(0xaaaa))
	f.Fuzz(func(t *testing.T, s1, s2, s3, s4, num string, b bool, sec, nsec int64, offset int32, shape uint16) {
		on := func(bit int) bool { return shape&(1<<bit) != 0 }
		at := &Timestamp{time.Unix(sec, nsec).In(time.FixedZone(s4, int(offset%(48*3600))))}
		rec := tokenRecord{Token: Token{ID: s1, TenantID: s2, Type: s3}}
		if on(0) {
			rec.Data = map[string]any{s1: s2, "n": json.Number(num), "l": []any{s3, b, nil, json.Number(num), map[string]any{s4: []any{}}}}
		}
		if on(1) {
			rec.Mask = s4
		} else if on(2) {
			rec.Mask = json.Number(num)
		}
		if on(3) {
			rec.Fingerprint, rec.FingerprintExpression = s1, s2
		}
		if on(4) {
			rec.Containers = []string{s3, s4}
		} else if on(5) {
			rec.Containers = []string{}
		}
		if on(6) {
			rec.Metadata = map[string]string{s1: s2, s3: s4}
		}
		if on(7) {
			rec.SearchIndexes, rec.IndexHashes = []string{s4}, []string{s1, s2}
		}
		if on(8) {
			rec.DeduplicateToken = &b
		}
		if on(9) {
			rec.ExpiresAt, rec.CVCExpiresAt = at, at
		}
		if on(10) {
			rec.CreatedBy, rec.CreatedAt = s2, at
		}
		if on(11) {
			rec.ModifiedBy, rec.ModifiedAt = s3, at
		}
		if on(12) {
			rec.Extras = &TokenExtras{Deduplicated: b}
		}
		if on(13) {
			rec.CVC = []byte(s4)
		}
		codecCheckEncode(t, &rec)
	})
}

// codecBenchCard returns a card token as the store holds it and as GET
// /tokens/{id} returns it revealed.
func codecBenchCard(b *testing.B) (*tokenRecord, *Token) {
	w := newTokenBenchWorld(b, false)
	created := w.mustCreate("admin", TokenInput{Type: "card", Data: benchCard(7), Metadata: map[string]string{"customer": "c-123"}})
	tok, err := w.s.GetToken(w.ctx, w.req("admin"), created.ID)
	if err != nil {
		b.Fatal(err)
	}
	var rec *tokenRecord
	err = w.s.kv.View(w.ctx, func(r Reader) error {
		tk, err := w.s.tenantKeysFor(r, w.tenant.ID)
		if err != nil {
			return err
		}
		rec, err = w.s.loadToken(r, tk, w.tenant.ID, created.ID)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return rec, tok
}

// codecSink keeps benchmark results alive, as sealRecord's are.
var codecSink []byte

// BenchmarkTokenCodec compares the codec with encoding/json on a card
// token: encoding and decoding the stored record, and encoding the API
// response as writeJSON does.
func BenchmarkTokenCodec(b *testing.B) {
	rec, tok := codecBenchCard(b)
	plain, err := json.Marshal(rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("EncodeRecord/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := rec.appendRecord(make([]byte, 0, 1024))
			if err != nil {
				b.Fatal(err)
			}
			codecSink = out
		}
	})
	b.Run("EncodeRecord/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := json.Marshal(rec)
			if err != nil {
				b.Fatal(err)
			}
			codecSink = out
		}
	})
	b.Run("DecodeRecord/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r tokenRecord
			if err := r.decodeRecord(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeRecord/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codecJSONDecode(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeToken/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := tok.AppendJSON(make([]byte, 0, 1024))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Discard.Write(append(out, '\n'))
		}
	})
	b.Run("EncodeToken/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := json.NewEncoder(io.Discard).Encode(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
