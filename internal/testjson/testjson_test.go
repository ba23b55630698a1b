package testjson

import (
	"encoding/json"
	"io"
	"testing"
)

func TestField(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(`{"a":{"b":[{"c":"x"},null]},"n":1,"z":null}`), &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path []any
		want string
	}{
		{"object and array", []any{"a", "b", 0, "c"}, "x"},
		{"missing member", []any{"a", "nope"}, ""},
		{"index past the end", []any{"a", "b", 2}, ""},
		{"negative index", []any{"a", "b", -1}, ""},
		{"index into an object", []any{"a", 0}, ""},
		{"name into an array", []any{"a", "b", "c"}, ""},
		{"not a string", []any{"n"}, ""},
		{"step of another type", []any{"a", 1.5}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Str(v, tc.path...); got != tc.want {
				t.Fatalf("Str(%v) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
	if Field(v, "a", "b", 1) != nil || Field(v) == nil {
		t.Fatal("Field: a null element is nil, an empty path the value itself")
	}
	if !Has(v, "z") || Has(v, "y") || Has(Field(v, "a", "b"), "c") {
		t.Fatal("Has: a null member is there, a missing one is not, an array has none")
	}
}

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"string as it is", `{"a":`, `{"a":`},
		{"bytes as they are", []byte("not json"), "not json"},
		{"a map as JSON", map[string]any{"type": "card", "n": 1}, `{"n":1,"type":"card"}`},
		{"a struct as JSON", struct {
			ID string `json:"id"`
		}{"x"}, `{"id":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Body(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			if string(got) != tc.want {
				t.Fatalf("Body(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if r, err := Body(nil); r != nil || err != nil {
		t.Fatalf("Body(nil) = %v, %v; want no body", r, err)
	}
	if _, err := Body(map[string]any{"f": func() {}}); err == nil {
		t.Fatal("Body of a value JSON cannot hold: no error")
	}
}

func TestDecode(t *testing.T) {
	v := Decode(t, `{"n": 12345678901234567890, "a": [1.50, "x"]}`)
	if n, ok := Field(v, "n").(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Fatalf("n = %#v, want the json.Number as written", Field(v, "n"))
	}
	if n, ok := Field(v, "a", 0).(json.Number); !ok || n.String() != "1.50" || Str(v, "a", 1) != "x" {
		t.Fatalf("a = %#v", Field(v, "a"))
	}
}
