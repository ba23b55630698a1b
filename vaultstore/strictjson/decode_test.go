package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

type settings struct {
	FingerprintTokens bool   `json:"fingerprint_tokens"`
	Retention         int8   `json:"retention"`
	Format            string `json:"format"`
}

type tokenRequest struct {
	Name        string            `json:"name"`
	Containers  int               `json:"containers"`
	Permissions []string          `json:"permissions"`
	Settings    settings          `json:"settings"`
	Extra       any               `json:"extra"`
	Labels      map[string]string `json:"labels"`
	Items       []item            `json:"items"`
	Ptr         *settings         `json:"ptr"`
	Expires     time.Time         `json:"expires"`
	Addr        netip.Addr        `json:"addr"`
	IntKeys     map[int]int       `json:"int_keys"`
}

type item struct {
	Kind  string  `json:"kind"`
	Value string  `json:"value"`
	Price float64 `json:"price"`
}

func decodeErr(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want *Error", err, err)
	}
	return e
}

func TestDecodeTypeErrors(t *testing.T) {
	tests := []struct {
		name, body, field, message string
	}{
		{"bool field", `{"settings":{"fingerprint_tokens":"yes"}}`, "settings.fingerprint_tokens", "expected boolean"},
		{"string in array", `{"permissions":["read","write",3]}`, "permissions[2]", "expected string"},
		{"array for string", `{"name":["x"]}`, "name", "expected string"},
		{"object for string", `{"name":{"x":1}}`, "name", "expected string"},
		{"string for int", `{"containers":"12"}`, "containers", "expected integer"},
		{"fraction for int", `{"containers":1.5}`, "containers", "expected integer"},
		{"out of range", `{"settings":{"retention":300}}`, "settings.retention", "integer out of range for int8"},
		{"object for array", `{"permissions":{}}`, "permissions", "expected array"},
		{"array for struct", `{"settings":[]}`, "settings", "expected object"},
		{"number for map", `{"labels":5}`, "labels", "expected object"},
		{"map value", `{"labels":{"env":true}}`, "labels.env", "expected string"},
		{"odd map key path", `{"labels":{"a.b":true}}`, `labels["a.b"]`, "expected string"},
		{"nested slice of structs", `{"items":[{"kind":"a"},{"kind":"b","price":"free"}]}`, "items[1].price", "expected number"},
		{"pointer field", `{"ptr":{"format":false}}`, "ptr.format", "expected string"},
		{"text unmarshaler", `{"addr":12}`, "addr", "expected string"},
		{"text unmarshaler object", `{"addr":{}}`, "addr", "expected string"},
		{"custom unmarshaler error", `{"expires":12}`, "body", "invalid value"},
		{"bad map key", `{"int_keys":{"1":1,"x":2}}`, "int_keys", "expected integer"},
		{"top level", `[]`, "body", "expected object"},
		{"top level scalar", `"x"`, "body", "expected object"},
		{"whitespace before value", "{ \"name\" :\n  7 }", "name", "expected string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r tokenRequest
			e := decodeErr(t, Decode([]byte(tc.body), &r, DefaultLimits))
			if e.Field != tc.field || e.Message != tc.message {
				t.Fatalf("got Field=%q Message=%q, want Field=%q Message=%q", e.Field, e.Message, tc.field, tc.message)
			}
		})
	}
}

func TestDecodeErrorsDoNotLeakCardNumbers(t *testing.T) {
	const pan = "4242424242424242"
	bodies := []string{
		`{"name":` + pan + `}`,
		`{"containers":"` + pan + `"}`,
		`{"settings":{"retention":` + pan + `}}`,
		`{"permissions":[` + pan + `]}`,
		`{"expires":"` + pan + `"}`, // time.Time's own error would echo it
		`{"items":[{"price":"` + pan + `"}]}`,
	}
	for _, b := range bodies {
		var r tokenRequest
		err := Decode([]byte(b), &r, DefaultLimits)
		e := decodeErr(t, err)
		if strings.Contains(err.Error(), "4242") || strings.Contains(e.Message, "4242") {
			t.Errorf("%s: error %q leaks the value", b, err)
		}
	}
	type withString struct {
		N int `json:"n,string"`
	}
	var w withString
	err := Decode([]byte(`{"n":"`+pan+`x"}`), &w, DefaultLimits)
	if err == nil || strings.Contains(err.Error(), "4242") {
		t.Errorf(",string error %v", err)
	}
}

