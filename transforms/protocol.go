package transforms

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// The parent and a worker talk over the worker's stdin and stdout in
// frames: a 4-byte big-endian length, then that many bytes of JSON (one
// frame object). Frames carry the id of the run they belong to, so that
// late frames of an earlier run are recognised and dropped, and the seq of
// the svc call they answer. Job and result frames, one of each per run,
// are binary instead of JSON (see binJob): their payloads, already JSON
// text, then cross as they are, neither escaped nor scanned on the way.
//
// A worker runs its jobs one at a time, in the order they came. The
// parent may send a job while another runs (pipelining: at most one
// queued behind the run under way); the worker starts it once it has
// written the result before it. A cancel for a job that has not started
// makes the worker skip it: its result is a timeout error, and it runs no
// code.
//
//	parent -> worker                 worker -> parent
//	init   {init}                    ready  {pid}
//	job    {id, job}                 result {id, out | err}
//	reply  {id, seq, reply | err}    call   {id, seq, method, params}
//	cancel {id}                      log    {id, line}
const (
	frameInit   = "init"
	frameReady  = "ready"
	frameJob    = "job"
	frameResult = "result"
	frameCall   = "call"
	frameReply  = "reply"
	frameCancel = "cancel"
	frameLog    = "log"
)

// Frame size bounds. A job carries up to MaxCodeChars characters of code
// (at most 4 bytes each, 6 when JSON-escaped) and MaxPayload of args plus
// the configuration; a result up to MaxPayload of output, or an error with
// a custom response of the same size.
const (
	maxFrameToWorker   = 16 << 20
	maxFrameFromWorker = 3*MaxPayload + 64<<10
)

// frame is the one message type of the protocol; T says which fields are
// set.
type frame struct {
	T   string `json:"t"`
	ID  uint64 `json:"id,omitempty"`
	Seq uint64 `json:"seq,omitempty"`

	Init *initConfig `json:"init,omitempty"`
	Pid  int         `json:"pid,omitempty"`
	// Unconfined (ready) says why the worker runs without its system
	// call filter; empty when it has it.
	Unconfined string    `json:"unconfined,omitempty"`
	Job        *jobFrame `json:"job,omitempty"`

	// Out is the JSON text of the value the function settled with.
	Out json.RawMessage `json:"out,omitempty"`
	// Err is a failed run, or a failed svc call in a reply.
	Err *errFrame `json:"err,omitempty"`
	// Kept (result) says that the worker kept the run's realm warm for
	// further runs of its key; Warm that the run reused a warm realm.
	Kept bool `json:"kept,omitempty"`
	Warm bool `json:"warm,omitempty"`

	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Reply  json.RawMessage `json:"reply,omitempty"`

	Line string `json:"line,omitempty"`
}

// initConfig is the worker's configuration, sent once after it starts.
type initConfig struct {
	MemoryLimit      int64    `json:"memory_limit"`
	MaxCallStackSize int      `json:"max_call_stack_size"`
	ModulesDir       string   `json:"modules_dir,omitempty"`
	AllowModules     []string `json:"allow_modules,omitempty"`
	MaxLogLines      int      `json:"max_log_lines"`
	MaxSvcCalls      int      `json:"max_svc_calls"`
}

// jobFrame is a Job as the worker sees it: data as JSON text, no Go values.
type jobFrame struct {
	Kind      string          `json:"kind"`
	Code      string          `json:"code"`
	Args      json.RawMessage `json:"args"`
	Config    json.RawMessage `json:"config"`
	Svc       bool            `json:"svc,omitempty"`
	TimeoutMS int64           `json:"timeout_ms"`
	// Realm is the realm scope of Job.Realm (tenant and principal, see
	// RealmScope.key), "" for a fresh realm.
	Realm string `json:"realm,omitempty"`
}

// errFrame is an error as it crosses the pipe.
type errFrame struct {
	Kind    string              `json:"kind"`
	Message string              `json:"message"`
	Status  int                 `json:"status,omitempty"`
	Errors  map[string][]string `json:"errors,omitempty"`
	// Custom is a CustomHttpResponseError's response.
	Custom *customResponse `json:"custom,omitempty"`
	// Retire asks the parent to stop this worker after the run (its engine
	// state is suspect, for example after a recovered Go panic).
	Retire bool `json:"retire,omitempty"`
}

// customResponse is the status, headers and body of a thrown
// CustomHttpResponseError.
type customResponse struct {
	Status  int             `json:"status"`
	Headers json.RawMessage `json:"headers,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"`
}

var (
	errFrameTooLarge = errors.New("transforms: frame too large")
	errBadFrame      = errors.New("transforms: malformed binary frame")
)

