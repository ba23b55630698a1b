package caddymodule

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// bodyBuffers keeps the buffers of proxied request bodies between calls:
// a 64 KB body read into a new buffer and detokenized into another cost
// about 20 µs a call in zeroing and garbage collection at 64 connections
// (the load benchmark's CPU profile). A buffer holds no more than the
// freed memory of a new one would until it is reused.
var bodyBuffers sync.Pool // of *[]byte

// copyBuffers keeps the buffers that relay destination responses: io.Copy
// would allocate 32 KB for every call.
var copyBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copyResponse copies src to dst through a pooled buffer.
func copyResponse(dst io.Writer, src io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[32 << 10]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(dst, src, buf[:])
}

// maxPooledBuffer is the largest buffer kept: room for a body of the
// largest size allowed, detokenized.
const maxPooledBuffer = 2 * maxBodyBytes

func getBodyBuffer() *[]byte {
	if b, ok := bodyBuffers.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func putBodyBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		bodyBuffers.Put(b)
	}
}

// sharedBody is a forwarded request body in a pooled buffer. The
// transport may still be writing it after RoundTrip has returned, and may
// open it again to retry the request (GetBody), so the buffer goes back to
// the pool only once the forwarder and every reader opened on it are done
// with it: each holds a reference.
type sharedBody struct {
	buf  *[]byte
	data []byte // in *buf
	refs atomic.Int32
	free func(*[]byte) // putBodyBuffer
}

// newSharedBody holds data, which lives in buf, with one reference: the
// forwarder's, dropped by release once the call is over.
func newSharedBody(buf *[]byte, data []byte) *sharedBody {
	b := &sharedBody{buf: buf, data: data, free: putBodyBuffer}
	b.refs.Store(1)
	return b
}

// open returns a new reader of the body, which holds a reference until it
// is closed.
func (b *sharedBody) open() io.ReadCloser {
	b.refs.Add(1)
	return &sharedBodyReader{Reader: bytes.NewReader(b.data), body: b}
}

// release drops a reference; the last one returns the buffer to the pool.
func (b *sharedBody) release() {
	if b.refs.Add(-1) == 0 {
		*b.buf = b.data[:0]
		b.free(b.buf)
	}
}

// sharedBodyReader reads a sharedBody.
type sharedBodyReader struct {
	*bytes.Reader
	body   *sharedBody
	closed atomic.Bool
}

// Close drops the reader's reference, once.
func (r *sharedBodyReader) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.body.release()
	}
	return nil
}
