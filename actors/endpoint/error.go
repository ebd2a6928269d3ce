package endpoint

import (
	"fmt"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Error is a domain error answered to a command: a code, the request field
// at fault (if any) and a message that says how to fix it. It converts to a
// [controlv1.GrainError] with [Error.Proto].
type Error struct {
	Code    controlv1.GrainError_Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("endpoint: %s: %s", e.Field, e.Message)
	}
	return "endpoint: " + e.Message
}

// Proto returns the error as the grain answers it.
func (e *Error) Proto() *controlv1.GrainError {
	return &controlv1.GrainError{Code: e.Code, Field: e.Field, Message: e.Message}
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: controlv1.GrainError_CODE_INVALID_ARGUMENT, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(field, format string, args ...any) *Error {
	return &Error{Code: controlv1.GrainError_CODE_NOT_FOUND, Field: field, Message: fmt.Sprintf(format, args...)}
}

func failedPrecondition(field, format string, args ...any) *Error {
	return &Error{Code: controlv1.GrainError_CODE_FAILED_PRECONDITION, Field: field, Message: fmt.Sprintf(format, args...)}
}