// Binary frames start with a tag byte, where a JSON frame starts with '{':
//
//	job:    binJob, uvarint id, then kind, code, args, config and realm
//	        as uvarint-length-prefixed bytes, uvarint timeout_ms, a flags
//	        byte (1: svc)
//	result: binResult, uvarint id, a flags byte (1: kept, 2: err, 4: warm), out as
//	        prefixed bytes, then, with flag 2, the JSON of err as prefixed
//	        bytes
//
// Nothing is trusted on the way in: the parent checks a result's out like
// any JSON from a worker (shapeResult), and a malformed frame is a
// protocol error.
const (
	binJob    = 1
	binResult = 2
)

func appendBytes(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBinary appends the binary encoding of f, and reports false when f
// is not a job or result frame.
func appendBinary(b []byte, f *frame) ([]byte, bool, error) {
	switch {
	case f.T == frameJob && f.Job != nil:
		j := f.Job
		b = append(b, binJob)
		b = binary.AppendUvarint(b, f.ID)
		b = appendString(b, j.Kind)
		b = appendString(b, j.Code)
		b = appendBytes(b, j.Args)
		b = appendBytes(b, j.Config)
		b = appendString(b, j.Realm)
		b = binary.AppendUvarint(b, uint64(max(j.TimeoutMS, 0)))
		var flags byte
		if j.Svc {
			flags |= 1
		}
		return append(b, flags), true, nil
	case f.T == frameResult:
		var flags byte
		if f.Kept {
			flags |= 1
		}
		if f.Warm {
			flags |= 4
		}
		var errJSON []byte
		if f.Err != nil {
			flags |= 2
			var err error
			if errJSON, err = json.Marshal(f.Err); err != nil {
				return b, true, err
			}
		}
		b = append(b, binResult)
		b = binary.AppendUvarint(b, f.ID)
		b = append(b, flags)
		b = appendBytes(b, f.Out)
		if errJSON != nil {
			b = appendBytes(b, errJSON)
		}
		return b, true, nil
	}
	return b, false, nil
}

// binReader reads the fields of a binary frame; ok turns false at the
// first field that does not fit.
type binReader struct {
	b  []byte
	ok bool
}

func (r *binReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok, r.b = false, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *binReader) bytes() []byte {
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.b)) {
		r.ok, r.b = false, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *binReader) byte1() byte {
	if !r.ok || len(r.b) == 0 {
		r.ok, r.b = false, nil
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// decodeBinary decodes a binary frame (b starts with its tag).
func decodeBinary(b []byte) (*frame, error) {
	r := binReader{b: b[1:], ok: true}
	f := &frame{ID: r.uvarint()}
	switch b[0] {
	case binJob:
		j := &jobFrame{}
		j.Kind = string(r.bytes())
		j.Code = string(r.bytes())
		j.Args = r.bytes()
		j.Config = r.bytes()
		j.Realm = string(r.bytes())
		j.TimeoutMS = int64(min(r.uvarint(), uint64(math.MaxInt64)))
		j.Svc = r.byte1()&1 != 0
		f.T, f.Job = frameJob, j
	case binResult:
		flags := r.byte1()
		f.T = frameResult
		f.Kept, f.Warm = flags&1 != 0, flags&4 != 0
		if out := r.bytes(); len(out) > 0 {
			f.Out = out
		}
		if flags&2 != 0 {
			f.Err = new(errFrame)
			if r.ok && json.Unmarshal(r.bytes(), f.Err) != nil {
				return nil, errBadFrame
			}
		}
	default:
		return nil, errBadFrame
	}
	if !r.ok || len(r.b) != 0 {
		return nil, errBadFrame
	}
	return f, nil
}

// frameWriter writes whole frames, one at a time.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

// write encodes f and writes it as one frame.
func (fw *frameWriter) write(f *frame) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.buf.Reset()
	fw.buf.Write([]byte{0, 0, 0, 0})
	if b, ok, err := appendBinary(fw.buf.AvailableBuffer(), f); ok {
		if err != nil {
			return fmt.Errorf("transforms: encode frame: %w", err)
		}
		fw.buf.Write(b)
	} else {
		enc := json.NewEncoder(&fw.buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("transforms: encode frame: %w", err)
		}
	}
	b := fw.buf.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := fw.w.Write(b)
	if fw.buf.Cap() > 1<<20 {
		fw.buf = bytes.Buffer{} // do not keep a large buffer alive
	}
	return err
}

// readFrame reads one frame of at most limit bytes.
func readFrame(r io.Reader, limit int) (*frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(limit) {
		return nil, errFrameTooLarge
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if n > 0 && (b[0] == binJob || b[0] == binResult) {
		return decodeBinary(b)
	}
	f := new(frame)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("transforms: decode frame: %w", err)
	}
	return f, nil
}
