package node

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestAppendMarks: the endpoint grains' log notes, by partition, where
// their last append landed, so that a grain of the endpoint started later
// on this node waits for the projections to have it; an append that
// failed leaves the position unknown, and a grain then waits for the log's
// head, as every grain did before.
func TestAppendMarks(t *testing.T) {
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var marks appendMarks
	ml := markedLog{Log: l, marks: &marks}
	p, q := events.PartitionOf("ep_1"), events.PartitionOf("ep_2")
	if p == q {
		t.Fatal("ep_1 and ep_2 share a partition; pick other ids")
	}
	n := 0
	ev := func(endpointID string) events.Event { // a new event each time
		n++
		e, err := events.EncodeIn(&hooklinev1.EndpointPaused{EndpointId: endpointID}, fmt.Sprint("cause_", n), "delivery-"+endpointID, events.PartitionOf(endpointID))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	first, err := ml.Append(t.Context(), "delivery-ep_1", events.Any{}, ev("ep_1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(t.Context(), "delivery-ep_1b", events.Any{}, ev("ep_1")); err != nil { // not a grain's
		t.Fatal(err)
	}
	if at, known := marks.in(p); !known || at != first.Position {
		t.Fatalf("partition of ep_1: %v (known %v), want the grain's append at %v", at, known, first.Position)
	}
	if at, known := marks.in(q); !known || !at.IsStart() {
		t.Fatalf("partition of ep_2, never appended to: %v (known %v), want the start", at, known)
	}
	if _, err := ml.Append(t.Context(), "delivery-ep_2", events.NoStream{}, ev("ep_2")); err != nil {
		t.Fatal(err)
	}
	if _, err := ml.Append(t.Context(), "delivery-ep_2", events.NoStream{}, ev("ep_2")); err == nil {
		t.Fatal("a second append expecting no stream landed")
	}
	if _, known := marks.in(q); known {
		t.Fatal("after a failed append the partition's last append is still known; a grain could start before it")
	}
	if _, known := marks.in(p); !known {
		t.Fatal("a failed append to another partition made this one's unknown")
	}
}
