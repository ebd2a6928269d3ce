package command

import (
	"errors"
	"fmt"

	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// Error is a domain error a command is refused with: a code, the request
// field at fault (if any) and a message that says how to fix it. Both grains
// decide with it; it converts to the [internalv1.GrainError] they answer with
// [Error.Proto].
type Error struct {
	Code    internalv1.GrainError_Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// Proto returns the error as a grain answers it.
func (e *Error) Proto() *internalv1.GrainError {
	return &internalv1.GrainError{Code: e.Code, Field: e.Field, Message: e.Message}
}

// Invalid refuses a command whose field is wrong (INVALID_ARGUMENT).
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: internalv1.GrainError_CODE_INVALID_ARGUMENT, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound refuses a command about something that does not exist, or that
// belongs to another tenant (NOT_FOUND).
func NotFound(field, format string, args ...any) *Error {
	return &Error{Code: internalv1.GrainError_CODE_NOT_FOUND, Field: field, Message: fmt.Sprintf(format, args...)}
}

// FailedPrecondition refuses a command the grain's state does not allow
// now (FAILED_PRECONDITION).
func FailedPrecondition(field, format string, args ...any) *Error {
	return &Error{Code: internalv1.GrainError_CODE_FAILED_PRECONDITION, Field: field, Message: fmt.Sprintf(format, args...)}
}

// AlreadyExists refuses a command that would create what exists
// (ALREADY_EXISTS).
func AlreadyExists(field, format string, args ...any) *Error {
	return &Error{Code: internalv1.GrainError_CODE_ALREADY_EXISTS, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Internal refuses a command the grain cannot carry out for a reason the
// caller cannot fix (INTERNAL).
func Internal(format string, args ...any) *Error {
	return &Error{Code: internalv1.GrainError_CODE_INTERNAL, Message: fmt.Sprintf(format, args...)}
}

// Unavailable refuses a command for now: the caller may retry (UNAVAILABLE).
func Unavailable(field, format string, args ...any) *Error {
	return &Error{Code: internalv1.GrainError_CODE_UNAVAILABLE, Field: field, Message: fmt.Sprintf(format, args...)}
}

// AsGrainError returns err as a grain answers it: an *[Error] as itself,
// anything else as INTERNAL without detail (it may hold what the caller must
// not see).
func AsGrainError(err error) *internalv1.GrainError {
	var e *Error
	if errors.As(err, &e) {
		return e.Proto()
	}
	return &internalv1.GrainError{Code: internalv1.GrainError_CODE_INTERNAL, Message: "internal error"}
}

// ValidID reports whether id is a grain id: 1 to 64 characters of
// [A-Za-z0-9_].
func ValidID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
	}
	return true
}
