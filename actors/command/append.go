package command

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// Encode turns the events of one command into log events for stream, whose
// last revision the grain holds (exists=false: the stream is new). Each id's
// cause names the grain kind, the command kind, the revision the event goes
// to, its type and a digest of its content: a retried append of the same events is
// idempotent, while a stale activation appending other events at the same
// revision gets other ids and fails with a wrong revision instead of passing
// for a retry.
func Encode(stream, grainKind, cmdKind string, last events.Revision, exists bool, msgs []proto.Message) ([]events.Event, error) {
	evs := make([]events.Event, len(msgs))
	for i, m := range msgs {
		rev := events.Revision(i)
		if exists {
			rev = last + 1 + events.Revision(i)
		}
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", events.TypeOf(m), err)
		}
		sum := sha256.Sum256(data)
		// The type is part of the cause: two events of different types can
		// have the same bytes (EndpointPaused and EndpointResumed of one
		// endpoint do).
		ev, err := events.Encode(m, fmt.Sprintf("%s.%s@%d/%s/%x", grainKind, cmdKind, uint64(rev), events.TypeOf(m), sum[:8]), stream)
		if err != nil {
			return nil, err
		}
		evs[i] = ev
	}
	return evs, nil
}

// Failure is what a failed append means for the grain that made it.
type Failure struct {
	// Code and Message answer the command.
	Code    internalv1.GrainError_Code
	Message string
	// Stop is true when the grain must stop: it lost ownership of its
	// stream (a wrong revision: fencing), or it cannot know whether the
	// append landed and the next activation must read the truth.
	Stop bool
	// Lost is true for a wrong revision.
	Lost bool
}

// AppendFailure classifies a failed append of a grain of the given kind
// ("tenant", "endpoint").
func AppendFailure(grainKind string, err error) Failure {
	switch {
	case errors.Is(err, events.ErrWrongRevision):
		return Failure{Code: internalv1.GrainError_CODE_ABORTED, Message: "another activation of the " + grainKind + " grain owns its stream now; retry", Stop: true, Lost: true}
	case errors.Is(err, events.ErrTooLarge), errors.Is(err, events.ErrInvalid):
		return Failure{Code: internalv1.GrainError_CODE_INTERNAL, Message: "the log refused the event"}
	}
	return Failure{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: "the event log is unavailable; retry", Stop: true}
}
