package reconcile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/faults"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/reconcile"
)

// node is a node's projections over a test log, seen through a fault set
// (hide: they miss a record of the log), and its reconciler.
type node struct {
	runner *projections.Runner
	r      *reconcile.Reconciler
}

func newNode(t *testing.T, tl *testLog, fs *faults.Set, now time.Time) *node {
	t.Helper()
	runner, err := projections.Open(fs.ProjectionsLog(tl.l), projections.Config{Dir: "proj", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(runner)
	if err != nil {
		t.Fatal(err)
	}
	d, err := due.New(runner, due.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.New(runner, history.Config{Log: tl.l, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runner.Own(events.AllPartitions())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		runner.Close()
	})
	r, err := reconcile.New(reconcile.Config{Log: tl.l, Runner: runner, Registry: reg, Due: d, History: h, Logger: quiet,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return &node{runner: runner, r: r}
}

func (n *node) part(t *testing.T, tl *testLog, id string, repair bool) []found {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := n.r.Part(ctx, reconcile.Run{ID: id, Head: tl.head(), Repair: repair}, events.AllPartitions())
	if err != nil {
		t.Fatal(err)
	}
	if p.GetError() != "" {
		t.Fatal(p.GetError())
	}
	return foundOf(p.GetDiscrepancies())
}

func succeeded(tenant, event, ep string, number int32) *hooklinev1.AttemptSucceeded {
	return &hooklinev1.AttemptSucceeded{Attempt: &hooklinev1.Attempt{TenantId: tenant, EndpointId: ep, EventId: event,
		DeliveryId: events.DeliveryID(tenant, event, ep), Number: number, HttpStatus: 200}}
}

// repairs runs the node's part three times: "r1" must find want, the
// repair run "r2" find and repair it, and "r3" find nothing.
func (n *node) repairs(t *testing.T, tl *testLog, want []found) {
	t.Helper()
	if diff := cmp.Diff(want, n.part(t, tl, "r1", false)); diff != "" {
		t.Fatalf("first run (-want +got):\n%s", diff)
	}
	repaired := slices.Clone(want)
	for i := range repaired {
		repaired[i].Repaired = true
	}
	if diff := cmp.Diff(repaired, n.part(t, tl, "r2", true)); diff != "" {
		t.Errorf("repair run (-want +got):\n%s", diff)
	}
	if got := n.part(t, tl, "r3", false); len(got) != 0 {
		t.Errorf("second run after the repair: %+v", got)
	}
}

// TestPartRepairsDivergentProjections: projections that missed a record
// of the log (the fault switch hides it from them) are found by the
// deliveries, attempts and projections checks, with the delivery's id;
// the repair rebuilds them from the log and a second run is clean.
func TestPartRepairsDivergentProjections(t *testing.T) {
	const tn, ep = "t1", "ep_1"
	for _, tc := range []struct {
		name string
		hide string
		want func(d1, d2 string) []found
	}{
		{"an outcome missed: ended yet due", "hide=AttemptSucceeded:1", func(d1, _ string) []found {
			return []found{
				{Kind: reconcile.KindProjectionDiverged, Deliveries: []string{d1}, Repairable: true},
				{Kind: reconcile.KindProjectionDiverged, Deliveries: []string{d1}, Repairable: true},
				{Kind: reconcile.KindDueAfterEnd, Event: "e1", Deliveries: []string{d1}, Repairable: true},
				{Kind: reconcile.KindHistoryStatus, Event: "e1", Deliveries: []string{d1}, Repairable: true},
			}
		}},
		{"a plan missed: pending, not due", "hide=DeliveriesPlanned:2", func(_, d2 string) []found {
			return []found{
				{Kind: reconcile.KindProjectionDiverged, Deliveries: []string{d2}, Repairable: true},
				{Kind: reconcile.KindProjectionDiverged, Deliveries: []string{d2}, Repairable: true},
				{Kind: reconcile.KindStranded, Event: "e2", Deliveries: []string{d2}, Repairable: true},
				{Kind: reconcile.KindHistoryMissing, Event: "e2", Deliveries: []string{d2}, Repairable: true},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTestLog(t)
			tl.append(events.TenantStream(tn), events.NoPartition, &hooklinev1.TenantCreated{TenantId: tn, Name: "T"})
			tl.endpoint(tn, ep, "a")
			tl.publish(tn, "e1", "a", 1, []string{ep})
			tl.append(events.DeliveryStream(events.DeliveryID(tn, "e1", ep)), events.PartitionOf(ep), succeeded(tn, "e1", ep, 1))
			tl.publish(tn, "e2", "a", 1, []string{ep})
			fs, err := faults.Parse(tc.hide)
			if err != nil {
				t.Fatal(err)
			}
			n := newNode(t, tl, fs, tl.now.Add(time.Second))
			d1, d2 := events.DeliveryID(tn, "e1", ep), events.DeliveryID(tn, "e2", ep)
			n.repairs(t, tl, tc.want(d1, d2))
			recs, err := tl.l.ReadStream(context.Background(), events.ReconcileStream("r2.local"), events.Forwards, 0, 10)
			if err != nil || len(recs) != 2 {
				t.Fatalf("repairs recorded: %d, %v; want two rebuilds", len(recs), err)
			}
		})
	}
}

// TestPartLogAnomalies: what the log itself says wrong is reported with
// the delivery's id and cannot be repaired: it stays after a repair run.
func TestPartLogAnomalies(t *testing.T) {
	const tn = "t1"
	tl := newTestLog(t)
	tl.endpoint(tn, "ep_1", "a")
	tl.endpoint(tn, "ep_2", "a")
	tl.publish(tn, "e1", "a", 2, []string{"ep_1"}, []string{"ep_2"})
	d1, d2 := events.DeliveryID(tn, "e1", "ep_1"), events.DeliveryID(tn, "e1", "ep_2")
	// d1: its only attempt is numbered 2, and it succeeded twice.
	tl.append(events.DeliveryStream(d1), events.PartitionOf("ep_1"), succeeded(tn, "e1", "ep_1", 2), succeeded(tn, "e1", "ep_1", 2))
	// d2: expired counting 3 attempts where its stream has none.
	tl.append(events.DeliveryStream(d2), events.PartitionOf("ep_2"), &hooklinev1.DeliveryExpired{
		TenantId: tn, EndpointId: "ep_2", EventId: "e1", DeliveryId: d2, Attempts: 3, At: timestamppb.New(tl.now)})
	// An outcome of a delivery nobody planned.
	d3 := events.DeliveryID(tn, "e9", "ep_1")
	tl.append(events.DeliveryStream(d3), events.PartitionOf("ep_1"), succeeded(tn, "e9", "ep_1", 1))

	n := newNode(t, tl, nil, tl.now.Add(time.Second))
	want := []found{
		{Kind: reconcile.KindAttemptNumbering, Event: "e1", Deliveries: []string{d1}},
		{Kind: reconcile.KindExpiredCount, Event: "e1", Deliveries: []string{d2}},
		{Kind: reconcile.KindSucceededTwice, Event: "e1", Deliveries: []string{d1}},
		{Kind: reconcile.KindOutcomeUnplanned, Event: "e9", Deliveries: []string{d3}},
	}
	if diff := cmp.Diff(want, n.part(t, tl, "r1", false)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, n.part(t, tl, "r2", true)); diff != "" {
		t.Errorf("after a repair run (-want +got):\n%s", diff)
	}
}

// TestPartHeldAndDeleted: due work of a paused endpoint is held, not a
// discrepancy; that of a deleted endpoint is due_deleted_endpoint once it
// has waited NotPulledAfter (a stopped node has no grain to wake: not
// repairable here).
func TestPartHeldAndDeleted(t *testing.T) {
	const tn = "t1"
	tl := newTestLog(t)
	tl.endpoint(tn, "ep_paused", "a")
	tl.endpoint(tn, "ep_gone", "a")
	tl.publish(tn, "e1", "a", 2, []string{"ep_paused"}, []string{"ep_gone"})
	tl.append(events.EndpointStream("ep_paused"), events.NoPartition, &hooklinev1.EndpointPaused{TenantId: tn, EndpointId: "ep_paused"})
	tl.append(events.EndpointStream("ep_gone"), events.NoPartition, &hooklinev1.EndpointDeleted{TenantId: tn, EndpointId: "ep_gone"})

	fresh := newNode(t, tl, nil, tl.now.Add(10*time.Second))
	if got := fresh.part(t, tl, "r0", false); len(got) != 0 {
		t.Errorf("due for 10 s: %v, want nothing yet", got)
	}
	n := newNode(t, tl, nil, tl.now.Add(2*time.Minute))
	want := []found{{Kind: reconcile.KindDeletedHolding, Deliveries: []string{events.DeliveryID(tn, "e1", "ep_gone")}}}
	ctx := context.Background()
	p, err := n.r.Part(ctx, reconcile.Run{ID: "r1", Head: tl.head()}, events.AllPartitions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, foundOf(p.GetDiscrepancies())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got := tenantOf(p, tn)
	if got.GetPlanned() != 2 || got.GetPending() != 2 || got.GetDue() != 2 || got.GetHeld() != 1 {
		t.Errorf("tenant counts %v: want 2 planned, 2 pending, 2 due, 1 held", got)
	}
}

// TestPartAttemptCount: the history missed a failed attempt of a delivery
// that later succeeded (the fault switch hides the failure from the
// projections), so it counts one attempt where the log records two: the
// attempts check reports attempt_count with the delivery's id, the repair
// rebuilds the history from the log, and a second run is clean.
func TestPartAttemptCount(t *testing.T) {
	const tn, ep = "t1", "ep_1"
	tl := newTestLog(t)
	tl.append(events.TenantStream(tn), events.NoPartition, &hooklinev1.TenantCreated{TenantId: tn, Name: "T"})
	tl.endpoint(tn, ep, "a")
	tl.publish(tn, "e1", "a", 1, []string{ep})
	d1 := events.DeliveryID(tn, "e1", ep)
	failed := &hooklinev1.AttemptFailed{Attempt: &hooklinev1.Attempt{TenantId: tn, EndpointId: ep, EventId: "e1",
		DeliveryId: d1, Number: 1, HttpStatus: 503}, Retryable: true, NextAttemptAt: timestamppb.New(tl.now)}
	tl.append(events.DeliveryStream(d1), events.PartitionOf(ep), failed, succeeded(tn, "e1", ep, 2))
	fs, err := faults.Parse("hide=AttemptFailed:1")
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, tl, fs, tl.now.Add(time.Second))
	n.repairs(t, tl, []found{
		{Kind: reconcile.KindProjectionDiverged, Deliveries: []string{d1}, Repairable: true},
		{Kind: reconcile.KindAttemptCount, Event: "e1", Deliveries: []string{d1}, Repairable: true},
	})
}
