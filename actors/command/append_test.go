package command_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

func TestEncodeIDs(t *testing.T) {
	paused := &hooklinev1.EndpointPaused{EndpointId: "ep_1"}
	resumed := &hooklinev1.EndpointResumed{EndpointId: "ep_1"}
	enc := func(last events.Revision, exists bool, msgs ...proto.Message) []events.Event {
		t.Helper()
		evs, err := command.Encode("endpoint-ep_1", "endpoint", "pause", last, exists, msgs)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	a, b := enc(4, true, paused, resumed), enc(4, true, paused, resumed)
	if a[0].ID != b[0].ID || a[1].ID != b[1].ID {
		t.Fatal("the same events at the same revisions got other ids: a retried append would not be idempotent")
	}
	if a[0].ID == a[1].ID {
		t.Fatal("two events of one append share an id")
	}
	if other := enc(4, true, resumed); other[0].ID == a[0].ID {
		t.Fatal("another event at the same revision got the same id: a stale writer would pass for a retry")
	}
	if moved := enc(5, true, paused); moved[0].ID == a[0].ID {
		t.Fatal("the same event at another revision got the same id")
	}
	if fresh := enc(0, false, paused); fresh[0].ID == enc(0, true, paused)[0].ID {
		t.Fatal("revision 0 of a new stream and revision 1 of an existing one share an id")
	}
}

func TestAppendFailure(t *testing.T) {
	tests := []struct {
		err        error
		code       internalv1.GrainError_Code
		stop, lost bool
	}{
		{&events.WrongRevisionError{Stream: "tenant-a", Expected: events.Exact(3)}, internalv1.GrainError_CODE_ABORTED, true, true},
		{fmt.Errorf("append: %w", events.ErrTooLarge), internalv1.GrainError_CODE_INTERNAL, false, false},
		{events.ErrInvalid, internalv1.GrainError_CODE_INTERNAL, false, false},
		{errors.New("connection reset"), internalv1.GrainError_CODE_UNAVAILABLE, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			f := command.AppendFailure("tenant", tt.err)
			if f.Code != tt.code || f.Stop != tt.stop || f.Lost != tt.lost || f.Message == "" {
				t.Fatalf("got %+v", f)
			}
		})
	}
}