func TestDecodeSuccess(t *testing.T) {
	body := `{"name":"n","containers":3,"permissions":["a","b"],"unknown":{"deep":[1,2]},
		"settings":{"fingerprint_tokens":true,"retention":-5,"format":"f"},
		"labels":{"env":"prod"},"items":[{"kind":"k","value":"v","price":1.25}],
		"ptr":{"format":"p"},"expires":"2030-01-02T03:04:05Z","extra":{"n":12345678901234567890}}`
	var r tokenRequest
	if err := Decode([]byte(body), &r, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	want := tokenRequest{
		Name: "n", Containers: 3, Permissions: []string{"a", "b"},
		Settings: settings{FingerprintTokens: true, Retention: -5, Format: "f"},
		Labels:   map[string]string{"env": "prod"},
		Items:    []item{{Kind: "k", Value: "v", Price: 1.25}},
		Ptr:      &settings{Format: "p"},
		Expires:  time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		Extra:    map[string]any{"n": json.Number("12345678901234567890")},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
}

func TestDecodeValidates(t *testing.T) {
	var r tokenRequest
	for _, b := range []string{`{"name":"a","name":"b"}`, `{"name":"\ud800"}`, `{} x`, strings.Repeat("[", 40)} {
		decodeErr(t, Decode([]byte(b), &r, DefaultLimits))
		_, err := DecodeValue([]byte(b), DefaultLimits)
		decodeErr(t, err)
	}
	e := decodeErr(t, Decode([]byte(`{"settings":{"format":"a","format":"b"}}`), &r, DefaultLimits))
	if e.Field != "settings.format" {
		t.Fatalf("got %+v", e)
	}
}

func TestDecodeInvalidTarget(t *testing.T) {
	var r tokenRequest
	for _, v := range []any{nil, r, (*tokenRequest)(nil)} {
		e := decodeErr(t, Decode([]byte(`{}`), v, DefaultLimits))
		if e.Message != "invalid decode target" {
			t.Fatalf("%T: got %+v", v, e)
		}
	}
}

func TestExactNumbersRoundTrip(t *testing.T) {
	const body = `{"big":12345678901234567890,"frac":0.1000000000000000055511151231257827,"arr":[-0,1e400,-12.50E-3]}`
	v, err := DecodeValue([]byte(body), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"arr":[-0,1e400,-12.50E-3],"big":12345678901234567890,"frac":0.1000000000000000055511151231257827}`
	if string(out) != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}

	var r struct {
		Extra any `json:"extra"`
	}
	if err := Decode([]byte(`{"extra":12345678901234567890}`), &r, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	out, _ = json.Marshal(r.Extra)
	if string(out) != "12345678901234567890" {
		t.Fatalf("got %s", out)
	}
}

func TestDecodeValueTypes(t *testing.T) {
	v, err := DecodeValue([]byte(` {"a":[true,null,"s",1]} `), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{true, nil, "s", json.Number("1")}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v", v)
	}
}

type Embedded struct {
	Inner  string `json:"inner"`
	Shadow string
}

type caseTarget struct {
	Embedded
	Containers int                   `json:"containers"`
	Kind       string                `json:"kind"`
	Shadow     string                // dominates Embedded.Shadow
	Nested     *caseTarget           `json:"nested"`
	List       []caseTarget          `json:"list"`
	ByName     map[string]caseTarget `json:"by_name"`
	Counts     map[string]int        `json:"counts"`
	Raw        json.RawMessage       `json:"raw"`
	Any        any                   `json:"any"`
}

// TestDecodeCaseSensitive documents the decision: struct fields are matched by
// exact name, and members that encoding/json would match only
// case-insensitively are ignored as unknown members.
func TestDecodeCaseSensitive(t *testing.T) {
	tests := []struct {
		name string
		body string
		want caseTarget
	}{
		{"exact then variant", `{"containers":1,"Containers":2}`, caseTarget{Containers: 1}},
		{"variant then exact", `{"Containers":2,"containers":1}`, caseTarget{Containers: 1}},
		{"variant alone ignored", `{"CONTAINERS":2}`, caseTarget{}},
		{"kelvin sign ignored", `{"\u212aind":"x"}`, caseTarget{}},
		{"kelvin sign raw ignored", "{\"\u212aind\":\"x\"}", caseTarget{}},
		{"escaped exact name matches", `{"\u006bind":"x"}`, caseTarget{Kind: "x"}},
		{"embedded field", `{"inner":"a","Inner":"b","INNER":"c"}`, caseTarget{Embedded: Embedded{Inner: "a"}}},
		{"untagged field", `{"shadow":"x","Shadow":"y"}`, caseTarget{Shadow: "y"}},
		{"nested pointer", `{"nested":{"Kind":"a","kind":"b"}}`, caseTarget{Nested: &caseTarget{Kind: "b"}}},
		{"variant of nested ignored whole", `{"Nested":{"kind":"b"}}`, caseTarget{}},
		{"slice of structs", `{"list":[{"KIND":"a"},{"kind":"b"}]}`, caseTarget{List: []caseTarget{{}, {Kind: "b"}}}},
		{"map of structs", `{"by_name":{"Kind":{"Kind":"a","kind":"b"}}}`, caseTarget{ByName: map[string]caseTarget{"Kind": {Kind: "b"}}}},
		{"map keys are exact", `{"counts":{"containers":1,"Containers":2}}`, caseTarget{Counts: map[string]int{"containers": 1, "Containers": 2}}},
		{"raw message kept verbatim", `{"raw":{"Kind":1,"kind":2}}`, caseTarget{Raw: json.RawMessage(`{"Kind":1,"kind":2}`)}},
		{"any kept verbatim", `{"any":{"Kind":1,"kind":2}}`, caseTarget{Any: map[string]any{"Kind": json.Number("1"), "kind": json.Number("2")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got caseTarget
			if err := Decode([]byte(tc.body), &got, DefaultLimits); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}

	// Type errors after blanked names still point at the right member.
	var got caseTarget
	e := decodeErr(t, Decode([]byte(`{"Kind":1,"list":[{"KIND":true,"kind":2}]}`), &got, DefaultLimits))
	if e.Field != "list[0].kind" || e.Message != "expected string" {
		t.Fatalf("got %+v", e)
	}
}

func TestDecodeThroughInterface(t *testing.T) {
	var c caseTarget
	var v any = &c
	if err := Decode([]byte(`{"Kind":"a","kind":"b"}`), &v, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if c.Kind != "b" {
		t.Fatalf("got %+v", c)
	}
}

// TestJSONFieldsMatchEncodingJSON cross-checks the port of encoding/json's
// field resolution: the member names it reports must be exactly those
// encoding/json marshals for a fully populated value.
func TestJSONFieldsMatchEncodingJSON(t *testing.T) {
	type A struct{ X, Y int }
	type B struct {
		X int
		Z int `json:"z"`
	}
	type C struct{ Y int }
	type D struct {
		A
		B
		*C
		W int `json:"-"`
		//lint:ignore SA5008 the tags encoding/json reads oddly are what the test is about
		V int `json:"-,"`
		//lint:ignore SA5008 as above
		U int `json:"bad\"name"`
		T int `json:",omitempty"`
		//lint:ignore U1000 an unexported field, which decoding must leave alone
		low int
	}
	type E struct {
		D
		X int `json:"X"`
		Y int
	}
	for _, v := range []any{D{C: &C{}, T: 1}, E{D: D{C: &C{}, T: 1}}, caseTarget{}, tokenRequest{}} {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range jsonFields(reflect.TypeOf(v)) {
			got = append(got, f.name)
		}
		for name := range m {
			found := false
			for _, g := range got {
				found = found || g == name
			}
			if !found {
				t.Errorf("%T: encoding/json has %q, jsonFields has %q", v, name, got)
			}
		}
		if len(got) != len(m) {
			t.Errorf("%T: jsonFields %q, encoding/json %s", v, got, out)
		}
	}
}

func TestPathAtOffsets(t *testing.T) {
	// Every scalar and container reports its own path when asked about an
	// offset inside (start, end].
	body := []byte(`{"a":[10,{"b":"xy"},[]],"c":{}}`)
	checks := map[int]string{
		7:  "a[0]",   // end of 10
		10: "a[1]",   // just after {
		17: "a[1].b", // end of "xy"
		21: "a[2]",   // just after [
		29: "c",      // just after {
		1:  "",       // inside the top-level object only
	}
	for off, want := range checks {
		got, ok := pathAt(body, off)
		if !ok || got != want {
			t.Errorf("pathAt(%d) = %q, %v; want %q", off, got, ok, want)
		}
	}
	if !bytes.Equal(body, []byte(`{"a":[10,{"b":"xy"},[]],"c":{}}`)) {
		t.Fatal("body modified")
	}
}

func TestPlanCacheConcurrent(t *testing.T) {
	type T1 struct {
		Self []*T1 `json:"self"`
		M    map[string]T1
	}
	done := make(chan error)
	for i := 0; i < 4; i++ {
		go func() {
			var v T1
			done <- Decode([]byte(`{"self":[{"Self":[],"self":[]}],"m":{"x":{}}}`), &v, DefaultLimits)
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if p := planFor(reflect.TypeFor[[][]int]()); p != nil {
		t.Fatalf("plan for [][]int should be pruned, got %+v", p)
	}
	type L []L
	if p := planFor(reflect.TypeFor[L]()); p != nil {
		t.Fatalf("plan for recursive slice should be pruned")
	}
	_ = fmt.Sprint()
}
