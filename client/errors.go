package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The conditions a caller can test with errors.Is on an error of this
// package. Each matches one or two gRPC codes of a *[Error].
var (
	// ErrInvalid: the request was refused for a bad field, named in the
	// message (INVALID_ARGUMENT, OUT_OF_RANGE). Sending it again fails again.
	ErrInvalid = errors.New("client: invalid argument")
	// ErrNotFound: no such tenant, endpoint, delivery or recovery for this
	// caller (NOT_FOUND); another tenant's resources are not found either.
	ErrNotFound = errors.New("client: not found")
	// ErrConflict: the thing exists already (ALREADY_EXISTS), for example
	// an event id published before with another payload.
	ErrConflict = errors.New("client: already exists")
	// ErrUnauthenticated: the token is missing, unknown or revoked
	// (UNAUTHENTICATED).
	ErrUnauthenticated = errors.New("client: unauthenticated")
	// ErrPermissionDenied: the token may not do this, for example a tenant
	// key acting on another tenant or calling an admin call
	// (PERMISSION_DENIED).
	ErrPermissionDenied = errors.New("client: permission denied")
	// ErrFailedPrecondition: the resource is not in a state that allows the
	// call, for example a deleted endpoint (FAILED_PRECONDITION).
	ErrFailedPrecondition = errors.New("client: failed precondition")
	// ErrUnavailable: the node could not be reached or is shutting down,
	// after the retries a call allows (UNAVAILABLE, ABORTED). Trying later
	// or another node may succeed.
	ErrUnavailable = errors.New("client: unavailable")
	// ErrTooLarge: a message over a size limit of the server or of gRPC
	// (RESOURCE_EXHAUSTED without a RetryInfo). Sending it again fails
	// again; a smaller one may pass.
	ErrTooLarge = errors.New("client: too large")
	// ErrLimited: the caller was over a limit of the node, such as its
	// calls in flight (RESOURCE_EXHAUSTED with a RetryInfo), after the
	// retries a call allows. Nothing was done; the same call succeeds once
	// the caller's other calls end.
	ErrLimited = errors.New("client: over a limit")
	// ErrErased: the payload asked for was erased with its tenant's data
	// key (NOT_FOUND, reason PAYLOAD_ERASED; REST answers 410). It matches
	// ErrNotFound too.
	ErrErased = errors.New("client: payload erased")
)

// Error is a failed call as Hookline (or gRPC on its behalf) answered it:
// the call, the gRPC code and the message. errors.Is matches it against the
// sentinels of this package, and against context.DeadlineExceeded and
// context.Canceled; status.Code and status.FromError work on it.
type Error struct {
	// Op is the call, in words ("publish", "get endpoint").
	Op      string
	Code    codes.Code
	Message string
	// RetryDelay, when not zero, is how long the node asked the caller to
	// wait before trying again (its RetryInfo): the call was refused for a
	// limit before anything was done.
	RetryDelay time.Duration
	// Erased: the payload asked for was erased (see ErrErased).
	Erased bool
}

func (e *Error) Error() string {
	return e.Op + ": " + words(e.Code.String()) + ": " + e.Message
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Code == codes.InvalidArgument || e.Code == codes.OutOfRange
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrConflict:
		return e.Code == codes.AlreadyExists
	case ErrUnauthenticated:
		return e.Code == codes.Unauthenticated
	case ErrPermissionDenied:
		return e.Code == codes.PermissionDenied
	case ErrFailedPrecondition:
		return e.Code == codes.FailedPrecondition
	case ErrUnavailable:
		return e.Code == codes.Unavailable || e.Code == codes.Aborted
	case ErrTooLarge:
		return e.Code == codes.ResourceExhausted && e.RetryDelay == 0
	case ErrLimited:
		return e.Code == codes.ResourceExhausted && e.RetryDelay > 0
	case ErrErased:
		return e.Erased
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	}
	return false
}

// GRPCStatus returns e as a gRPC status, for status.Code and
// status.FromError; a RetryDelay comes back as its RetryInfo.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.Code, e.Message)
	if e.Erased {
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "PAYLOAD_ERASED", Domain: "hookline"}); err == nil {
			st = d
		}
	}
	if e.RetryDelay > 0 {
		if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(e.RetryDelay)}); err == nil {
			return d
		}
	}
	return st
}

// errorOf turns what a stub returned into this package's error: a *Error
// for a gRPC status, the error wrapped with the call otherwise.
func errorOf(op string, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return &Error{Op: op, Code: st.Code(), Message: st.Message(), RetryDelay: retryDelay(st), Erased: erased(st)}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// erased reports whether a status says its payload was erased.
func erased(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "PAYLOAD_ERASED" {
			return true
		}
	}
	return false
}

// retryDelay returns the wait a status's RetryInfo advises, at least 1 ms
// when it has one: the node refused the call for a limit, before doing
// anything. 0 without one.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return max(ri.GetRetryDelay().AsDuration(), time.Millisecond)
		}
	}
	return 0
}

// limited reports whether an attempt's error is a refusal for a limit
// (RESOURCE_EXHAUSTED with a RetryInfo), and the wait it advises.
func limited(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	d := retryDelay(st)
	return d, d > 0
}

// errorOfResult turns a PublishBatch result's code name and message into
// an *Error; nil when the code is empty or OK.
func errorOfResult(op, code, msg string) error {
	if code == "" || code == codes.OK.String() {
		return nil
	}
	return &Error{Op: op, Code: parseCode(code), Message: msg}
}

// parseCode reads a code's name as the server writes it (InvalidArgument,
// codes.Code's String) or as the proto documents it (INVALID_ARGUMENT).
func parseCode(name string) codes.Code {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if name == c.String() {
			return c
		}
	}
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + name + `"`)); err != nil {
		return codes.Unknown
	}
	return c
}

// words turns a name in camel case (InvalidArgument, LookupEvents) into
// lower-case words (invalid argument, lookup events).
func words(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}
