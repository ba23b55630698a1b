package transforms

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The parent and a worker talk over the worker's stdin and stdout in
// frames: a 4-byte big-endian length, then that many bytes of JSON (one
// frame object). Frames carry the id of the run they belong to, so that
// late frames of an earlier run are recognised and dropped, and the seq of
// the svc call they answer.
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
	Job  *jobFrame   `json:"job,omitempty"`

	// Out is the JSON text of the value the function settled with.
	Out json.RawMessage `json:"out,omitempty"`
	// Err is a failed run, or a failed svc call in a reply.
	Err *errFrame `json:"err,omitempty"`

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

var errFrameTooLarge = errors.New("transforms: frame too large")

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
	enc := json.NewEncoder(&fw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("transforms: encode frame: %w", err)
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
	f := new(frame)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("transforms: decode frame: %w", err)
	}
	return f, nil
}
