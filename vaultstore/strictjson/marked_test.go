package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestValidateMarked: the strings in value position that hold a mark are
// reported with their spans and paths, member names never, and an invalid
// body reports nothing but its error, as Validate's.
func TestValidateMarked(t *testing.T) {
	member := func(name string) PathStep { return PathStep{Name: name, Index: -1} }
	index := func(i int) PathStep { return PathStep{Index: i} }
	// at returns the offsets of every "@" in body: the marks of a case.
	at := func(body string) []int {
		var marks []int
		for i := range len(body) {
			if body[i] == '@' {
				marks = append(marks, i)
			}
		}
		return marks
	}
	for _, tc := range []struct {
		name  string
		body  string
		marks []int    // nil: the offsets of every "@" of body
		want  []Marked // Start and End as offsets of the quotes; Path
	}{
		{"no marks", `{"a":"b"}`, nil, nil},
		{"top-level string", `"x@y"`, nil, []Marked{{0, 5, []PathStep{}}}},
		{"member value", `{"a":"@","b":"c"}`, nil, []Marked{{5, 8, []PathStep{member("a")}}}},
		{"member name only", `{"@":"b"}`, nil, nil},
		{"name and value", `{"@":"@"}`, nil, []Marked{{5, 8, []PathStep{member("@")}}}},
		{"array elements", `["a","@",1,"@@"]`, nil, []Marked{{5, 8, []PathStep{index(1)}}, {11, 15, []PathStep{index(3)}}}},
		{"nested", `{"x":[{"y":"q"},{"z":"@"}]}`, nil, []Marked{{21, 24, []PathStep{member("x"), index(1), member("z")}}}},
		{"escaped name", `{"\u0061b":{"c":" @ "}}`, nil, []Marked{{16, 21, []PathStep{member("ab"), member("c")}}}},
		{"mark outside strings", `{"a": 1}`, []int{5}, nil},
		{"empty containers around", `[[],{},"@",{}]`, nil, []Marked{{7, 10, []PathStep{index(2)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, marks := tc.body, tc.marks
			if marks == nil {
				marks = at(body)
			}
			got, err := ValidateMarked([]byte(body), DefaultLimits, marks)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for _, m := range got {
				if body[m.Start] != '"' || body[m.End-1] != '"' {
					t.Errorf("span %d-%d is not a string literal: %q", m.Start, m.End, body[m.Start:m.End])
				}
			}
		})
	}

	for _, body := range []string{`{"a":"@","a":"@"}`, `["@"`, `["@", 1,]`, `{"a":"@"} x`, "[\"@\xff\"]", strings.Repeat("[", 40) + `"@"` + strings.Repeat("]", 40)} {
		got, err := ValidateMarked([]byte(body), DefaultLimits, at(body))
		want := Validate([]byte(body), DefaultLimits)
		var se *Error
		if want == nil || !errors.As(err, &se) || err.Error() != want.Error() || got != nil {
			t.Errorf("ValidateMarked(%q) = %v, %v; want nothing and Validate's error %v", body, got, err, want)
		}
	}
}
