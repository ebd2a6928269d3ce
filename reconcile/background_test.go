package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/reconcile"
)

// TestBackgroundPlans: the background checks count the publishes since
// their start whose plan is missing or incomplete (once a whole run has
// passed over them), and not the complete ones nor those before.
func TestBackgroundPlans(t *testing.T) {
	tl := newTestLog(t)
	tl.endpoint("t1", "ep_1", "a")
	tl.publish("t1", "before", "a", 0) // before the start: not followed
	r, err := reconcile.New(reconcile.Config{Log: tl.l, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Background(time.Hour)
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	check := func() map[string]int64 {
		t.Helper()
		if err := b.Check(ctx); err != nil {
			t.Fatal(err)
		}
		c, _, _, _ := b.Counts()
		return c
	}
	tl.publish("t1", "ok", "a", 2, []string{"ep_1"}, []string{"ep_1"})
	tl.publish("t1", "none", "a", 0)
	tl.publish("t1", "half", "a", 2, []string{"ep_1"})
	if c := check(); c[reconcile.KindPlanMissing] != 0 || c[reconcile.KindPlanIncomplete] != 0 {
		t.Errorf("counted after one run: %v, want nothing yet", c)
	}
	if c := check(); c[reconcile.KindPlanMissing] != 1 || c[reconcile.KindPlanIncomplete] != 1 {
		t.Errorf("counts %v, want one missing and one incomplete plan", c)
	}
}

// TestBackgroundPlansOnOneMember: a member that does not follow the plans
// counts none of them; once it does, it counts the publishes from then on,
// and it forgets them when it stops.
func TestBackgroundPlansOnOneMember(t *testing.T) {
	tl := newTestLog(t)
	tl.endpoint("t1", "ep_1", "a")
	r, err := reconcile.New(reconcile.Config{Log: tl.l, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Background(time.Hour)
	var here atomic.Bool
	b.PlansHere(here.Load)
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	missing := func() int64 {
		t.Helper()
		if err := b.Check(ctx); err != nil {
			t.Fatal(err)
		}
		c, _, _, _ := b.Counts()
		return c[reconcile.KindPlanMissing]
	}
	tl.publish("t1", "elsewhere", "a", 0) // while another member follows
	if n, m := missing(), missing(); n != 0 || m != 0 {
		t.Fatalf("a member that does not follow the plans counted %d, then %d missing", n, m)
	}
	here.Store(true)
	if n := missing(); n != 0 {
		t.Fatalf("on taking the plans over: %d missing, want 0 (it starts at the head)", n)
	}
	tl.publish("t1", "here", "a", 0)
	if n, m := missing(), missing(); n != 0 || m != 1 {
		t.Fatalf("after a publish without a plan: %d, then %d missing, want 0, then 1", n, m)
	}
	here.Store(false)
	if n := missing(); n != 0 {
		t.Fatalf("after giving the plans up: %d missing, want 0", n)
	}
}

// TestMerge: parts are summed per tenant and per check; a partition no
// part covered, or a part's error, makes the report unclean.
func TestMerge(t *testing.T) {
	all := events.AllPartitions()
	all.Remove(events.NoPartition)
	half := events.PartitionSet{}
	for p := events.Partition(1); p <= events.Partitions/2; p++ {
		half.Add(p)
	}
	rest := all.Minus(half)
	part := func(ps events.PartitionSet, planned int64) *internalv1.ReconcilePartDone {
		return &internalv1.ReconcilePartDone{Partitions: ps.Words(),
			Tenants: []*controlv1.ReconcileTenant{{TenantId: "t1", Planned: planned, Succeeded: planned}},
			Checks:  []*controlv1.ReconcileCheck{{Name: reconcile.CheckDeliveries, Examined: planned}}}
	}
	plans := &internalv1.ReconcilePartDone{Tenants: []*controlv1.ReconcileTenant{{TenantId: "t1", Events: 7}}}
	for _, tc := range []struct {
		name  string
		parts []*internalv1.ReconcilePartDone
		clean bool
	}{
		{"covered", []*internalv1.ReconcilePartDone{plans, part(half, 3), part(rest, 4)}, true},
		{"a partition missing", []*internalv1.ReconcilePartDone{plans, part(half, 3)}, false},
		{"a node failed", []*internalv1.ReconcilePartDone{plans, part(half, 3), part(rest, 4), {Node: "n3", Error: "boom"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &controlv1.ReconcileReport{}
			reconcile.Merge(rep, 0, tc.parts...)
			if rep.GetClean() != tc.clean {
				t.Errorf("clean = %v, want %v (notes %v)", rep.GetClean(), tc.clean, rep.GetNotes())
			}
			if !tc.clean && len(rep.GetNotes()) == 0 {
				t.Error("unclean without a note saying why")
			}
			if tt := rep.GetTenants(); len(tt) != 1 || tt[0].GetEvents() != 7 {
				t.Errorf("tenants %v", tt)
			}
		})
	}
}
