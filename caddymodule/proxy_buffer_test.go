package caddymodule

import (
	"io"
	"testing"
)

// A shared body's buffer is freed once, after the forwarder and every
// reader opened on it are done, in whatever order they finish: the
// transport may close a reader after RoundTrip has returned, or open a
// second one to retry.
func TestSharedBodyFreesOnLastRelease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(b *sharedBody, r1, r2 io.ReadCloser) []func()
	}{
		{"readers close before the forwarder", func(b *sharedBody, r1, r2 io.ReadCloser) []func() {
			return []func(){func() { r1.Close() }, func() { r2.Close() }, b.release}
		}},
		{"forwarder first, a reader closed late", func(b *sharedBody, r1, r2 io.ReadCloser) []func() {
			return []func(){b.release, func() { r1.Close() }, func() { r2.Close() }}
		}},
		{"a reader closed twice", func(b *sharedBody, r1, r2 io.ReadCloser) []func() {
			return []func(){func() { r1.Close() }, func() { r1.Close() }, b.release, func() { r2.Close() }}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, 0, 64)
			data := append(buf, "card 4242424242424242"...)
			b := newSharedBody(&buf, data)
			var freed int
			b.free = func(p *[]byte) {
				freed++
				if p != &buf || cap(*p) != 64 || len(*p) != 0 {
					t.Errorf("freed %p len %d cap %d, want the body's buffer emptied", p, len(*p), cap(*p))
				}
			}
			r1, r2 := b.open(), b.open()
			if got, _ := io.ReadAll(r2); string(got) != "card 4242424242424242" {
				t.Fatalf("reader got %q", got)
			}
			steps := tc.steps(b, r1, r2)
			for i, step := range steps {
				step()
				if last := i == len(steps)-1; (freed == 1) != last || freed > 1 {
					t.Fatalf("after step %d of %d the buffer was freed %d times", i+1, len(steps), freed)
				}
			}
		})
	}
}
