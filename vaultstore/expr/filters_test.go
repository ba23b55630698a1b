package expr

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// storeJSON is Goessner's JSONPath example document, plus the "books" and
// "bicycles" shapes used by the vault docs.
const storeJSON = `{
  "book": [
    {"category": "reference", "author": "Nigel Rees", "title": "Sayings of the Century", "price": 8.95},
    {"category": "fiction", "author": "Evelyn Waugh", "title": "Sword of Honour", "price": 12.99},
    {"category": "fiction", "author": "Herman Melville", "title": "Moby Dick", "isbn": "0-553-21311-3", "price": 8.99},
    {"category": "fiction", "author": "J. R. R. Tolkien", "title": "The Lord of the Rings", "isbn": "0-395-19395-8", "price": 22.99}
  ],
  "books": [
    {"title": "Cheap", "price": 8.99},
    {"title": "Dear", "price": 22.99}
  ],
  "bicycle": {"color": "red", "price": 19.95},
  "bicycles": [{"color": "red", "price": 19.95}, {"color": "blue", "price": 8.99}],
  "big": 12345678901234567890,
  "nothing": null
}`

// TestFilterDocExamples holds every example of interface-notes 1.9 / 1.10
// with a deterministic result (the alias filters are random: see
// TestAliasFilters).
func TestFilterDocExamples(t *testing.T) {
	store := testjson.Decode(t, storeJSON)
	tests := []struct {
		name string
		src  string
		data any
		want any
	}{
		// reveal_last
		{"reveal_last 6", `{{ "36227206271667" | reveal_last: 6 }}`, nil, "XXXXXXXX271667"},
		{"reveal_last 3 #", `{{ "36227206271667" | reveal_last: 3, '#' }}`, nil, "###########667"},
		{"reveal_last card separators", `{{ "4242-4242-4242-4242" | reveal_last: 4 }}`, nil, "XXXX-XXXX-XXXX-4242"},
		{"reveal_last ssn", `{{ data | reveal_last: 4 }}`, "123-45-6789", "XXX-XX-6789"},
		{"reveal_last ein", `{{ data | reveal_last: 4 }}`, "12-3456789", "XX-XXX6789"},
		{"reveal_last short unmasked", `{{ "1234" | reveal_last: 4 }}`, nil, "1234"},
		{"reveal_last shorter unmasked", `{{ "12" | reveal_last: 4 }}`, nil, "12"},
		// reveal
		{"reveal 6", `{{ data | reveal: 6 }}`, "3622-7206-2716-5567", "3622-7XXXXXXXXXXXXX"},
		{"reveal 7 5", `{{ data | reveal: 7, 5 }}`, "3622-7206-2716-5567", "3622-72XXXXXXX-5567"},
		{"reveal 7 5 #", `{{ data | reveal: 7, 5, '#' }}`, "3622-7206-2716-5567", "3622-72#######-5567"},
		{"reveal 7 4 # preserve -", `{{ data | reveal: 7, 4, '#', "-" }}`, "3622-7206-2716-5567", "3622-72##-####-5567"},
		{"reveal 10 9 all masked", `{{ data | reveal: 10, 9 }}`, "3622-7206-2716-5567", strings.Repeat("X", 19)},
		// last4
		{"last4", `{{ "3622720627165567" | last4 }}`, nil, "5567"},
		{"slice then last4", `{{ "36227206271667" | slice: 12, 2 | last4 }}`, nil, "67"},
		// pad_left / pad_right
		{"pad_left 6", `{{ "1234" | pad_left: 6, '0' }}`, nil, "001234"},
		{"pad_left never truncates", `{{ "1234" | pad_left: 2, '0' }}`, nil, "1234"},
		{"pad_left null", `{{ data | pad_left: 6, '0' }}`, nil, nil},
		{"pad_right 6", `{{ "1234" | pad_right: 6, '0' }}`, nil, "123400"},
		{"pad_right null", `{{ data | pad_right: 6, '0' }}`, nil, nil},
		// json
		{"json bicycle price", `{{ data | json: '$.bicycle.price' }}`, store, json.Number("19.95")},
		{"json bicycle price rendered", `price={{ data | json: '$.bicycle.price' }}`, store, "price=19.95"},
		{"json filter expression", `{{ data | json: '$.books[?(@.price < 10)].title' }}`, store, "Cheap"},
		// stringify / json_stringify
		{"stringify object", `{{ data.bicycles[0] | stringify }}`, store, `{"color":"red","price":19.95}`},
		{"stringify number", `{{ data.bicycles[1].price | stringify }}`, store, "8.99"},
		{"stringify null", `{{ data.nothing | stringify }}`, store, nil},
		{"json_stringify object", `{{ data.bicycles[0] | json_stringify }}`, store, `{"color":"red","price":19.95}`},
		// casts
		{"to_number", `{{ "42" | to_number }}`, nil, json.Number("42")},
		{"to_number null", `{{ data | to_number }}`, nil, nil},
		{"to_boolean null", `{{ data | to_boolean }}`, nil, nil},
		{"to_string null", `{{ data | to_string }}`, nil, nil},
		// standard Liquid filters from the aliasing docs
		{"email local part", `{{ data.email | split: '@' | first }}`, testjson.Decode(t, `{"email":"jane@example.com"}`), "jane"},
		{"email domain", `{{ data.email | split: '@' | last }}`, testjson.Decode(t, `{"email":"jane@example.com"}`), "example.com"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustEval(t, tc.src, map[string]any{"data": tc.data})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s\n got %#v (%T)\nwant %#v (%T)", tc.src, got, got, tc.want, tc.want)
			}
		})
	}
}

