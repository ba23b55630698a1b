package strictjson

import "errors"

// ErrTooLarge is returned by [ReadBody] when the body exceeds the allowed
// size. The HTTP edge maps it to 413 Request Entity Too Large.
var ErrTooLarge = errors.New("strictjson: request body too large")

// fieldBody is the Field of errors that concern the body as a whole.
const fieldBody = "body"

// Error reports why a request body was rejected.
//
// Field is the JSON path of the offending member, with object members joined
// by dots and array elements in brackets (for example
// "settings.fingerprint_tokens" or "permissions[2]"); member names that are
// not plain identifiers are written as ["name"]. Field is "body" for problems
// that concern the body as a whole, such as syntax errors or excessive
// nesting.
//
// Message is short, lowercase and never contains the offending value.
type Error struct {
	Field   string
	Message string

	err error // underlying cause, for I/O errors from ReadBody
}

// Error returns "field: message".
func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Unwrap returns the underlying I/O error of a failed read, if any.
func (e *Error) Unwrap() error { return e.err }

func bodyError(msg string) *Error { return &Error{Field: fieldBody, Message: msg} }

func fieldError(path, msg string) *Error {
	if path == "" {
		path = fieldBody
	}
	return &Error{Field: path, Message: msg}
}
