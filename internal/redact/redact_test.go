package redact

import (
	"slices"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"no digits", "must not be empty", "must not be empty"},
		{"six digits stay", "more than 100000 values", "more than 100000 values"},
		{"seven digits go", "more than 1000000 values", "more than … values"},
		{"six digits split by a space stay", "123 456", "123 456"},
		{"seven digits split by a dash go", "123-4567", "…"},
		{"card number as a member name", `duplicate member name "4242424242424242"`, `duplicate member name "…"`},
		{"card number with spaces and dashes, in a path", "4242 4242-4242 4242.data.number", "….data.number"},
		{"social security number", "ssn 123-45-6789 is taken", "ssn … is taken"},
		{"separators after the run stay", "1234567- next", "…- next"},
		{"separators before the run stay", "id: -1234567", "id: -…"},
		{"two runs", "4111111111111111 and 5555555555554444", "… and …"},
		{"short numbers stay", "id 12-34", "id 12-34"},
		{"a letter ends the run", "123456a1234567", "123456a…"},
		{"the limits the vault quotes stay", "must be 3 to 400 characters long", "must be 3 to 400 characters long"},
		{"UUID stays whole", "token 123e4567-e89b-12d3-a456-426614174000 not found", "token 123e4567-e89b-12d3-a456-426614174000 not found"},
		{"UUID of digits stays whole", "12345678-1234-1234-1234-123456789012", "12345678-1234-1234-1234-123456789012"},
		{"upper-case UUID stays whole", "ABCDEF01-2345-6789-ABCD-EF0123456789", "ABCDEF01-2345-6789-ABCD-EF0123456789"},
		{"a run before a UUID goes, the UUID stays", "4111111111111111 12345678-1234-1234-1234-123456789012", "… 12345678-1234-1234-1234-123456789012"},
		{"a UUID one character short is no UUID", "12345678-1234-1234-1234-12345678901", "…"},
		{"a UUID inside a longer word is no UUID", "x12345678-1234-1234-1234-123456789012", "x…"},
		{"a UUID followed by digits is no UUID", "12345678-1234-1234-1234-1234567890123", "…"},
		{"multi-byte text around a run", "número 4111111111111111 é", "número … é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := Holds(tt.in); got != (tt.in != tt.want) {
				t.Errorf("Holds(%q) = %v", tt.in, got)
			}
		})
	}
}

func TestID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"cust_123456", "cust_123456"},
		{"cust_1234567", Withheld},
		{"4242424242424242", Withheld},
		{"4242-4242-4242-4242", Withheld}, // a run across dashes, which a 13-digit count of adjacent digits missed
		{"123-45-6789", Withheld},
		{"123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{"12345678-1234-1234-1234-123456789012", "12345678-1234-1234-1234-123456789012"},
	}
	for _, tt := range tests {
		if got := ID(tt.in); got != tt.want {
			t.Errorf("ID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	in := []string{"a", "4111111111111111"}
	if got := IDs(in); !slices.Equal(got, []string{"a", Withheld}) || in[1] != "4111111111111111" {
		t.Errorf("IDs = %q (input now %q)", got, in)
	}
}

// FuzzText: what Text returns holds no run, and is s itself when Holds
// says there is none.
func FuzzText(f *testing.F) {
	for _, s := range []string{"4242 4242-4242 4242", "12345678-1234-1234-1234-123456789012", "a1234567", "123 456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		if Holds(out) {
			t.Fatalf("Text(%q) = %q still holds a run", s, out)
		}
		if !Holds(s) && out != s {
			t.Fatalf("Text(%q) = %q changed text without a run", s, out)
		}
		if Holds(s) && !strings.Contains(out, Mark) {
			t.Fatalf("Text(%q) = %q has no mark", s, out)
		}
	})
}
