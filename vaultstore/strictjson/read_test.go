package strictjson

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBody(t *testing.T) {
	tests := []struct {
		name    string
		r       func() io.Reader
		max     int64
		want    string
		tooBig  bool
		readErr bool
	}{
		{name: "empty", r: func() io.Reader { return strings.NewReader("") }, max: 10, want: ""},
		{name: "below max", r: func() io.Reader { return strings.NewReader("abc") }, max: 10, want: "abc"},
		{name: "exactly max", r: func() io.Reader { return strings.NewReader("0123456789") }, max: 10, want: "0123456789"},
		{name: "one over max", r: func() io.Reader { return strings.NewReader("0123456789x") }, max: 10, tooBig: true},
		{name: "zero max empty", r: func() io.Reader { return strings.NewReader("") }, max: 0, want: ""},
		{name: "zero max one byte", r: func() io.Reader { return strings.NewReader("x") }, max: 0, tooBig: true},
		{name: "negative max", r: func() io.Reader { return strings.NewReader("x") }, max: -1, tooBig: true},
		{name: "one byte reader", r: func() io.Reader { return iotest.OneByteReader(strings.NewReader(strings.Repeat("a", 5000))) }, max: 5000, want: strings.Repeat("a", 5000)},
		{name: "one byte reader over", r: func() io.Reader { return iotest.OneByteReader(strings.NewReader(strings.Repeat("a", 5001))) }, max: 5000, tooBig: true},
		{name: "data with EOF", r: func() io.Reader { return iotest.DataErrReader(strings.NewReader("abc")) }, max: 3, want: "abc"},
		{name: "huge stream stops early", r: func() io.Reader { return io.LimitReader(zeros{}, 1<<40) }, max: 1 << 20, tooBig: true},
		{name: "max bytes reader", r: func() io.Reader {
			return http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(strings.Repeat("a", 100))), 50)
		}, max: 1000, tooBig: true},
		{name: "max bytes reader within", r: func() io.Reader {
			return http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader("abc")), 50)
		}, max: 1000, want: "abc"},
		{name: "read error", r: func() io.Reader { return iotest.TimeoutReader(bytes.NewReader(make([]byte, 600))) }, max: 1000, readErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadBody(tc.r(), tc.max)
			switch {
			case tc.tooBig:
				if err != ErrTooLarge {
					t.Fatalf("got %v, want ErrTooLarge", err)
				}
			case tc.readErr:
				var e *Error
				if !errors.As(err, &e) || e.Field != "body" || !errors.Is(err, iotest.ErrTimeout) {
					t.Fatalf("got %v, want *Error wrapping ErrTimeout", err)
				}
			default:
				if err != nil || string(got) != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A declared length sizes the buffer, but a wrong one changes nothing the
// caller sees.
func TestReadBodyOfLength(t *testing.T) {
	body := strings.Repeat("a", 70000)
	for _, tc := range []struct {
		name   string
		length int64
		max    int64
		want   string
		tooBig bool
	}{
		{"exact", 70000, 1 << 20, body, false},
		{"unknown", -1, 1 << 20, body, false},
		{"understated", 10, 1 << 20, body, false},
		{"overstated", 1 << 30, 1 << 20, body, false},
		{"over max", 70000, 1000, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadBodyOfLength(io.MultiReader(strings.NewReader(body)), tc.max, tc.length)
			if tc.tooBig {
				if err != ErrTooLarge {
					t.Fatalf("got %v, want ErrTooLarge", err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
			}
		})
	}
}

// AppendBody reads what ReadBodyOfLength reads, into the buffer it is given
// when that is large enough, and never shows the buffer's old contents.
func TestAppendBodyReusesItsBuffer(t *testing.T) {
	body := strings.Repeat("b", 5000)
	for _, tc := range []struct {
		name   string
		cap    int
		length int64
		reused bool
	}{
		{"nil buffer", 0, 5000, false},
		{"too small", 100, 5000, false},
		{"no room for EOF", 5000, 5000, false},
		{"exact", 5001, 5000, true},
		{"large", 1 << 16, 5000, true},
		{"large, unknown length", 1 << 16, -1, true},
		{"small, unknown length", 1000, -1, false}, // room for the first 512 bytes, then grown
		{"large, understated", 1 << 16, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := bytes.Repeat([]byte("z"), tc.cap)[:tc.cap:tc.cap] // stale contents
			got, err := AppendBody(buf, io.MultiReader(strings.NewReader(body)), 1<<20, tc.length)
			if err != nil || string(got) != body {
				t.Fatalf("got %d bytes (%.10q...), %v; want the %d-byte body", len(got), got, err, len(body))
			}
			if reused := len(buf) > 0 && &got[0] == &buf[0]; reused != tc.reused {
				t.Fatalf("buffer reused: %v, want %v", reused, tc.reused)
			}
		})
	}
	if _, err := AppendBody(make([]byte, 1<<16), strings.NewReader(body), 1000, 5000); err != ErrTooLarge {
		t.Fatalf("over max into a large buffer: %v, want ErrTooLarge", err)
	}
}
