package projections_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// renamed is a perPartition under another name: a second partitioned
// projection beside the first.
type renamed struct{ *perPartition }

func (renamed) Name() string { return "other" }

// TestRebuildWhileRunning: a partitioned projection rebuilt while records
// stream in starts over from the start of the log and ends with every
// record of its partitions applied exactly once; the projection beside it
// applies nothing twice (either would stop the runner); a projection of no
// partition is rebuilt by the main lane while running, and before Run.
func TestRebuildWhileRunning(t *testing.T) {
	l := openLog(t)
	fs := vfs.NewMem()
	open := func(pp *perPartition) (*projections.Runner, *projections.Store, *projections.Store, *projections.Store) {
		t.Helper()
		r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Register(pp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Register(renamed{&perPartition{}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Register(&counter{})
		if err != nil {
			t.Fatal(err)
		}
		return r, a, b, c
	}
	pp := &perPartition{}
	r, a, b, c := open(pp)
	owned := events.NewPartitionSet(1, 2)
	r.Own(owned)
	stop := run(t, r)
	appendIn(t, l, 1, 30)
	appendIn(t, l, 2, 20)
	appendIn(t, l, 3, 5) // not owned
	head := createTenants(t, l, 0, 4)
	waitParts(t, r, owned, head)

	if err := r.Rebuild("nope"); err == nil {
		t.Error("Rebuild of an unknown projection succeeded")
	}
	mark := pp.toldCount()
	if err := r.Rebuild("perpartition"); err != nil {
		t.Fatal(err)
	}
	// The rebuilt partitions stop being live at once; they may be live
	// again before this line runs (a catch-up of 50 records is quick),
	// so the projection's record of what it was told is the witness.
	if told := pp.toldSince(mark); len(told) == 0 || told[0].Has(1) || told[0].Has(2) {
		t.Errorf("partitions told right after Rebuild: %v, want first a set without 1 and 2", told)
	}
	appendIn(t, l, 1, 10)
	head = appendIn(t, l, 2, 10)
	waitParts(t, r, owned, head)
	for _, s := range []struct {
		name  string
		store *projections.Store
	}{{"rebuilt", a}, {"beside", b}} {
		for p, want := range map[events.Partition]uint64{1: 40, 2: 30, 3: 0} {
			if got := countOf(t, s.store, p); got != want {
				t.Errorf("%s projection: partition %d applied %d records, want %d", s.name, p, got, want)
			}
		}
	}
	if got := stored(t, c); got != 4 {
		t.Errorf("counter holds %d, want 4", got)
	}

	// A projection of no partition, while running: the main lane applies
	// it again from the start, and nothing else twice.
	if err := r.Rebuild("counter"); err != nil {
		t.Fatal(err)
	}
	head = createTenants(t, l, 4, 5)
	waitParts(t, r, owned, head)
	if got := stored(t, c); got != 5 {
		t.Errorf("counter rebuilt while running holds %d, want 5", got)
	}
	for p, want := range map[events.Partition]uint64{1: 40, 2: 30} {
		if got := countOf(t, a, p); got != want {
			t.Errorf("after the counter's rebuild: partition %d applied %d records, want %d", p, got, want)
		}
	}

	// Before Run, a projection of no partition rebuilds from the start.
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, _, _, c = open(&perPartition{})
	if err := r.Rebuild("counter"); err != nil {
		t.Fatal(err)
	}
	r.Own(owned)
	run(t, r)
	head = createTenants(t, l, 5, 6)
	waitParts(t, r, owned, head)
	if got := stored(t, c); got != 6 {
		t.Errorf("counter rebuilt before Run holds %d, want 6", got)
	}
}
