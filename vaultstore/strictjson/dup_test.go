package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// object returns an object whose members are named by names, in order, with
// the given values (1 when values is nil).
func object(names []string, values []string) string {
	var b strings.Builder
	b.WriteString("{")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		v := "1"
		if values != nil {
			v = values[i]
		}
		b.WriteString(`"` + n + `":` + v)
	}
	b.WriteString("}")
	return b.String()
}

// keyNames returns n distinct names prefix0, prefix1, ...
func keyNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return names
}

// withDup returns names followed by a repetition of names[i].
func withDup(names []string, i int) []string {
	return append(names[:len(names):len(names)], names[i])
}

// dupCases are bodies whose first duplicate member name is dup ("" when the
// body has none), located at field.
func dupCases() []struct{ name, body, field, dup string } {
	type tc = struct{ name, body, field, dup string }
	var cases []tc
	add := func(name, body, field, dup string) { cases = append(cases, tc{name, body, field, dup}) }

	// Around the switch from the linear search to the table, which happens
	// for the key of index linearMax, and around the table's growths (at
	// 33, 65, 129... keys for a first table of 4*linearMax slots).
	for _, n := range []int{1, 2, linearMax - 1, linearMax, linearMax + 1, 2 * linearMax, 2*linearMax + 1,
		4 * linearMax, 4*linearMax + 1, 8*linearMax + 1, 16*linearMax + 1, 3000} {
		names := keyNames("key", n)
		add(fmt.Sprintf("%d distinct", n), object(names, nil), "", "")
		for _, i := range []int{0, n / 2, n - 1} {
			add(fmt.Sprintf("%d then dup of %d", n, i), object(withDup(names, i), nil), names[i], names[i])
		}
	}
	// The duplicate is the first key in the table, or the first key after a
	// growth, of a key inserted before it.
	for _, n := range []int{linearMax, 2 * linearMax, 4 * linearMax, 8 * linearMax} {
		names := keyNames("k", n)
		add(fmt.Sprintf("key %d dup of first", n), object(withDup(names, 0), nil), "k0", "k0")
		add(fmt.Sprintf("key %d dup of previous", n), object(withDup(names, n-1), nil), names[n-1], names[n-1])
	}

	// Names equal in length and last bytes, or differing only in their last
	// byte, and names shorter than four bytes.
	for _, n := range []int{10, 100} {
		var same, last []string
		for i := range n {
			same = append(same, fmt.Sprintf("%03d-tail", i))
			last = append(last, "name_"+string(rune('0'+i/26))+string(rune('a'+i%26)))
		}
		add(fmt.Sprintf("%d same tails", n), object(same, nil), "", "")
		add(fmt.Sprintf("%d same tails dup", n), object(withDup(same, n/3), nil), same[n/3], same[n/3])
		add(fmt.Sprintf("%d differ in last byte", n), object(last, nil), "", "")
		add(fmt.Sprintf("%d differ in last byte dup", n), object(withDup(last, n-2), nil), last[n-2], last[n-2])
	}
	short := []string{"", "a", "b", "ab", "ba", "abc", "cba", "\\u0000", "\\u0000a", "a\\u0000", "\\u0000\\u0000a", "abcd", "bcd"}
	add("short names", object(short, nil), "", "")
	add("short names dup empty", object(withDup(short, 0), nil), `[""]`, "")
	add("short names dup nul", object(withDup(short, 9), nil), `["a\x00"]`, "a\x00")
	add("short names dup nul first", object(withDup(short, 8), nil), `["\x00a"]`, "\x00a")
	long := append(keyNames("x", 20), short...)
	add("short names in table", object(long, nil), "", "")
	add("short names in table dup", object(withDup(long, 25), nil), "abc", "abc")

	// Duplicates are found on unescaped names, in both search modes.
	for _, n := range []int{5, 100} {
		names := keyNames("key", n)
		esc := append([]string(nil), names...)
		esc[1] = `\u006b\u0065\u0079` + names[1][3:]
		esc[n-1] = `k\u0065y` + names[n-1][3:]
		add(fmt.Sprintf("%d with escapes", n), object(esc, nil), "", "")
		add(fmt.Sprintf("%d escaped dup of plain", n), object(append(names, `\u006bey1`), nil), "key1", "key1")
		add(fmt.Sprintf("%d plain dup of escaped", n), object(append(esc, names[n-1]), nil), names[n-1], names[n-1])
		add(fmt.Sprintf("%d escaped dup of escaped", n), object(withDup(esc, n-1), nil), names[n-1], names[n-1])
		add(fmt.Sprintf("%d differently escaped dup", n), object(append(esc, `ke\u0079`+names[1][3:]), nil), "key1", "key1")
		add(fmt.Sprintf("%d escape is not its text", n), object(append(names, `\\u006bey1`), nil), "", "")
	}

	// Nested objects have their own sets, whatever their sizes and their
	// parent's.
	for _, n := range []int{5, 40, 200} {
		names := keyNames("m", n)
		inner := object(names, nil)
		vals := make([]string, n)
		for i := range vals {
			vals[i] = inner
		}
		add(fmt.Sprintf("%d nested in %d", n, n), object(names, vals), "", "")
		vals[n-1] = object(withDup(names, n/2), nil)
		add(fmt.Sprintf("%d nested in %d dup in last child", n, n), object(names, vals), names[n-1]+"."+names[n/2], names[n/2])
		vals[n-1] = inner
		add(fmt.Sprintf("%d nested in %d dup after children", n, n), object(withDup(names, n-1), append(vals, "1")), names[n-1], names[n-1])
		// A child's names are not its parent's.
		parent := append(keyNames("p", n), "child")
		pvals := make([]string, n+1)
		for i := range pvals {
			pvals[i] = "1"
		}
		pvals[n] = object(names, nil)
		add(fmt.Sprintf("%d parent then child", n), object(append(parent, names...), append(pvals, vals...)), "", "")
		add(fmt.Sprintf("%d parent then child dup", n), object(append(parent, "p0"), append(pvals, "1")), "p0", "p0")
		arr := "[" + strings.Repeat(inner+",", 30) + inner + "]"
		add(fmt.Sprintf("%d siblings in array", n), arr, "", "")
	}
	return cases
}

