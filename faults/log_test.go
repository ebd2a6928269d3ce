package faults_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/faults"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

func memLog(t *testing.T) *embedded.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func plan(t *testing.T, stream string, chunks int) []events.Event {
	t.Helper()
	evs := []events.Event{}
	ev, err := events.Encode(&hooklinev1.EventPublished{EventId: stream}, "p", stream)
	if err != nil {
		t.Fatal(err)
	}
	evs = append(evs, ev)
	for i := range chunks {
		ev, err := events.Encode(&hooklinev1.DeliveriesPlanned{EventId: stream, Chunk: int32(i)}, fmt.Sprint("c", i), stream)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestLogUnknownOutcome: every Nth append lands and answers an error that
// says its outcome is unknown; reading the stream shows it landed.
func TestLogUnknownOutcome(t *testing.T) {
	raw := memLog(t)
	l := (&faults.Set{UnknownEvery: 2}).Log(raw)
	ctx := context.Background()
	for i := range 4 {
		stream := fmt.Sprintf("event-t.e%d", i)
		_, err := l.Append(ctx, stream, events.NoStream{}, plan(t, stream, 1)...)
		if wantErr := i%2 == 1; wantErr != (err != nil) {
			t.Fatalf("append %d: %v", i, err)
		}
		if err != nil && (!errors.Is(err, faults.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded)) {
			t.Errorf("append %d: %v, want ErrUnknownOutcome and a deadline", i, err)
		}
		if recs, err := raw.ReadStream(ctx, stream, events.Forwards, 0, 10); err != nil || len(recs) != 2 {
			t.Errorf("append %d did not land: %d records, %v", i, len(recs), err)
		}
	}
}

// TestLogKillInPlan: the process is killed at the Nth multi-chunk plan,
// not at single-chunk ones.
func TestLogKillInPlan(t *testing.T) {
	killed := make(chan struct{})
	s := &faults.Set{KillInPlan: 2, Kill: func() { close(killed) }}
	l := s.Log(memLog(t))
	ctx := context.Background()
	for i, chunks := range []int{1, 2, 1, 3} {
		stream := fmt.Sprintf("event-t.e%d", i)
		if _, err := l.Append(ctx, stream, events.NoStream{}, plan(t, stream, chunks)...); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			select {
			case <-killed:
				t.Fatalf("killed at append %d", i)
			default:
			}
		}
	}
	<-killed // the fourth append, the second with several chunks
}
