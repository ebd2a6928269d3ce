package control

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// ErrUnavailable marks a grain request that no member could serve now (its
// owner is moving, or not reachable from this node); the caller may retry.
// [Grains] implementations wrap it.
var ErrUnavailable = errors.New("no member could serve it now; retry the request")

// fieldError is a bad input: the field at fault and how to fix it.
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func invalid(field, format string, args ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// grainError carries a domain error answered by a grain.
type grainError struct{ e *internalv1.GrainError }

func (g grainError) Error() string {
	if g.e.GetField() != "" {
		return g.e.GetField() + ": " + g.e.GetMessage()
	}
	return g.e.GetMessage()
}

// toStatus turns any error of this package's calls into a gRPC status: the
// one place where errors meet status codes.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var fe *fieldError
	var ge grainError
	switch {
	case errors.As(err, &fe):
		return status.Error(codes.InvalidArgument, fe.Error())
	case errors.As(err, &ge):
		return status.Error(grainCode(ge.e.GetCode()), ge.Error())
	case errors.Is(err, events.ErrTooLarge):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, events.ErrWrongRevision):
		return status.Error(codes.Aborted, "a concurrent change won; retry the request")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "the request timed out; retry it")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "the request was cancelled")
	case errors.Is(err, events.ErrClosed):
		return status.Error(codes.Unavailable, "the node is shutting down; retry on another node")
	case errors.Is(err, history.ErrIncomplete), errors.Is(err, ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, "internal error: "+err.Error())
}

func grainCode(c internalv1.GrainError_Code) codes.Code {
	switch c {
	case internalv1.GrainError_CODE_INVALID_ARGUMENT:
		return codes.InvalidArgument
	case internalv1.GrainError_CODE_NOT_FOUND:
		return codes.NotFound
	case internalv1.GrainError_CODE_ALREADY_EXISTS:
		return codes.AlreadyExists
	case internalv1.GrainError_CODE_FAILED_PRECONDITION:
		return codes.FailedPrecondition
	case internalv1.GrainError_CODE_PERMISSION_DENIED:
		return codes.PermissionDenied
	case internalv1.GrainError_CODE_ABORTED:
		return codes.Aborted
	case internalv1.GrainError_CODE_UNAVAILABLE:
		return codes.Unavailable
	}
	return codes.Internal
}
