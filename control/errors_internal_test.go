package control

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestUnavailableGrainAnswersUnavailable: a grain request that no member
// could serve (its owner moving or out of reach) answers UNAVAILABLE, which
// callers retry, and keeps its cause in the message; any other failure of
// the request stays INTERNAL.
func TestUnavailableGrainAnswersUnavailable(t *testing.T) {
	cause := errors.New("no owner of endpoint/ep_1 answered")
	err := toStatus(fmt.Errorf("endpoint ep_1: %w", fmt.Errorf("%w: %w", ErrUnavailable, cause)))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("unavailable grain: %v, want UNAVAILABLE", err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "retry the request") || !strings.Contains(msg, cause.Error()) {
		t.Errorf("message %q should say to retry and name the cause", msg)
	}
	if err := toStatus(fmt.Errorf("endpoint ep_1: %w", cause)); status.Code(err) != codes.Internal {
		t.Errorf("other failure: %v, want INTERNAL", err)
	}
}