// TestFilterDocErrors holds the documented failures.
func TestFilterDocErrors(t *testing.T) {
	store := testjson.Decode(t, storeJSON)
	tests := []struct {
		name, src string
		data      any
		wantMsg   string
	}{
		{"json several authors", `{{ data | json: '$.book..author' }}`, store, "json filter: path matched 4 values"},
		{"json no match", `{{ data | json: '$.nope' }}`, store, "json filter: path matched no value"},
		{"to_number uncastable", `{{ "4x2" | to_number }}`, nil, "to_number: value cannot be converted to a number"},
		{"to_boolean uncastable", `{{ "yes" | to_boolean }}`, nil, "to_boolean: value cannot be converted to a boolean"},
		{"to_number object", `{{ data | to_number }}`, store, "to_number: value cannot be converted to a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evalSrc(tc.src, map[string]any{"data": tc.data})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: want *Error, got %v", tc.src, err)
			}
			if e.Error() != tc.wantMsg {
				t.Fatalf("%s: got %q, want %q", tc.src, e.Error(), tc.wantMsg)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	data := testjson.Decode(t, `{"card": "4242424242424242", "n": 1234, "big": 12345678901234567890, "f": 8.5,
		"s": "ABC12345DEF67890", "o": {"a": 1}, "arr": [1, "x"], "t": true, "u": "Ünïcödé-42"}`)
	b := map[string]any{"data": data}
	tests := []struct {
		name, src string
		want      any
	}{
		{"reveal_last number input", `{{ data.n | reveal_last: 2 }}`, "XX34"},
		{"reveal_last zero", `{{ data.card | reveal_last: 0 }}`, strings.Repeat("X", 16)},
		{"reveal_last string length arg", `{{ data.card | reveal_last: '4' }}`, "XXXXXXXXXXXX4242"},
		{"reveal_last unicode", `{{ data.u | reveal_last: 2 }}`, "XXXXXXX-42"},
		{"reveal_last big number exact", `{{ data.big | reveal_last: 4 }}`, "XXXXXXXXXXXXXXXX7890"},
		{"reveal no args masks all", `{{ data.card | reveal }}`, strings.Repeat("X", 16)},
		{"reveal last only", `{{ data.card | reveal: 0, 4 }}`, "XXXXXXXXXXXX4242"},
		{"reveal unchanged result masks all", `{{ "--" | reveal: 0, 0, 'X', '-' }}`, "XX"},
		{"reveal empty", `{{ "" | reveal }}`, ""},
		{"reveal null", `{{ data.missing | reveal: 1 }}`, nil},
		{"last4 short", `{{ "123" | last4 }}`, "123"},
		{"last4 number", `{{ data.n | last4 }}`, "1234"},
		{"last4 null", `{{ data.missing | last4 }}`, nil},
		{"pad_left number", `{{ data.n | pad_left: 8, '0' }}`, "00001234"},
		{"pad_right unicode pad", `{{ "ab" | pad_right: 4, 'é' }}`, "abéé"},
		{"json root", `{{ data.o | json: '$' }}`, map[string]any{"a": json.Number("1")}},
		{"json bracket name", `{{ data | json: "$['o']['a']" }}`, json.Number("1")},
		{"json index", `{{ data | json: '$.arr[1]' }}`, "x"},
		{"json negative index", `{{ data | json: '$.arr[-2]' }}`, json.Number("1")},
		{"json big number exact", `{{ data | json: '$.big' }}`, json.Number("12345678901234567890")},
		{"stringify string", `{{ "a<b" | stringify }}`, `"a<b"`},
		{"stringify big number", `{{ data | json: '$.big' | stringify }}`, "12345678901234567890"},
		{"stringify array", `{{ data.arr | stringify }}`, `[1,"x"]`},
		{"to_number integer", `{{ " 1234 " | to_number }}`, json.Number("1234")},
		{"to_number float", `{{ "8.99" | to_number }}`, json.Number("8.99")},
		{"to_number exponent", `{{ "1e3" | to_number }}`, json.Number("1e3")},
		{"to_number big exact", `{{ "12345678901234567890" | to_number }}`, json.Number("12345678901234567890")},
		{"to_number number", `{{ data.f | to_number }}`, json.Number("8.5")},
		{"to_number then compare", `{% assign x = "42" | to_number %}{% if x > 9 %}big{% else %}small{% endif %}`, "big"},
		{"to_number then plus", `{{ "40" | to_number | plus: 2 }}`, json.Number("42")},
		{"to_boolean true", `{{ "TRUE" | to_boolean }}`, true},
		{"to_boolean false", `{{ "false" | to_boolean }}`, false},
		{"to_boolean bool", `{{ data.t | to_boolean }}`, true},
		{"to_string number", `{{ data.n | to_string }}`, "1234"},
		{"to_string big", `{{ data.big | to_string }}`, "12345678901234567890"},
		{"to_string bool", `{{ data.t | to_string }}`, "true"},
		{"to_string object", `{{ data.o | to_string }}`, `{"a":1}`},
		{"to_string string", `{{ "x" | to_string }}`, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustEval(t, tc.src, b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s\n got %#v (%T)\nwant %#v (%T)", tc.src, got, got, tc.want, tc.want)
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	data := testjson.Decode(t, `{"card": "4242424242424242", "o": {"a": 1}, "arr": [1, 2]}`)
	b := map[string]any{"data": data}
	tests := []struct{ name, src, want string }{
		{"reveal_last missing length", `{{ data.card | reveal_last }}`, "reveal_last: length is required"},
		{"reveal_last negative", `{{ data.card | reveal_last: -1 }}`, "reveal_last: length must be an integer between 0 and 2147483647"},
		{"reveal_last bad mask", `{{ data.card | reveal_last: 4, 'ab' }}`, "reveal_last: mask character must be a single character"},
		{"reveal_last object", `{{ data.o | reveal_last: 4 }}`, "reveal_last: input must be a string or a number"},
		{"reveal_last too many args", `{{ data.card | reveal_last: 4, 'X', 1 }}`, "reveal_last: too many arguments (given 3, at most 2)"},
		{"reveal bad first", `{{ data.card | reveal: 'a' }}`, "reveal: reveal_first must be an integer between 0 and 2147483647"},
		{"last4 args", `{{ data.card | last4: 2 }}`, "last4: too many arguments (given 1, at most 0)"},
		{"pad_left missing pad", `{{ data.card | pad_left: 20 }}`, "pad_left: pad character is required"},
		{"pad_left missing length", `{{ data.card | pad_left }}`, "pad_left: length is required"},
		{"pad_left huge", `{{ data.card | pad_left: 100000000, '0' }}`, "pad_left: length must be an integer between 0 and 65536"},
		{"pad_right data as length", `{{ data.card | pad_right: data.card, '0' }}`, "pad_right: length must be an integer between 0 and 65536"},
		{"json missing path", `{{ data | json }}`, "json filter: a JSONPath argument is required"},
		{"json non-string path", `{{ data | json: 3 }}`, "json filter: the JSONPath argument must be a string"},
		{"json bad path", `{{ data | json: 'card' }}`, "json filter: invalid JSONPath: expected $ at offset 0"},
		{"json bad path 2", `{{ data | json: '$.arr[' }}`, "json filter: invalid JSONPath: expected a selector at offset 6"},
		{"json several", `{{ data | json: '$.arr[*]' }}`, "json filter: path matched 2 values"},
		{"json path from data", `{{ data | json: data.card }}`, "json filter: invalid JSONPath: expected $ at offset 0"},
		{"to_number bool", `{{ true | to_number }}`, "to_number: value cannot be converted to a number"},
		{"to_number not json number", `{{ "0x10" | to_number }}`, "to_number: value cannot be converted to a number"},
		{"to_boolean number", `{{ 1 | to_boolean }}`, "to_boolean: value cannot be converted to a boolean"},
		{"standard filter error", `{{ 1 | divided_by: 0.0 | stringify }}`, `expression evaluation failed in filter "divided_by"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evalSrc(tc.src, b)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: want *Error, got %v", tc.src, err)
			}
			if e.Error() != tc.want {
				t.Fatalf("%s: got %q, want %q", tc.src, e.Error(), tc.want)
			}
			if strings.Contains(e.Error(), "4242") {
				t.Fatalf("error leaks data: %q", e.Error())
			}
		})
	}
}

func TestAliasFilters(t *testing.T) {
	const in = "ABC12345DEF67890"
	email := testjson.Decode(t, `{"email": "jane.doe@example.com"}`)
	tests := []struct {
		name, src string
		data      any
		pattern   string
	}{
		// Doc: "ABC12345DEF67890" → "xir83203hqn73599".
		{"preserve_format", `{{ data | alias_preserve_format }}`, in, `^[a-z]{3}[0-9]{5}[a-z]{3}[0-9]{5}$`},
		// Doc: ": 3, 5" → "ABC83203hqn67890".
		{"preserve_format 3 5", `{{ data | alias_preserve_format: 3, 5 }}`, in, `^ABC[0-9]{5}[a-z]{3}67890$`},
		{"preserve_format specials kept", `{{ data | alias_preserve_format }}`, "4242-4242 4242/4242", `^[0-9]{4}-[0-9]{4} [0-9]{4}/[0-9]{4}$`},
		// 1.9: {{ data | alias_preserve_format: 0, 4 }}.
		{"preserve_format 0 4", `{{ data | alias_preserve_format: 0, 4 }}`, "4242424242424242", `^[0-9]{12}4242$`},
		// Doc: "ABC12345DEF67890" → "v38anr9m2cx0giw7".
		{"preserve_length", `{{ data | alias_preserve_length }}`, in, `^[a-z0-9]{16}$`},
		{"preserve_length specials replaced", `{{ data | alias_preserve_length }}`, "a-b c", `^[a-z0-9]{5}$`},
		{"preserve_length 2 2", `{{ data | alias_preserve_length: 2, 2 }}`, in, `^AB[a-z0-9]{12}90$`},
		{"preserve_length reveal all", `{{ data | alias_preserve_length: 10, 10 }}`, in, `^ABC12345DEF67890$`},
		// 1.9 email alias.
		{"email alias", `{{ data.email | split: '@' | first | alias_preserve_length }}@{{ data.email | split: '@' | last }}`,
			email, `^[a-z0-9]{8}@example\.com$`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			re := regexp.MustCompile(tc.pattern)
			seen := map[string]bool{}
			for range 20 {
				got := mustEval(t, tc.src, map[string]any{"data": tc.data})
				s, ok := got.(string)
				if !ok || !re.MatchString(s) {
					t.Fatalf("%s: got %#v, want match for %s", tc.src, got, tc.pattern)
				}
				seen[s] = true
			}
			if !strings.Contains(tc.name, "reveal all") && len(seen) < 2 {
				t.Fatalf("%s: alias is not random: %v", tc.src, seen)
			}
		})
	}
	t.Run("null", func(t *testing.T) {
		for _, f := range []string{"alias_preserve_format", "alias_preserve_length"} {
			if got := mustEval(t, "{{ data | "+f+" }}", map[string]any{"data": nil}); got != nil {
				t.Fatalf("%s of null: got %#v", f, got)
			}
		}
	})
}

func TestRandIndexUniform(t *testing.T) {
	const n, rounds = 36, 36000
	var counts [n]int
	for range rounds {
		counts[randIndex(n)]++
	}
	for i, c := range counts {
		if c < rounds/n/2 || c > rounds/n*2 {
			t.Fatalf("randIndex(%d): value %d drawn %d times of %d", n, i, c, rounds)
		}
	}
}

func TestJSONPath(t *testing.T) {
	store := toEngine(testjson.Decode(t, storeJSON), 0)
	tests := []struct {
		path string
		want []any
	}{
		{`$`, []any{store}},
		{`$.bicycle.color`, []any{"red"}},
		{`$['bicycle']["color"]`, []any{"red"}},
		{`$.book[*].author`, []any{"Nigel Rees", "Evelyn Waugh", "Herman Melville", "J. R. R. Tolkien"}},
		{`$..author`, []any{"Nigel Rees", "Evelyn Waugh", "Herman Melville", "J. R. R. Tolkien"}},
		{`$.book[2].title`, []any{"Moby Dick"}},
		{`$.book[-1].title`, []any{"The Lord of the Rings"}},
		{`$.book[0,1].title`, []any{"Sayings of the Century", "Sword of Honour"}},
		{`$.book[:2].title`, []any{"Sayings of the Century", "Sword of Honour"}},
		{`$.book[-2:].title`, []any{"Moby Dick", "The Lord of the Rings"}},
		{`$.book[::-2].title`, []any{"The Lord of the Rings", "Sword of Honour"}},
		{`$.book[?(@.isbn)].title`, []any{"Moby Dick", "The Lord of the Rings"}},
		{`$.book[?(!@.isbn)].title`, []any{"Sayings of the Century", "Sword of Honour"}},
		{`$.book[?(@.price < 10)].title`, []any{"Sayings of the Century", "Moby Dick"}},
		{`$.book[?(@.price <= 8.95)].title`, []any{"Sayings of the Century"}},
		{`$.book[?(@.price > 20 || @.category == 'reference')].title`, []any{"Sayings of the Century", "The Lord of the Rings"}},
		{`$.book[?(@.category == "fiction" && @.price < 10)].title`, []any{"Moby Dick"}},
		{`$.book[?((@.price < 9) && !(@.category != 'fiction'))].title`, []any{"Moby Dick"}},
		{`$.book[?(@.price > $.bicycle.price)].title`, []any{"The Lord of the Rings"}},
		{`$.book[?(@.author >= 'J')].author`, []any{"Nigel Rees", "J. R. R. Tolkien"}},
		{`$.book[?@.price == 12.99].title`, []any{"Sword of Honour"}},
		{`$.bicycles[?(@.color != 'red')].price`, []any{8.99}},
		{`$.big`, []any{json.Number("12345678901234567890")}},
		{`$[?(@ == 12345678901234567890)]`, []any{json.Number("12345678901234567890")}},
		{`$[?(@ == 12345678901234567891)]`, nil},
		{`$[?(@ > 12345678901234567889.5)]`, []any{json.Number("12345678901234567890")}},
		{`$.nothing`, []any{nil}},
		{`$[?(@ == null)]`, []any{nil}},
		{`$.bicycle.*`, []any{"red", 19.95}},
		{`$..price`, []any{19.95, 19.95, 8.99, 8.95, 12.99, 8.99, 22.99, 8.99, 22.99}},
		{`$.missing`, nil},
		{`$.book.title`, nil},
		{`$.bicycle[0]`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			p, err := compileJSONPath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.eval(store)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && !reflect.DeepEqual(got, tc.want)) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestJSONPathErrors(t *testing.T) {
	for _, path := range []string{
		``, `x`, `$.`, `$[`, `$[1`, `$['a`, `$[?(@.a <)]`, `$[?(@.a == 1]`, `$[::0]`, `$..`, `$.a b`,
		`$[99999999999]`, `$[?(` + strings.Repeat("(", 100) + `@.a` + strings.Repeat(")", 100) + `)]`,
		`$[?(!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!@.a)]`,
		"$['\\q']", `$[?(@.a == tru)]`, `$[?(@.a == 1e)]`, "$" + strings.Repeat(".a", 600),
	} {
		t.Run(path, func(t *testing.T) {
			if _, err := compileJSONPath(path); err == nil {
				t.Fatalf("%q: want error", path)
			}
		})
	}
}

func TestJSONPathLimits(t *testing.T) {
	wide := make([]any, maxPathNodes+1)
	for i := range wide {
		wide[i] = []any{i}
	}
	p, err := compileJSONPath(`$[*][*]`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.eval(wide); err == nil {
		t.Fatal("want too-many-values error")
	}
	var deep any = "leaf"
	for range maxDescend + 10 {
		deep = []any{deep}
	}
	p, err = compileJSONPath(`$..*`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.eval(deep); err == nil {
		t.Fatal("want nesting error")
	}
}
