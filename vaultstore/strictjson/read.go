package strictjson

import (
	"errors"
	"io"
	"math"
	"net/http"
)

// ReadBody reads all of r, but never more than max+1 bytes. If the body is
// longer than max bytes it returns [ErrTooLarge]; a *http.MaxBytesError from a
// reader wrapped by http.MaxBytesReader is reported as ErrTooLarge too. A
// negative max is treated as zero. Any other read failure is returned as an
// [*Error] with Field "body" that unwraps to the underlying error.
func ReadBody(r io.Reader, max int64) ([]byte, error) {
	return ReadBodyOfLength(r, max, -1)
}

// ReadBodyOfLength is ReadBody for a body that declares its length (an
// HTTP Content-Length; -1 when unknown): the buffer is sized for it at
// once instead of growing, and the declaration is trusted for nothing
// else.
func ReadBodyOfLength(r io.Reader, max, length int64) ([]byte, error) {
	return AppendBody(nil, r, max, length)
}

// AppendBody is ReadBodyOfLength reading into buf from buf[:0], so that a
// caller with a buffer to reuse reads without allocating when it is large
// enough (length+1 bytes, room to observe io.EOF). The result shares buf's
// memory only then.
func AppendBody(buf []byte, r io.Reader, max, length int64) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	remaining := max
	if remaining < math.MaxInt64 {
		remaining++ // read one byte more than allowed to detect oversize bodies
	}
	size := int64(512)
	if l, ok := r.(interface{ Len() int }); ok && int64(l.Len()) >= 0 {
		size = int64(l.Len()) + 1 // room to observe io.EOF without growing
	} else if length >= 0 {
		size = length + 1
	}
	if size > remaining {
		size = remaining
	}
	if size < 1 {
		size = 1
	}
	if int64(cap(buf)) >= size {
		buf = buf[:0]
	} else {
		buf = make([]byte, 0, size)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if int64(len(room)) > remaining {
			room = room[:remaining]
		}
		n, err := r.Read(room)
		if n < 0 || n > len(room) {
			return nil, &Error{Field: fieldBody, Message: "read error", err: io.ErrShortBuffer}
		}
		buf = buf[:len(buf)+n]
		remaining -= int64(n)
		if int64(len(buf)) > max {
			return nil, ErrTooLarge
		}
		if err != nil {
			if err == io.EOF {
				return buf, nil
			}
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, ErrTooLarge
			}
			return nil, &Error{Field: fieldBody, Message: "read error", err: err}
		}
		if remaining == 0 {
			// Exactly max+1 bytes cannot have been read (checked above), so
			// remaining can only reach zero when max == math.MaxInt64.
			return nil, ErrTooLarge
		}
	}
}
