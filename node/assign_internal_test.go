package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/owners"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestAssignGoesPastUnrelatedChanges: a change of the table whose expected
// revision another change overtook lands after it when that change names
// none of its partitions (two members handing partitions to one that came
// back, at the same moment), and is refused when it names one of them: the
// member then decides again on the table as it is.
func TestAssignGoesPastUnrelatedChanges(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	l, r := memLogAndRunner(t)
	o, err := owners.New(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	m := &partitions{log: l, runner: r, owners: o, logger: quiet, now: time.Now}
	other := func(expected events.ExpectedRevision, ps ...uint32) {
		t.Helper()
		e, err := events.Encode(&hooklinev1.PartitionsAssigned{Owner: "b:1", Partitions: ps,
			Reason: hooklinev1.PartitionsAssigned_REASON_START, At: timestamppb.Now()}, "other/"+expected.String(), events.OwnersStream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, events.OwnersStream, expected, e); err != nil {
			t.Fatal(err)
		}
	}
	stream := func() []events.Record {
		t.Helper()
		recs, err := l.ReadStream(ctx, events.OwnersStream, events.Forwards, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}

	// This member read the table before b's change of partition 5.
	expected := o.Table().Expected()
	other(expected, 5)
	pos, ok := m.assign(ctx, &expected, []events.Partition{1, 2}, "a:1", "", hooklinev1.PartitionsAssigned_REASON_START, nil)
	if !ok {
		t.Fatal("a change of partitions 1 and 2 was refused after a change of partition 5 alone; want it appended after it")
	}
	recs := stream()
	if len(recs) != 2 || recs[1].Position != pos {
		t.Fatalf("the table's stream holds %d changes (want b's, then a's at %v)", len(recs), pos)
	}
	if want := events.ExpectAfter(recs[1].Revision, true); expected != want {
		t.Errorf("expected revision after the append = %v, want %v (the next change follows this one)", expected, want)
	}

	// Now b changes partition 3 before this member's change of it.
	stale := expected
	other(stale, 3)
	if _, ok := m.assign(ctx, &stale, []events.Partition{3, 4}, "a:1", "", hooklinev1.PartitionsAssigned_REASON_START, nil); ok {
		t.Fatal("a change of partition 3 landed after another member's change of partition 3; want it refused")
	}
	if n := len(stream()); n != 3 {
		t.Fatalf("the table's stream holds %d changes, want 3: the refused change must not be appended", n)
	}
}

// memLogAndRunner opens an embedded log and a projection runner on it, both
// in memory and quiet, closed when the test ends.
func memLogAndRunner(t *testing.T) (*embedded.Log, *projections.Runner) {
	t.Helper()
	fs, quiet := vfs.NewMem(), slog.New(slog.DiscardHandler)
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r, err := projections.Open(l, projections.Config{Dir: "projections", FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return l, r
}
