package transforms

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kinds of [Error]. Every failure of [Pool.Run] that the tenant's code, its
// data or the pool's load can cause is an *Error with one of these kinds.
const (
	// KindTimeout: the run did not settle within its deadline (the pool's
	// Timeout or the context's deadline, whichever is earlier), or the
	// caller cancelled the context. The worker was interrupted, or killed
	// when it did not stop within the grace period.
	KindTimeout = "timeout"
	// KindMemory: the worker exceeded its memory cap (the watchdog's exit,
	// a Go "fatal error: out of memory" or "stack overflow", or a SIGKILL
	// that the pool did not send, which on Linux is the OOM killer). The
	// worker is gone and has been replaced.
	KindMemory = "memory"
	// KindCrash: the worker died for another reason (a Go panic in the
	// engine, a broken pipe, a protocol violation) or could not be started.
	KindCrash = "crash"
	// KindBusy: no worker became free within QueueTimeout, or the pool is
	// closed. Nothing ran; the caller may retry later.
	KindBusy = "busy"
	// KindClosed: the pool was closed while the run was under way, and
	// its worker was stopped. The code may have run in part (and called
	// out), so unlike KindBusy this is not a run to repeat blindly.
	KindClosed = "closed"
	// KindInvalidCode: the code is too long, does not compile, uses a
	// regular expression that needs backtracking, or does not export a
	// function.
	KindInvalidCode = "invalid_code"
	// KindInvalidResult: the function settled, but not with a value of the
	// required shape, with a value that is not JSON, with one larger than
	// the output limit, or its promise can never settle.
	KindInvalidResult = "invalid_result"
	// KindInvalidInput: the job's Args are not JSON or are larger than the
	// payload limit. Nothing ran.
	KindInvalidInput = "invalid_input"
	// KindRuntime: the code threw (or its promise rejected). Message holds
	// the thrown error's message; Status is set when the thrown value is
	// one of the reactor error types of the errors module.
	KindRuntime = "runtime"
	// KindModule: the code required a module that is not allowed or could
	// not be loaded.
	KindModule = "module"
)

// maxMessage bounds Error.Message, in bytes.
const maxMessage = 1024

// Error is a failed run or a refused piece of code.
//
// Message is a short English sentence. For KindRuntime it is text chosen
// by the tenant's code (the message of the value it threw), and for
// KindInvalidCode it may quote a fragment of the code (a regular
// expression, a module name): treat it as tenant-controlled. It never
// contains the job's Args or Configuration unless the tenant's code put
// them into what it threw, which is why a caller that shows or logs it
// must scrub it like any other tenant output (for example mask digit runs
// that look like card numbers). It is at most 1 KiB.
type Error struct {
	// Kind is one of the Kind constants.
	Kind string
	// Message says what happened; see the type's documentation.
	Message string
	// Status is the HTTP status the tenant's code asked for by throwing
	// one of the reactor error types of the errors module
	// (AuthenticationError 401, AuthorizationError 403, BadRequestError
	// 400, InvalidPaymentMethodError 402, RateLimitError 429,
	// ServiceUnavailableError 503, InvalidReactorConfigurationError 400,
	// ReactorRuntimeError 500, BasisTheoryReactorError and
	// CustomHttpResponseError with the status they were given). Zero
	// otherwise.
	Status int
	// Errors is the reactor error's errors map (property name to
	// messages), the "errors" member of the problem-details body the
	// caller returns. Nil unless Status is set by a reactor error type.
	Errors map[string][]string
	// Custom is true when the code threw a CustomHttpResponseError: Run
	// then also returns a Result whose Body and Headers, with Status, are
	// the response the caller returns verbatim.
	Custom bool

	cause error
}

// Error returns "transforms: <kind>: <message>".
func (e *Error) Error() string {
	if e.Message == "" {
		return "transforms: " + e.Kind
	}
	return "transforms: " + e.Kind + ": " + e.Message
}

// Unwrap returns the underlying cause, such as context.Canceled for a run
// whose context was cancelled, or nil.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error of the same Kind, so that
// errors.Is(err, ErrBusy) matches every busy error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// ErrBusy is matched, through errors.Is, by every error of KindBusy: no
// worker became free within QueueTimeout, or the pool is closed.
var ErrBusy = &Error{Kind: KindBusy, Message: "no transform worker is free"}

// newError builds an *Error with a bounded message.
func newError(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: truncate(fmt.Sprintf(format, args...), maxMessage)}
}

// SvcError is the error a [Svc] returns to reject a call with a status
// and a message that the tenant's code may see: the promise returned by
// the req.svc method rejects with an Error whose status and message are
// these. Any other error from Svc.Call reaches the code as status 500 with
// a generic message, so that internal details never leak into the VM.
type SvcError struct {
	Status  int
	Message string
}

// Error returns the message with its status.
func (e *SvcError) Error() string { return fmt.Sprintf("svc: %d %s", e.Status, e.Message) }

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence
// and replaces invalid UTF-8.
func truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
