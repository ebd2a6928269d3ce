package projections_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// TestStandbyRecordsWait: the records of a partition the node stands by
// for (owned, not served) wait until a reader or a change needs them, and
// each is applied exactly once however they come out: served, waited for,
// a record of no partition after them, lost and regained, a restart.
func TestStandbyRecordsWait(t *testing.T) {
	l := openLog(t)
	fs := vfs.NewMem()
	// A delay longer than the test: only the events under test apply what
	// is held.
	open := func() (*projections.Runner, *projections.Store, *perPartition) {
		return openStandby(t, l, fs, time.Minute)
	}
	r, s, pp := open()
	stop := run(t, r)
	waitParts(t, r, events.NewPartitionSet(1, 2), events.Start)
	count := func(p events.Partition, want uint64, when string) {
		t.Helper()
		if got := countOf(t, s, p); got != want {
			t.Errorf("%s: partition %d holds %d records, want %d", when, p, got, want)
		}
	}

	appendIn(t, l, 1, 3)
	head := appendIn(t, l, 2, 4)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head) // the main lane read them
	count(1, 3, "served partition")
	count(2, 0, "standby partition before anything needs it")

	// Served from now on: applied before the projection is told.
	r.Serve(events.NewPartitionSet(1, 2))
	count(2, 4, "after Serve")
	if told := pp.liveSet(); !told.Has(2) {
		t.Errorf("PartitionsChanged was told %s, want partition 2 in it", told)
	}

	// A standby again: a wait for the partition applies what is held.
	r.Serve(events.NewPartitionSet(1))
	head = appendIn(t, l, 2, 2)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)
	count(2, 4, "held again")
	waitParts(t, r, events.NewPartitionSet(2), head)
	count(2, 6, "after WaitForPartition")

	// A record of no partition that a partitioned projection applies
	// comes after the held ones: they are applied first.
	appendIn(t, l, 2, 1)
	head = appendIn(t, l, events.NoPartition, 1)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)
	count(2, 7, "after a record of no partition")
	count(events.NoPartition, 1, "records of no partition")

	// Lost while held: passed over, and caught up from its checkpoint when
	// regained (a second apply fails the runner).
	head = appendIn(t, l, 2, 2)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)
	r.Own(events.NewPartitionSet(1))
	r.Own(events.NewPartitionSet(1, 2))
	waitParts(t, r, events.NewPartitionSet(1, 2), head)
	count(2, 9, "lost and regained")

	// Held when the node stops: nothing of them was written, and the next
	// start catches them up.
	head = appendIn(t, l, 2, 3)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)
	count(2, 9, "held before the stop")
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, s, _ = open()
	run(t, r)
	waitParts(t, r, events.NewPartitionSet(1, 2), head)
	count(2, 12, "after the restart")
}

// TestStandbyRecordsApplyWhenDue: with no reader and no change, held
// records are applied once the oldest has waited the delay, even when the
// log goes quiet.
func TestStandbyRecordsApplyWhenDue(t *testing.T) {
	l := openLog(t)
	r, s, _ := openStandby(t, l, vfs.NewMem(), 20*time.Millisecond)
	run(t, r)
	head := appendIn(t, l, 2, 5)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)
	deadline := time.Now().Add(10 * time.Second)
	for countOf(t, s, 2) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("held records not applied 10 s after the delay of 20 ms: %d of 5", countOf(t, s, 2))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStandbyReleasesOnlyWhatIsNeeded: a promotion or a read applies the
// held records of its own partitions; the others' stay held until they
// are needed or due, and are applied once.
func TestStandbyReleasesOnlyWhatIsNeeded(t *testing.T) {
	l := openLog(t)
	r, s, _ := openStandby(t, l, vfs.NewMem(), time.Minute)
	r.Own(events.NewPartitionSet(1, 2, 3)) // serves 1, stands by for 2 and 3
	run(t, r)
	waitParts(t, r, events.NewPartitionSet(1, 2, 3), events.Start)
	appendIn(t, l, 2, 4)
	head := appendIn(t, l, 3, 5)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)

	r.Serve(events.NewPartitionSet(1, 2))
	if got := countOf(t, s, 2); got != 4 {
		t.Errorf("promoted partition 2 holds %d records, want 4", got)
	}
	if got := countOf(t, s, 3); got != 0 {
		t.Errorf("partition 3, still a standby, holds %d records after 2's promotion, want 0 (held)", got)
	}
	head = appendIn(t, l, 3, 1)
	waitParts(t, r, events.NewPartitionSet(events.NoPartition), head)
	if !r.Fresh(events.NewPartitionSet(3)) {
		t.Error("Fresh(3) applied nothing, want partition 3's held records")
	}
	if got := countOf(t, s, 3); got != 6 {
		t.Errorf("partition 3 holds %d records after Fresh, want 6", got)
	}
	if r.Fresh(events.NewPartitionSet(3)) {
		t.Error("a second Fresh(3) applied something again")
	}
}

// openStandby opens a runner of a perPartition projection that owns
// partitions 1 and 2 and serves 1: it stands by for 2.
func openStandby(t *testing.T, l events.Log, fs vfs.FS, delay time.Duration) (*projections.Runner, *projections.Store, *perPartition) {
	t.Helper()
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs, Logger: slog.New(slog.DiscardHandler), StandbyDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	pp := &perPartition{}
	s, err := r.Register(pp)
	if err != nil {
		t.Fatal(err)
	}
	r.Own(events.NewPartitionSet(1, 2))
	r.Serve(events.NewPartitionSet(1))
	return r, s, pp
}
