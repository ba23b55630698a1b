package expr

import (
	"reflect"
	"sync"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestEvaluateJSONEachSameDraws: the alias filters draw the same
// characters in every evaluation of one call, whatever the member order,
// and other characters on the next call.
func TestEvaluateJSONEachSameDraws(t *testing.T) {
	template := map[string]any{
		"a": "{{ data.n | alias_preserve_format: 0, 4 }}",
		"b": "{{ data.n | alias_preserve_length }}",
		"c": []any{"{{ data.s | alias_preserve_format }}", "x {{ data.n | alias_preserve_format: 2, 2 }}"},
		"d": "{% assign r = data.n | alias_preserve_length | slice: 0, 1 %}{{ r }}",
	}
	data := map[string]any{"data": map[string]any{"n": "4242424242424242", "s": "Jane Doe 42"}}
	outs, errs, random := EvaluateJSONEach(template, data, data, data)
	if !random {
		t.Errorf("aliases drawn, random not reported")
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("evaluation %d: %v", i, err)
		}
	}
	for i := 1; i < len(outs); i++ {
		if !reflect.DeepEqual(outs[i], outs[0]) {
			t.Fatalf("evaluation %d differs: %v and %v", i, outs[i], outs[0])
		}
	}
	again, _, _ := EvaluateJSONEach(template, data)
	if reflect.DeepEqual(again[0], outs[0]) {
		t.Fatalf("two calls drew the same aliases: %v", outs[0])
	}
	// data that differs gives results that differ
	other := map[string]any{"data": map[string]any{"n": "4242424242421111", "s": "Jane Doe 42"}}
	outs, _, _ = EvaluateJSONEach("{{ data.n | alias_preserve_format: 0, 4 }}", data, other)
	if outs[0] == outs[1] {
		t.Fatalf("different last four gave the same alias %v", outs[0])
	}
}

// TestEvaluateJSONEachMatchesEvaluateJSON: without random filters the
// results are EvaluateJSON's, errors included.
func TestEvaluateJSONEachMatchesEvaluateJSON(t *testing.T) {
	data := map[string]any{"data": testjson.Decode(t, cardJSON)}
	for _, template := range []any{
		map[string]any{"number": "{{ data.number | reveal_last: 4 }}", "y": "{{ data.expiration_year }}"},
		"{% for x in (1..3) %}{{ x }}{% endfor %}{{ data.number | slice: 0, 6 }}",
		"{{ data | json: '$.nope' }}",
		[]any{"{{ data.cvc }}", 1, nil},
	} {
		want, wantErr := EvaluateJSON(template, data)
		outs, errs, random := EvaluateJSONEach(template, data)
		if random || !reflect.DeepEqual(outs[0], want) || (errs[0] == nil) != (wantErr == nil) {
			t.Errorf("%v: EvaluateJSONEach gives %v, %v; EvaluateJSON %v, %v", template, outs[0], errs[0], want, wantErr)
		}
	}
}

// TestEvaluateJSONEachConcurrent: concurrent calls keep their own draws.
func TestEvaluateJSONEachConcurrent(t *testing.T) {
	data := map[string]any{"data": map[string]any{"n": "4242424242424242"}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				outs, errs, _ := EvaluateJSONEach("{{ data.n | alias_preserve_format }}", data, data)
				if errs[0] != nil || errs[1] != nil || outs[0] != outs[1] {
					t.Errorf("draws differ within a call: %v %v", outs, errs)
					return
				}
			}
		}()
	}
	wg.Wait()
}
