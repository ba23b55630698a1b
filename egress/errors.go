package egress

import "errors"

// ErrRefused is matched, through [errors.Is], by every refusal of the
// egress policy: those from [Policy.CheckURL] and those from the dialer of
// [Policy.Transport], even after net/http has wrapped them.
var ErrRefused = errors.New("egress: destination refused by policy")

// Error is a refusal by the egress policy. Reason is a short sentence that
// is safe to show to API callers: it may name the destination host or
// address but never includes credentials or the rest of the URL.
type Error struct{ Reason string }

// Error returns the reason prefixed with "egress: ".
func (e *Error) Error() string { return "egress: " + e.Reason }

// Is reports whether target is [ErrRefused], so that errors.Is(err,
// ErrRefused) holds for every refusal.
func (e *Error) Is(target error) bool { return target == ErrRefused }

func refuse(reason string) *Error { return &Error{Reason: reason} }
