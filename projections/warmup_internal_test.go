package projections

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

// TestWarmingUp: a catch-up is a warm-up, which gives way, only while the
// node serves none of its partitions: before Serve (a node's first start
// serves everything it owns) and for a partition it serves (a takeover
// without a standby), it goes at full speed.
func TestWarmingUp(t *testing.T) {
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r, err := Open(l, Config{Dir: "proj", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	catching := events.NewPartitionSet(3, 4)
	if r.warmingUp(catching) {
		t.Error("before Serve: a warm-up; want full speed (the node serves everything it owns)")
	}
	r.Serve(events.NewPartitionSet(1, 2))
	if !r.warmingUp(catching) {
		t.Error("serving 1 and 2, catching up 3 and 4: full speed; want a warm-up")
	}
	r.Serve(events.NewPartitionSet(1, 4))
	if r.warmingUp(catching) {
		t.Error("serving 4, catching it up: a warm-up; want full speed")
	}
}