func TestValidateDuplicateNames(t *testing.T) {
	run := func(t *testing.T) {
		for _, tc := range dupCases() {
			t.Run(tc.name, func(t *testing.T) {
				err := Validate([]byte(tc.body), DefaultLimits)
				if tc.field == "" {
					if err != nil {
						t.Fatalf("unexpected error %v", err)
					}
					return
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, want duplicate of %q", err, tc.dup)
				}
				if want := "duplicate member name " + quoteName([]byte(tc.dup)); e.Field != tc.field || e.Message != want {
					t.Fatalf("got Field=%q Message=%q, want Field=%q Message=%q", e.Field, e.Message, tc.field, want)
				}
			})
		}
	}
	run(t)
}

// refFirstDup returns the first duplicate member name of the valid JSON body,
// found with encoding/json and a map per object.
func refFirstDup(t *testing.T, body []byte) (string, bool) {
	type open struct {
		obj, key bool
		seen     map[string]bool
	}
	var stack []*open
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return "", false
		}
		if err != nil {
			t.Fatalf("reference decoder: %v", err)
		}
		var top *open
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.obj && top.key {
			if top.seen[s] {
				return s, true
			}
			top.seen[s] = true
			top.key = false
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj {
			top.key = true // a value: a name comes next
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &open{obj: d == '{', key: true, seen: map[string]bool{}})
		}
	}
}

// TestValidateDuplicatesRandom compares duplicate detection with
// refFirstDup on random objects of many similar names, some escaped.
func TestValidateDuplicatesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	name := func(pool int) {
		// Names of a letter, a number and a suffix: many share their length
		// and last bytes.
		s := fmt.Sprintf("%c%d%s", 'a'+rng.IntN(2), rng.IntN(pool), []string{"", "", "_id", "-tail"}[rng.IntN(4)])
		b.WriteByte('"')
		for _, c := range []byte(s) {
			if rng.IntN(8) == 0 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	var value func(depth int)
	value = func(depth int) {
		switch r := rng.IntN(10); {
		case depth == 0 || depth < 3 && r < 1:
			n := rng.IntN(2*linearMax + 4)
			if depth == 0 && rng.IntN(2) == 0 {
				n = rng.IntN(600)
			}
			// Make a duplicate likely in about one object in ten.
			pool := 1 << 30
			if rng.IntN(10) == 0 {
				pool = n*n/2 + 1
			}
			b.WriteByte('{')
			for i := range n {
				if i > 0 {
					b.WriteByte(',')
				}
				name(pool)
				b.WriteByte(':')
				value(depth + 1)
			}
			b.WriteByte('}')
		case depth < 3 && r < 2:
			b.WriteByte('[')
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteByte(',')
				}
				value(depth + 1)
			}
			b.WriteByte(']')
		default:
			b.WriteString("0")
		}
	}
	bodies := 1000
	if testing.Short() || raceEnabled {
		bodies = 200
	}
	run := func(t *testing.T) {
		dups := 0
		for i := 0; i < bodies; i++ {
			b.Reset()
			value(0)
			body := []byte(b.String())
			dup, found := refFirstDup(t, body)
			err := Validate(body, Limits{MaxValues: 1 << 20})
			if !found {
				if err != nil {
					t.Fatalf("body %d: unexpected error %v\n%s", i, err, body)
				}
				continue
			}
			dups++
			var e *Error
			if !errors.As(err, &e) || e.Message != "duplicate member name "+quoteName([]byte(dup)) {
				t.Fatalf("body %d: got %v, want duplicate of %q\n%s", i, err, dup, body)
			}
		}
		if dups < bodies/10 || dups > bodies*9/10 {
			t.Fatalf("%d bodies of %d with duplicates", dups, bodies)
		}
	}
	run(t)
}
