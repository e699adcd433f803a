package unblock

import (
	"errors"
	"fmt"
)

// Error is a refusal with a stable API error key (invalid, not_found,
// conflict, ...) and a hint naming the fix. internal/api maps it through
// its keyedError interface without importing this package's details.
type Error struct {
	Key  string
	Msg  string
	Hint string
	Err  error // wrapped cause, optional
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return e.Msg + " (" + e.Hint + ")"
	}
	return e.Msg
}

// ErrorKey names the API error key.
func (e *Error) ErrorKey() string { return e.Key }

// ErrorHint names the fix.
func (e *Error) ErrorHint() string { return e.Hint }

// ErrorMessage is the message without the hint.
func (e *Error) ErrorMessage() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// ErrInvalid is wrapped by every refusal of bad input (errors.Is).
var ErrInvalid = errors.New("invalid")

// ErrDecided: the request is no longer pending.
var ErrDecided = errors.New("the unblock request is already decided")

func invalid(format string, a ...any) error {
	return &Error{Key: "invalid", Msg: fmt.Sprintf(format, a...), Err: ErrInvalid}
}

func invalidHint(hint, format string, a ...any) error {
	return &Error{Key: "invalid", Msg: fmt.Sprintf(format, a...), Hint: hint, Err: ErrInvalid}
}
